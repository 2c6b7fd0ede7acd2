//! The charts' latency axis: logarithmic, from the power of ten at or below the
//! smallest value drawn to the one at or above the largest, ticked at each power of
//! ten.

/// The smallest value an axis shows: 1 µs, in ms.
const FLOOR_MS: f64 = 0.001;

/// A logarithmic latency axis laid over `width` pixels from `left`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Axis {
    /// log10 of the first and last values shown, in ms (whole numbers).
    from: f64,
    to: f64,
    left: f64,
    width: f64,
}

impl Axis {
    /// An axis spanning every value of `ms` (at least one decade).
    pub(super) fn spanning(ms: impl IntoIterator<Item = f64>, left: f64, width: f64) -> Self {
        let (mut low, mut high) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in ms {
            let v = v.max(FLOOR_MS).log10();
            low = low.min(v);
            high = high.max(v);
        }
        if !low.is_finite() || !high.is_finite() {
            (low, high) = (0.0, 1.0);
        }
        let (from, mut to) = (low.floor(), high.ceil());
        if to <= from {
            to = from + 1.0;
        }
        Axis {
            from,
            to,
            left,
            width,
        }
    }

    /// Where `ms` lies (held within the axis).
    pub(super) fn x(&self, ms: f64) -> f64 {
        let share = (ms.max(FLOOR_MS).log10() - self.from) / (self.to - self.from);
        self.left + self.width * share.clamp(0.0, 1.0)
    }

    /// How many decades lie between two values (ms), for bars' densities.
    pub(super) fn decades(low_ms: f64, high_ms: f64) -> f64 {
        (high_ms.max(FLOOR_MS).log10() - low_ms.max(FLOOR_MS).log10()).max(1e-9)
    }

    /// Each power of ten on the axis, in ms, with its label (`1 µs`, `10 ms`, `1 s`).
    pub(super) fn ticks(&self) -> impl Iterator<Item = (f64, String)> {
        let (from, to) = (self.from as i32, self.to as i32);
        (from..=to).map(|e| (10f64.powi(e), label(e)))
    }
}

/// `10^e` ms as an operator reads it.
fn label(e: i32) -> String {
    match e {
        ..=-1 => format!("{} µs", 10u64.pow((e + 3).max(0) as u32)),
        0..=2 => format!("{} ms", 10u64.pow(e as u32)),
        _ => format!("{} s", 10u64.pow((e - 3) as u32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_whole_decades_around_the_values() {
        let a = Axis::spanning([12.0, 5_000.0], 0.0, 400.0);
        let ticks: Vec<String> = a.ticks().map(|(_, l)| l).collect();
        assert_eq!(ticks, ["10 ms", "100 ms", "1 s", "10 s"]);
        // Three decades over 400 px: one decade is 133.3 px.
        assert_eq!(a.x(10.0), 0.0);
        assert!((a.x(100.0) - 400.0 / 3.0).abs() < 1e-9);
        assert!((a.x(5_000.0) - (2.0 + 5f64.log10()) * 400.0 / 3.0).abs() < 1e-9);
        assert_eq!(a.x(1e9), 400.0);
    }

    #[test]
    fn labels() {
        let a = Axis::spanning([0.0, 3_600_000.0], 10.0, 100.0);
        let ticks: Vec<String> = a.ticks().map(|(_, l)| l).collect();
        assert_eq!(ticks.first().map(String::as_str), Some("1 µs"));
        assert_eq!(ticks.last().map(String::as_str), Some("10000 s"));
        assert_eq!(a.ticks().count(), 11);
    }

    #[test]
    fn one_value_is_one_decade() {
        let a = Axis::spanning([1_000.0], 0.0, 100.0);
        assert_eq!(a.ticks().count(), 2);
        let none = Axis::spanning([], 0.0, 100.0);
        assert_eq!(none.ticks().count(), 2);
    }
}
