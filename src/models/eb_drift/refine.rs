//! Fit steps 8 and 9 of docs/eb-drift.md: the drift's two global factors (age and sex) and the
//! existence of a present edge given its forecast level (a small logistic regression).

use super::pooling::TINY;

/// Ridge of the existence regression's Newton steps (against separable data; ~1e5 rows).
const RIDGE: f64 = 1.0;
/// Newton steps at most, and the step size that ends them.
const NEWTON_STEPS: usize = 100;
const NEWTON_TOL: f64 = 1e-9;
/// Features of the existence regression.
pub(super) const EXIST_FEATURES: usize = 6;

/// The sex covariate of a sex id (the loader's: 1 male, 2 female, 0 unknown): +1, −1, 0.
pub(super) fn sex_sign(sex: usize) -> f64 {
    match sex {
        1 => 1.0,
        2 => -1.0,
        _ => 0.0,
    }
}

/// The drift multiplier `clamp(1 + β_age·(mid − ā) + β_sex·sex, 0, 2)` of a forecast from age
/// `a0` to `t` (`mid` = (a0 + t)/2).
pub(super) fn multiplier(beta: [f64; 2], a_bar: f64, a0: f64, t: f64, sex: usize) -> f64 {
    (1.0 + beta[0] * (0.5 * (a0 + t) - a_bar) + beta[1] * sex_sign(sex)).clamp(0.0, 2.0)
}

/// Normal equations of the two drift factors: `A = [[a11, a12], [a12, a22]]`, `b`.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct FactorSums {
    a11: f64,
    a12: f64,
    a22: f64,
    b1: f64,
    b2: f64,
}

impl FactorSums {
    /// One entry present at both visits of a pair: `x = d_e·Δt`, `r = Δy − x`, regressors
    /// `x·(mid − ā)` and `x·sex`.
    pub(super) fn add(&mut self, x: f64, r: f64, mid_minus_bar: f64, sex: usize) {
        let (u, v) = (x * mid_minus_bar, x * sex_sign(sex));
        self.a11 += u * u;
        self.a12 += u * v;
        self.a22 += v * v;
        self.b1 += u * r;
        self.b2 += v * r;
    }

    /// `(β_age, β_sex)`: both when the 2×2 system is well conditioned (det > 1e-12·a11·a22),
    /// else the age factor alone (a11 > 1e-12), else the sex factor alone, else none.
    pub(super) fn solve(&self) -> [f64; 2] {
        let det = self.a11 * self.a22 - self.a12 * self.a12;
        if self.a11 > TINY && self.a22 > TINY && det > TINY * self.a11 * self.a22 {
            [
                (self.a22 * self.b1 - self.a12 * self.b2) / det,
                (self.a11 * self.b2 - self.a12 * self.b1) / det,
            ]
        } else if self.a11 > TINY {
            [self.b1 / self.a11, 0.0]
        } else if self.a22 > TINY {
            [0.0, self.b2 / self.a22]
        } else {
            [0.0, 0.0]
        }
    }
}

/// `ln(p / (1 − p))` with `p` clamped to [1e-6, 1 − 1e-6].
fn logit(p: f64) -> f64 {
    let p = p.clamp(1e-6, 1.0 - 1e-6);
    (p / (1.0 - p)).ln()
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// The existence regression's features of an edge present at the start: `1`,
/// `logit(p11_e)`, the forecast level `E`, `E²`, `t − ā` and `Δt = t − a0`.
pub(super) fn features(p11: f64, level: f64, t_minus_bar: f64, dt: f64) -> [f64; EXIST_FEATURES] {
    features_of_logit(logit(p11), level, t_minus_bar, dt)
}

/// [`features`] with `logit(p11)` given.
fn features_of_logit(lp: f64, level: f64, t_minus_bar: f64, dt: f64) -> [f64; EXIST_FEATURES] {
    [1.0, lp, level, level * level, t_minus_bar, dt]
}

/// The rows of the existence regression, each with its label (present at the later visit).
pub(super) trait Rows {
    fn len(&self) -> usize;
    /// Rows labelled true.
    fn ones(&self) -> usize;
    /// `f(features, label)` of every row, in order.
    fn for_each(&self, f: impl FnMut(&[f64; EXIST_FEATURES], bool));
}

/// Rows given whole with their labels.
#[cfg(test)]
impl Rows for (&[[f64; EXIST_FEATURES]], &[bool]) {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn ones(&self) -> usize {
        self.1.iter().filter(|&&z| z).count()
    }
    fn for_each(&self, mut f: impl FnMut(&[f64; EXIST_FEATURES], bool)) {
        for (x, &z) in self.0.iter().zip(self.1) {
            f(x, z);
        }
    }
}

/// The rows of the fit's visit pairs, held as each present edge's index and forecast level
/// (12 bytes a row) with each pair's times; [`Rows::for_each`] builds the same features as
/// [`features`] would have, bit for bit.
pub(super) struct ExistenceRows {
    /// `logit(p11)` of every edge.
    logit_p11: Vec<f64>,
    edge: Vec<u32>,
    level: Vec<f64>,
    label: Vec<bool>,
    /// Per pair: its first row, `t − ā` and `Δt`.
    pairs: Vec<(usize, f64, f64)>,
}

impl ExistenceRows {
    pub(super) fn new(p11: &[f64]) -> Self {
        Self {
            logit_p11: p11.iter().map(|&p| logit(p)).collect(),
            edge: Vec::new(),
            level: Vec::new(),
            label: Vec::new(),
            pairs: Vec::new(),
        }
    }

    /// The rows pushed next belong to a pair whose target is `t_minus_bar` from the mean age
    /// and `dt` after its start.
    pub(super) fn start_pair(&mut self, t_minus_bar: f64, dt: f64) {
        self.pairs.push((self.edge.len(), t_minus_bar, dt));
    }

    pub(super) fn push(&mut self, edge: usize, level: f64, label: bool) {
        self.edge
            .push(u32::try_from(edge).expect("fewer than 2^32 edges"));
        self.level.push(level);
        self.label.push(label);
    }
}

impl Rows for ExistenceRows {
    fn len(&self) -> usize {
        self.edge.len()
    }
    fn ones(&self) -> usize {
        self.label.iter().filter(|&&z| z).count()
    }
    fn for_each(&self, mut f: impl FnMut(&[f64; EXIST_FEATURES], bool)) {
        for (k, &(first, t_minus_bar, dt)) in self.pairs.iter().enumerate() {
            let last = self.pairs.get(k + 1).map_or(self.edge.len(), |p| p.0);
            for r in first..last {
                let lp = self.logit_p11[self.edge[r] as usize];
                f(
                    &features_of_logit(lp, self.level[r], t_minus_bar, dt),
                    self.label[r],
                );
            }
        }
    }
}

/// `P(present at t | present at a0)` of an edge with these features under weights `w`.
pub(super) fn existence(w: &[f64; EXIST_FEATURES], x: &[f64; EXIST_FEATURES]) -> f64 {
    sigmoid(w.iter().zip(x).map(|(a, b)| a * b).sum())
}

/// Logistic regression of `label` on `rows` by ridge-damped Newton steps from 0 (docs/eb-drift.md
/// step 9); `None` with fewer rows than features or a single label value.
pub(super) fn fit_existence(rows: &impl Rows) -> Option<[f64; EXIST_FEATURES]> {
    let (len, ones) = (rows.len(), rows.ones());
    if len < EXIST_FEATURES || ones == 0 || ones == len {
        return None;
    }
    let mut w = [0.0; EXIST_FEATURES];
    for _ in 0..NEWTON_STEPS {
        let mut h = [[0.0; EXIST_FEATURES]; EXIST_FEATURES];
        let mut g = [0.0; EXIST_FEATURES];
        for k in 0..EXIST_FEATURES {
            h[k][k] = RIDGE;
            g[k] = -RIDGE * w[k];
        }
        rows.for_each(|x, z| {
            let p = existence(&w, x);
            let (q, r) = (p * (1.0 - p), f64::from(u8::from(z)) - p);
            for i in 0..EXIST_FEATURES {
                g[i] += r * x[i];
                for j in 0..EXIST_FEATURES {
                    h[i][j] += q * x[i] * x[j];
                }
            }
        });
        let step = solve(h, g);
        let mut largest: f64 = 0.0;
        for k in 0..EXIST_FEATURES {
            w[k] += step[k];
            largest = largest.max(step[k].abs());
        }
        if largest < NEWTON_TOL {
            break;
        }
    }
    Some(w)
}

/// `h·x = g` by Gaussian elimination with partial pivoting (`h` is positive definite: the ridge).
fn solve<const K: usize>(mut h: [[f64; K]; K], mut g: [f64; K]) -> [f64; K] {
    for c in 0..K {
        let pivot = (c..K)
            .max_by(|&a, &b| h[a][c].abs().total_cmp(&h[b][c].abs()))
            .unwrap_or(c);
        h.swap(c, pivot);
        g.swap(c, pivot);
        let (top, rest) = h.split_at_mut(c + 1);
        let row_c = &top[c];
        for (r, row) in rest.iter_mut().enumerate() {
            let f = row[c] / row_c[c];
            for (x, &y) in row[c..].iter_mut().zip(&row_c[c..]) {
                *x -= f * y;
            }
            g[c + 1 + r] -= f * g[c];
        }
    }
    let mut x = [0.0; K];
    for c in (0..K).rev() {
        let s: f64 = (c + 1..K).map(|k| h[c][k] * x[k]).sum();
        x[c] = (g[c] - s) / h[c][c];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_factors_are_the_least_squares_solution() {
        // r = 0.3·u − 0.1·v exactly: both factors recovered; one regressor constant 0: alone.
        let mut s = FactorSums::default();
        for (x, mid, sex) in [(0.5, -1.0, 1), (0.2, 0.5, 2), (-0.4, 1.5, 1), (0.3, 0.0, 2)] {
            let (u, v) = (x * mid, x * sex_sign(sex));
            s.add(x, 0.3 * u - 0.1 * v, mid, sex);
        }
        let b = s.solve();
        assert!(
            (b[0] - 0.3).abs() < 1e-12 && (b[1] + 0.1).abs() < 1e-12,
            "{b:?}"
        );
        let mut unknown = FactorSums::default();
        unknown.add(0.5, 0.1, 2.0, 0);
        unknown.add(0.2, -0.05, -1.0, 0);
        assert_eq!(unknown.solve()[1], 0.0);
        assert_eq!(FactorSums::default().solve(), [0.0, 0.0]);
        assert_eq!(multiplier([1.0, 5.0], 10.0, 12.0, 14.0, 1), 2.0);
        assert_eq!(multiplier([0.0, 5.0], 10.0, 12.0, 14.0, 2), 0.0);
    }

    #[test]
    fn the_existence_regression_separates_what_the_level_separates() {
        // Present at t iff the forecast level is above 0.5 (up to a few exceptions): the fitted
        // probability is high above and low below; a single label value gives no regression.
        let mut rows = Vec::new();
        let mut label = Vec::new();
        for k in 0..400 {
            let level = k as f64 / 200.0;
            rows.push(features(
                0.9,
                level,
                (k % 7) as f64 - 3.0,
                2.0 + (k % 3) as f64 * 0.1,
            ));
            label.push((level > 0.5) != (k % 97 == 0));
        }
        let w = fit_existence(&(&rows[..], &label[..])).unwrap();
        let p = |level: f64| existence(&w, &features(0.9, level, 0.0, 2.1));
        assert!(p(1.5) > 0.95 && p(0.1) < 0.2, "{} {}", p(1.5), p(0.1));
        assert!(fit_existence(&(&rows[..], &vec![true; rows.len()][..])).is_none());
        assert!(fit_existence(&(&rows[..5], &label[..5])).is_none());
        let x = solve([[4.0, 1.0], [1.0, 3.0]], [1.0, 2.0]);
        assert!((x[0] - 1.0 / 11.0).abs() < 1e-15 && (x[1] - 7.0 / 11.0).abs() < 1e-15);
    }
}
