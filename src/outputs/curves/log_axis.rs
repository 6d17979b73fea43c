//! The ticks of a log axis: at 1, 2 and 5 times the powers of ten the values span (1, 2, 5, 10,
//! 20, …), in log10 space as the chart draws it. Plotters' own ticks on the log10 values fall at
//! half decades, labelled 0.3162 and 3.162; a reader expects round values.

use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;

/// A y axis over log10 values, ticked by [`ticks`] and labelled with the values themselves.
pub(super) struct LogAxis {
    inner: RangedCoordf64,
    ticks: Vec<f64>,
}

impl LogAxis {
    /// The axis over `range` (log10 values).
    pub(super) fn new(range: Range<f64>) -> Self {
        Self {
            ticks: ticks(range.start, range.end),
            inner: range.into(),
        }
    }
}

impl Ranged for LogAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> Range<f64> {
        self.inner.range()
    }
}

impl ValueFormatter<f64> for LogAxis {
    fn format(value: &f64) -> String {
        label(10f64.powf(*value))
    }
}

/// A tick's value as written: ticks have one significant digit (1, 2, 5, or 1…9), so `0.2`,
/// `50`, `0.001`; beyond 10⁵ or below 10⁻⁴ in exponent form (`1e6`).
fn label(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return format!("{v}");
    }
    // The decimal exponent, a value a hair below a power of ten (10^log10(v)) counted as it.
    let e = (v.log10() + 1e-9).floor() as i32;
    if !(-4..=5).contains(&e) {
        return format!("{v:.0e}");
    }
    format!("{:.*}", (-e).max(0) as usize, v)
}

/// log10 of the 1-2-5 values within `lo..=hi` (log10 space). A span of less than two of them
/// gets every integer multiple (1, 2, …, 9 per decade), and a span of many decades only the
/// powers of ten, so that an axis has a handful of labels.
pub(super) fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && lo < hi) {
        return Vec::new();
    }
    let within = |mantissas: &[f64]| -> Vec<f64> {
        let (first, last) = (lo.floor() as i32, hi.ceil() as i32);
        (first..=last)
            .flat_map(|e| mantissas.iter().map(move |m| (m * 10f64.powi(e)).log10()))
            .filter(|t| *t >= lo - 1e-12 && *t <= hi + 1e-12)
            .collect()
    };
    if hi - lo > 6.0 {
        return within(&[1.0]);
    }
    let round = within(&[1.0, 2.0, 5.0]);
    if round.len() >= 2 {
        return round;
    }
    within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
}

#[cfg(test)]
mod tests {
    use super::ticks;

    fn values(lo: f64, hi: f64) -> Vec<f64> {
        ticks(lo.log10(), hi.log10())
            .into_iter()
            .map(|t| (10f64.powf(t) * 1e6).round() / 1e6)
            .collect()
    }

    #[test]
    fn ticks_fall_on_1_2_5() {
        assert_eq!(values(0.25, 40.0), [0.5, 1.0, 2.0, 5.0, 10.0, 20.0]);
        assert_eq!(
            values(0.001, 0.1),
            [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1]
        );
        // Less than two round values in range: every multiple.
        assert_eq!(values(2.5, 4.9), [3.0, 4.0]);
        // Many decades: the powers of ten.
        assert_eq!(
            values(1e-3, 1e5),
            [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5]
        );
        assert!(ticks(1.0, 1.0).is_empty() && ticks(f64::NAN, 1.0).is_empty());
    }

    #[test]
    fn labels_are_the_round_values() {
        let l = |v: f64| super::label(v);
        assert_eq!(
            [
                l(0.2),
                l(50.0),
                l(0.001),
                l(1.0),
                l(20.0),
                l(5e-4),
                l(1e6),
                l(3.0)
            ],
            ["0.2", "50", "0.001", "1", "20", "0.0005", "1e6", "3"]
        );
        // Through log10 and back (as the axis formats its ticks): the same labels.
        for v in [0.2f64, 0.5, 2.0, 50.0, 0.005] {
            assert_eq!(l(10f64.powf(v.log10())), l(v), "{v}");
        }
    }
}
