//! SW4-004 §4.3 / SW4-005's caller loop as pure rules: what a gateway's answer to a
//! `RequestHandoff` means for the next step (done, wait and send again, follow a
//! redirect, or stop with a given answer), how long to wait after `OVERLOADED`, and
//! what the budget has left. The loop that sends and waits is `swarm/delegation.rs`.

/// `ErrorCode::ACK_TIMEOUT`: the delegation's budget ran out before a gateway accepted.
pub(crate) const ACK_TIMEOUT: i32 = 3;
/// `ErrorCode::VALIDATION_ERROR`: a redirect the caller must not follow.
pub(crate) const VALIDATION_ERROR: i32 = 6;
/// `ErrorCode::OVERLOADED`: the gateway is at its concurrency limit.
pub(crate) const OVERLOADED: i32 = 16;
/// `ErrorCode::REDIRECT`: another gateway should take the delegation.
pub(crate) const REDIRECT: i32 = 20;

use sw4rm_timeouts::seams::{cut, QUOTE_LIMIT};

/// The longest redirect target followed, in bytes.
pub(crate) const MAX_TARGET_LEN: usize = 256;

/// Upstream's wording for a budget spent before a gateway accepted.
pub(crate) const EXHAUSTED_TEXT: &str = "Delegation deadline exhausted before handoff acceptance";
/// The wait after an `OVERLOADED` answer with `retry_after_ms` lies in
/// `[hint, hint × (1 + this)]` (SW4-005 conformance T-006).
pub(crate) const RETRY_AFTER_JITTER: f64 = 0.2;

/// A `SwarmDelegationPolicy` with its defaults applied.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct DelegationRules {
    /// Sends again after `OVERLOADED`, at most.
    pub(crate) max_retries: u32,
    /// The first full-jitter backoff bound, ms (no `retry_after_ms`).
    pub(crate) initial_backoff_ms: u64,
    /// The bound's growth per retry.
    pub(crate) multiplier: f64,
    /// The bound's ceiling, ms.
    pub(crate) max_backoff_ms: u64,
    /// Whether a `REDIRECT` is followed.
    pub(crate) spillover: bool,
    /// Redirects followed, at most.
    pub(crate) max_redirects: u32,
}

/// A `SwarmDelegationPolicy`'s fields, as sent (0 means "the default").
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct PolicyFields {
    pub(crate) max_retries_on_overloaded: u32,
    pub(crate) initial_backoff_ms: u64,
    pub(crate) backoff_multiplier: f64,
    pub(crate) max_backoff_ms: u64,
    pub(crate) allow_spillover_routing: bool,
    pub(crate) max_redirects: u32,
}

impl DelegationRules {
    /// Upstream's defaults: 2 retries, full jitter on 250 ms × 2ⁿ up to 2 s, no
    /// spillover, at most 2 redirects.
    pub(crate) const DEFAULT: DelegationRules = DelegationRules {
        max_retries: 2,
        initial_backoff_ms: 250,
        multiplier: 2.0,
        max_backoff_ms: 2_000,
        spillover: false,
        max_redirects: 2,
    };

    /// The rules of a policy the caller wrote (`None`: the defaults). Zero (or a
    /// multiplier that is not a positive number) means the default; the retry count
    /// is taken as written (0: no retry), as in every upstream SDK.
    pub(crate) fn of(policy: Option<PolicyFields>) -> DelegationRules {
        let d = DelegationRules::DEFAULT;
        let Some(p) = policy else { return d };
        let or = |v: u64, default: u64| if v > 0 { v } else { default };
        DelegationRules {
            max_retries: p.max_retries_on_overloaded,
            initial_backoff_ms: or(p.initial_backoff_ms, d.initial_backoff_ms),
            multiplier: if p.backoff_multiplier.is_finite() && p.backoff_multiplier > 0.0 {
                p.backoff_multiplier
            } else {
                d.multiplier
            },
            max_backoff_ms: or(p.max_backoff_ms, d.max_backoff_ms),
            spillover: p.allow_spillover_routing,
            max_redirects: if p.max_redirects > 0 {
                p.max_redirects
            } else {
                d.max_redirects
            },
        }
    }
}

/// The wait before the `retry`-th send again (0 for the first) after `OVERLOADED`,
/// in ms: with a hint, in `[hint, 1.2 × hint]`; without, full jitter in
/// `[0, min(initial × multiplierⁿ, max)]`. `unit` is a draw in `[0, 1)`.
pub(crate) fn overloaded_wait_ms(
    retry_after_ms: u64,
    retry: u32,
    rules: &DelegationRules,
    unit: f64,
) -> u64 {
    let unit = if (0.0..1.0).contains(&unit) {
        unit
    } else {
        0.0
    };
    if retry_after_ms > 0 {
        let hint = retry_after_ms as f64;
        let waited = hint + unit * hint * RETRY_AFTER_JITTER;
        // Rounded down, never below the hint (a float can round a huge hint down).
        return (waited as u64).max(retry_after_ms);
    }
    let exponent = i32::try_from(retry).unwrap_or(i32::MAX);
    let bound = (rules.initial_backoff_ms as f64 * rules.multiplier.powi(exponent))
        .min(rules.max_backoff_ms as f64);
    (unit * bound) as u64
}

/// A gateway's answer, as the rules read it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Answer<'a> {
    pub(crate) accepted: bool,
    pub(crate) code: i32,
    pub(crate) retry_after_ms: u64,
    pub(crate) redirect_to: &'a str,
}

/// What the loop has done so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct LoopProgress {
    /// Retries after `OVERLOADED` made.
    pub(crate) retries: u32,
    /// Redirects followed.
    pub(crate) redirects: u32,
    /// Every gateway sent a `RequestHandoff`, in order (trimmed ids).
    pub(crate) visited: Vec<String>,
}

/// Why the loop stops with the gateway's own answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settled {
    /// The gateway accepted.
    Accepted,
    /// A rejection the loop does not act on.
    Rejected,
    /// `OVERLOADED` after the last retry the policy allows.
    RetriesSpent,
    /// `REDIRECT` with spillover off.
    SpilloverOff,
    /// `REDIRECT` past `max_redirects`.
    RedirectLimit,
    /// `OVERLOADED` asking for a wait (ms) longer than the budget has left: not
    /// waited, and the gateway's answer (its `retry_after_ms` with it) is the answer,
    /// as upstream's `delegate_to_swarm` returns it.
    WaitBeyondBudget(u64),
}

/// Why the loop stops with an answer of its own making.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Made {
    /// `VALIDATION_ERROR`: a redirect without a target.
    EmptyTarget,
    /// `VALIDATION_ERROR`: a redirect to a gateway already visited.
    Loop(String),
    /// `VALIDATION_ERROR`: a redirect target longer than [`MAX_TARGET_LEN`] bytes (a
    /// peer's text is bounded before it is kept).
    TargetTooLong(usize),
    /// `ACK_TIMEOUT`: the budget is spent.
    Exhausted,
}

impl Made {
    /// The answer's `ErrorCode`.
    pub(crate) fn code(&self) -> i32 {
        match self {
            Made::EmptyTarget | Made::Loop(_) | Made::TargetTooLong(_) => VALIDATION_ERROR,
            Made::Exhausted => ACK_TIMEOUT,
        }
    }

    /// The answer's `rejection_reason`, in upstream's wording.
    pub(crate) fn reason(&self) -> String {
        match self {
            Made::EmptyTarget => {
                "Redirect response missing non-empty redirect_to_agent_id".to_owned()
            }
            Made::Loop(target) => format!(
                "Redirect loop detected for agent '{}'",
                cut(target, QUOTE_LIMIT)
            ),
            Made::TargetTooLong(len) => format!(
                "Redirect target of {len} bytes refused: an agent id is at most \
                 {MAX_TARGET_LEN} bytes"
            ),
            Made::Exhausted => EXHAUSTED_TEXT.to_owned(),
        }
    }
}

/// The loop's next step after an answer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Step {
    /// Stop with the gateway's answer.
    Keep(Settled),
    /// Stop with an answer of the loop's making.
    Make(Made),
    /// Wait this many ms, then send to the same gateway again.
    Retry(u64),
    /// Send to this gateway next.
    Redirect(String),
}

/// The next step after `answer`, with `left_ms` of the budget left (the smaller of
/// the wall time and the epoch deadline, and of any scope's caps) and `unit` a draw in
/// `[0, 1)` for the jitter. Checks, in upstream's order: accepted; budget spent;
/// `REDIRECT` (spillover off, empty target, loop, then the bound); `OVERLOADED`
/// (retries spent, then a wait the budget cannot hold: not waited, and the gateway's
/// own answer returned).
pub(crate) fn next_step(
    answer: Answer<'_>,
    progress: &LoopProgress,
    rules: &DelegationRules,
    left_ms: u64,
    unit: f64,
) -> Step {
    if answer.accepted {
        return Step::Keep(Settled::Accepted);
    }
    if left_ms == 0 {
        return Step::Make(Made::Exhausted);
    }
    match answer.code {
        REDIRECT => redirect(answer.redirect_to, progress, rules),
        OVERLOADED => {
            if progress.retries >= rules.max_retries {
                return Step::Keep(Settled::RetriesSpent);
            }
            let wait = overloaded_wait_ms(answer.retry_after_ms, progress.retries, rules, unit);
            if wait > left_ms {
                Step::Keep(Settled::WaitBeyondBudget(wait))
            } else {
                Step::Retry(wait)
            }
        }
        _ => Step::Keep(Settled::Rejected),
    }
}

fn redirect(target: &str, progress: &LoopProgress, rules: &DelegationRules) -> Step {
    if !rules.spillover {
        return Step::Keep(Settled::SpilloverOff);
    }
    let target = target.trim();
    if target.is_empty() {
        return Step::Make(Made::EmptyTarget);
    }
    if target.len() > MAX_TARGET_LEN {
        return Step::Make(Made::TargetTooLong(target.len()));
    }
    if progress.visited.iter().any(|v| v == target) {
        return Step::Make(Made::Loop(target.to_owned()));
    }
    if progress.redirects >= rules.max_redirects {
        return Step::Keep(Settled::RedirectLimit);
    }
    Step::Redirect(target.to_owned())
}

/// What is left of a delegation's budget at `now_epoch_ms`, in ms: the smaller of
/// `wall_ms` (0: spent) and the time to `deadline_epoch_ms` (past: 0), and of
/// `scope_ms` when a scope caps the work.
pub(crate) fn left_ms(
    wall_ms: u64,
    deadline_epoch_ms: u64,
    now_epoch_ms: u64,
    scope_ms: Option<u64>,
) -> u64 {
    let epoch = deadline_epoch_ms.saturating_sub(now_epoch_ms);
    let left = wall_ms.min(epoch);
    scope_ms.map_or(left, |s| left.min(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn answer(code: i32, retry_after_ms: u64, redirect_to: &str) -> Answer<'_> {
        Answer {
            accepted: false,
            code,
            retry_after_ms,
            redirect_to,
        }
    }

    fn visited(ids: &[&str], retries: u32, redirects: u32) -> LoopProgress {
        LoopProgress {
            retries,
            redirects,
            visited: ids.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn zeros_mean_the_defaults_but_the_retry_count_is_taken_as_written() {
        let written = PolicyFields {
            max_retries_on_overloaded: 0,
            backoff_multiplier: f64::NAN,
            allow_spillover_routing: true,
            ..PolicyFields::default()
        };
        let rules = DelegationRules::of(Some(written));
        assert_eq!(
            rules,
            DelegationRules {
                max_retries: 0,
                spillover: true,
                ..DelegationRules::DEFAULT
            }
        );
        assert_eq!(DelegationRules::of(None), DelegationRules::DEFAULT);
        let set = PolicyFields {
            max_retries_on_overloaded: 5,
            initial_backoff_ms: 100,
            backoff_multiplier: 3.0,
            max_backoff_ms: 900,
            allow_spillover_routing: false,
            max_redirects: 7,
        };
        let rules = DelegationRules::of(Some(set));
        assert_eq!(
            (
                rules.max_retries,
                rules.initial_backoff_ms,
                rules.multiplier
            ),
            (5, 100, 3.0)
        );
        assert_eq!((rules.max_backoff_ms, rules.max_redirects), (900, 7));
    }

    #[test]
    fn the_wait_after_overloaded() {
        let d = DelegationRules::DEFAULT;
        // (retry_after_ms, retry, unit, want)
        let table = [
            (1_000, 0, 0.0, 1_000),
            (1_000, 0, 0.999_999, 1_199),
            (1_000, 3, 0.5, 1_100),
            (200, 0, 0.5, 220),
            // No hint: full jitter on 250 × 2ⁿ, at most 2000.
            (0, 0, 0.5, 125),
            (0, 1, 0.5, 250),
            (0, 2, 0.5, 500),
            (0, 3, 0.5, 1_000),
            (0, 4, 0.5, 1_000),
            (0, 40, 0.999, 1_998),
            (0, u32::MAX, 0.5, 1_000),
            // A draw outside [0, 1) is read as 0.
            (0, 0, 7.0, 0),
            (500, 0, f64::NAN, 500),
            // A huge hint is never waited less than itself.
            (u64::MAX, 0, 0.5, u64::MAX),
        ];
        for (hint, retry, unit, want) in table {
            assert_eq!(
                overloaded_wait_ms(hint, retry, &d, unit),
                want,
                "{hint} {retry} {unit}"
            );
        }
    }

    proptest! {
        /// T-006: with `retry_after_ms`, the wait lies in [hint, 1.2 × hint].
        #[test]
        fn t006_the_wait_honours_the_hint(hint in 1u64..10_000_000, retry in 0u32..10, unit in 0.0f64..1.0) {
            let wait = overloaded_wait_ms(hint, retry, &DelegationRules::DEFAULT, unit);
            prop_assert!(wait >= hint);
            prop_assert!(wait as f64 <= hint as f64 * 1.2);
        }

        /// Without a hint, the wait never exceeds the policy's ceiling.
        #[test]
        fn full_jitter_stays_under_the_ceiling(retry in 0u32..100, unit in 0.0f64..1.0, max in 1u64..100_000) {
            let rules = DelegationRules { max_backoff_ms: max, ..DelegationRules::DEFAULT };
            prop_assert!(overloaded_wait_ms(0, retry, &rules, unit) <= max);
        }
    }

    #[test]
    fn the_next_step() {
        let spill = DelegationRules {
            spillover: true,
            ..DelegationRules::DEFAULT
        };
        let d = DelegationRules::DEFAULT;
        let accepted = Answer {
            accepted: true,
            ..answer(0, 0, "")
        };
        let table: Vec<(Answer<'_>, LoopProgress, DelegationRules, u64, Step)> = vec![
            (
                accepted,
                visited(&["a"], 0, 0),
                d,
                0,
                Step::Keep(Settled::Accepted),
            ),
            (
                answer(7, 0, ""),
                visited(&["a"], 0, 0),
                d,
                10,
                Step::Keep(Settled::Rejected),
            ),
            // Spent before anything else (but after an acceptance).
            (
                answer(OVERLOADED, 0, ""),
                visited(&["a"], 0, 0),
                d,
                0,
                Step::Make(Made::Exhausted),
            ),
            (
                answer(OVERLOADED, 200, ""),
                visited(&["a"], 0, 0),
                d,
                10_000,
                Step::Retry(220),
            ),
            (
                answer(OVERLOADED, 200, ""),
                visited(&["a"], 2, 0),
                d,
                10_000,
                Step::Keep(Settled::RetriesSpent),
            ),
            (
                answer(OVERLOADED, 200, ""),
                visited(&["a"], 1, 0),
                d,
                219,
                Step::Keep(Settled::WaitBeyondBudget(220)),
            ),
            (
                answer(OVERLOADED, 200, ""),
                visited(&["a"], 1, 0),
                d,
                220,
                Step::Retry(220),
            ),
            (
                answer(REDIRECT, 0, "b"),
                visited(&["a"], 0, 0),
                d,
                10,
                Step::Keep(Settled::SpilloverOff),
            ),
            (
                answer(REDIRECT, 0, "  b "),
                visited(&["a"], 0, 0),
                spill,
                10,
                Step::Redirect("b".into()),
            ),
            (
                answer(REDIRECT, 0, " \t"),
                visited(&["a"], 0, 2),
                spill,
                10,
                Step::Make(Made::EmptyTarget),
            ),
            (
                answer(REDIRECT, 0, "a"),
                visited(&["a", "b"], 0, 2),
                spill,
                10,
                Step::Make(Made::Loop("a".into())),
            ),
            (
                answer(REDIRECT, 0, "c"),
                visited(&["a", "b", "x"], 0, 2),
                spill,
                10,
                Step::Keep(Settled::RedirectLimit),
            ),
            (
                answer(REDIRECT, 0, "c"),
                visited(&["a", "b"], 0, 1),
                spill,
                10,
                Step::Redirect("c".into()),
            ),
        ];
        for (i, (answer, progress, rules, left, want)) in table.into_iter().enumerate() {
            assert_eq!(
                next_step(answer, &progress, &rules, left, 0.5),
                want,
                "row {i}"
            );
        }
    }

    #[test]
    fn what_is_left() {
        // (wall, deadline, now, scope, want)
        let table = [
            (10_000, 2_000_000, 0, None, 10_000),
            (10_000, 5_000, 0, None, 5_000),
            (10_000, 5_000, 6_000, None, 0),
            (0, 5_000, 0, None, 0),
            (10_000, 50_000, 0, Some(700), 700),
            (u64::MAX, u64::MAX, 0, None, u64::MAX),
        ];
        for (wall, deadline, now, scope, want) in table {
            assert_eq!(left_ms(wall, deadline, now, scope), want);
        }
    }

    #[test]
    fn made_answers_use_upstreams_words() {
        assert_eq!(Made::Exhausted.code(), ACK_TIMEOUT);
        assert!(Made::EmptyTarget.reason().contains("non-empty"));
        assert!(Made::Loop("a".into()).reason().contains("loop"));
        assert_eq!(Made::Exhausted.reason(), EXHAUSTED_TEXT);
        // A peer's id is bounded before it is echoed.
        assert!(Made::Loop("x".repeat(100_000)).reason().len() < 1_000);
        let long = "g".repeat(MAX_TARGET_LEN + 1);
        let step = next_step(
            answer(REDIRECT, 0, &long),
            &visited(&["a"], 0, 0),
            &DelegationRules {
                spillover: true,
                ..DelegationRules::DEFAULT
            },
            10,
            0.5,
        );
        assert_eq!(step, Step::Make(Made::TargetTooLong(MAX_TARGET_LEN + 1)));
    }
}
