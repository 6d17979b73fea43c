//! Precision–recall of a ranking: scores of candidates (here: the edges absent from a start scan,
//! scored by a forecast) against whether each came true (the edge is present at the next
//! visit). Thresholds at every distinct score, ties taken together; the average precision is
//! scikit-learn's `average_precision_score`: Σ (Rₖ − Rₖ₋₁)·Pₖ over those thresholds, highest
//! first.

/// A precision–recall curve and its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct PrCurve {
    /// (recall, precision) at each distinct threshold, highest score first.
    pub points: Vec<(f64, f64)>,
    pub average_precision: f64,
    /// Candidates that came true, and all candidates: their ratio is a random ranking's
    /// precision.
    pub positives: usize,
    pub total: usize,
}

impl PrCurve {
    /// The precision of a random ranking (the prevalence).
    pub fn chance(&self) -> f64 {
        self.positives as f64 / self.total as f64
    }

    /// The precision of the step curve at recall `r` (the one whose area is the average
    /// precision): that of the first threshold reaching recall `r`; the last point's past it.
    pub fn precision_at(&self, r: f64) -> f64 {
        self.points
            .iter()
            .find(|(recall, _)| *recall >= r)
            .or(self.points.last())
            .map_or(f64::NAN, |p| p.1)
    }

    /// At most `n` of the points (every k-th, the last kept), for a figure.
    pub fn thinned(&self, n: usize) -> Vec<(f64, f64)> {
        let step = self.points.len().div_ceil(n.max(1)).max(1);
        let mut out: Vec<(f64, f64)> = self.points.iter().step_by(step).copied().collect();
        if let Some(&last) = self.points.last()
            && out.last() != Some(&last)
        {
            out.push(last);
        }
        out
    }
}

/// The curve of `(score, came true)` pairs; `None` without candidates, with a score that is not
/// finite, or when none came true (recall is undefined).
pub fn pr_curve(pairs: &[(f64, bool)]) -> Option<PrCurve> {
    if pairs.iter().any(|p| !p.0.is_finite()) {
        return None;
    }
    let positives = pairs.iter().filter(|p| p.1).count();
    if positives == 0 {
        return None;
    }
    let mut sorted = pairs.to_vec();
    sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
    let (mut tp, mut seen, mut ap, mut last_recall) = (0usize, 0usize, 0.0f64, 0.0f64);
    let mut points = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let score = sorted[i].0;
        while i < sorted.len() && sorted[i].0 == score {
            tp += usize::from(sorted[i].1);
            seen += 1;
            i += 1;
        }
        let (recall, precision) = (tp as f64 / positives as f64, tp as f64 / seen as f64);
        ap += (recall - last_recall) * precision;
        last_recall = recall;
        points.push((recall, precision));
    }
    Some(PrCurve {
        points,
        average_precision: ap,
        positives,
        total: pairs.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_precision_matches_the_step_definition_with_ties_and_a_constant_score_is_chance() {
        // Ranked: 0.9 (T), 0.8 (F), 0.8 (T), 0.3 (F), 0.1 (T).
        // Thresholds 0.9: R 1/3, P 1; 0.8: R 2/3, P 2/3; 0.3: R 2/3, P 2/4; 0.1: R 1, P 3/5.
        // AP = 1/3·1 + 1/3·2/3 + 0 + 1/3·3/5 (scikit-learn gives 0.7555…).
        let pairs = [
            (0.8, false),
            (0.1, true),
            (0.9, true),
            (0.3, false),
            (0.8, true),
        ];
        let c = pr_curve(&pairs).unwrap();
        let want = 1.0 / 3.0 + 2.0 / 9.0 + 1.0 / 5.0;
        assert!((c.average_precision - want).abs() < 1e-15, "{c:?}");
        assert_eq!(c.points.len(), 4);
        assert_eq!(c.points[1], (2.0 / 3.0, 2.0 / 3.0));
        assert_eq!((c.positives, c.total), (3, 5));
        // One score for all (the identity forecast scores every absent edge 0): precision is
        // the prevalence at the one threshold.
        let flat = pr_curve(&[(0.0, true), (0.0, false), (0.0, false), (0.0, false)]).unwrap();
        assert_eq!(flat.average_precision, 0.25);
        assert_eq!(flat.chance(), 0.25);
        assert!(pr_curve(&[(0.5, false)]).is_none());
        assert!(pr_curve(&[(f64::NAN, true)]).is_none());
        assert!(pr_curve(&[]).is_none());
        let long = pr_curve(
            &(0..1000)
                .map(|k| (k as f64, k % 3 == 0))
                .collect::<Vec<_>>(),
        )
        .unwrap();
        // The step curve: threshold 0.8 covers recall (1/3, 2/3].
        assert_eq!(c.precision_at(0.0), 1.0);
        assert_eq!(c.precision_at(0.5), 2.0 / 3.0);
        assert_eq!(c.precision_at(2.0 / 3.0), 2.0 / 3.0);
        assert_eq!(c.precision_at(0.9), 0.6);
        let thin = long.thinned(100);
        assert!(thin.len() <= 101 && thin.last() == long.points.last());
    }
}
