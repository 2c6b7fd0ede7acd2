//! `sw4rm-timeouts slo-rules`: the timeout SLO rules shipped in `operate/` are the
//! command's own output for the standard table, and bad objectives are usage errors.
//! (`promtool check rules` and `promtool test rules operate/slo-rules.test.yml` run in
//! `.ci/run`; the core's `tests/operate_files.rs` checks every metric they name
//! against what the SDK exposes.)

#[path = "support/command.rs"]
mod command;

use command::{cli, ROOT};

#[test]
fn the_shipped_rules_are_the_commands_for_the_standard_table() {
    let (code, out, err) = cli(&["slo-rules"]);
    assert_eq!(code, 0, "{err}");
    let shipped = std::fs::read_to_string(format!("{ROOT}/operate/slo-rules.yml")).unwrap();
    assert_eq!(
        out, shipped,
        "operate/slo-rules.yml is not what `sw4rm-timeouts slo-rules` writes: write it anew \
         (cargo run -p sw4rm-advise --bin sw4rm-timeouts -- slo-rules > operate/slo-rules.yml)"
    );
    // Four alerts for each of the table's thirteen profiles (SW4-002's twelve and the
    // universal one, for paths outside the table), two pages and two tickets.
    assert_eq!(out.matches("- alert: Sw4rmTimeoutBudgetBurn").count(), 52);
    assert_eq!(out.matches("severity: page").count(), 26);
    assert_eq!(out.matches("severity: ticket").count(), 26);
    assert!(out.contains("profile: universal"));
}

#[test]
fn an_objective_applies_to_every_profile() {
    let (code, out, err) = cli(&["slo-rules", "--objective", "99"]);
    assert_eq!(code, 0, "{err}");
    // 14.4 × 1 % for the hour's page, with 7 calls (1 / 0.144, rounded up) at least.
    assert!(out.contains(
        "sw4rm:slo_timeout_ratio:rate1h{profile=\"tool_call\"} > 0.144 and \
         sw4rm:slo_timeout_ratio:rate5m{profile=\"tool_call\"} > 0.144 and \
         sw4rm:slo_calls:increase1h{profile=\"tool_call\"} >= 7"
    ));
    assert!(!out.contains("> 0.0144"), "no profile kept the default");
}

#[test]
fn a_bad_objective_is_a_usage_error_naming_it() {
    for (value, says) in [
        (
            "100",
            "the objective 100: must be a percentage of calls without a timeout",
        ),
        ("0", "the objective 0: must be"),
        ("abc", "--objective abc: a percentage, such as 99.9"),
    ] {
        let (code, out, err) = cli(&["slo-rules", "--objective", value]);
        assert_eq!(code, 2, "{value}: {out}");
        assert!(err.contains(says), "{value}: {err}");
    }
}
