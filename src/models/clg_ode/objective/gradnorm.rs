//! GradNorm between the manifold and topology terms (porting note §2.3): from the two losses
//! and the norms of their gradients, weights that move the losses' training rates together.
//! The norms come from the caller (two extra backward passes); this is the arithmetic and the
//! state.

use serde::{Deserialize, Serialize};

/// α of GradNorm, the EMA rate of the weights and their bounds (the reference's constants).
pub(crate) const ALPHA: f64 = 0.5;
pub(crate) const RATE: f64 = 0.1;
pub(crate) const WEIGHT_MIN: f64 = 0.1;
pub(crate) const WEIGHT_MAX: f64 = 10.0;
const EPS: f64 = 1e-6;

/// The weights (manifold, topology) and the losses of the first update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GradNorm {
    pub weights: [f64; 2],
    pub initial: Option<[f64; 2]>,
}

impl Default for GradNorm {
    fn default() -> Self {
        Self {
            weights: [1.0, 1.0],
            initial: None,
        }
    }
}

impl GradNorm {
    /// One update from losses `l` and gradient norms `g` (manifold, topology) with term
    /// weights `lambda`; skipped (weights kept) when a norm is non-finite or not positive.
    /// Returns the weights to use for this batch.
    pub(crate) fn update(&mut self, l: [f64; 2], g: [f64; 2], lambda: [f64; 2]) -> [f64; 2] {
        if g.iter().any(|x| !x.is_finite() || *x <= 0.0) {
            return self.weights;
        }
        let init = match self.initial {
            Some(i) if i.iter().all(|x| x.is_finite()) => i,
            _ => {
                self.initial = Some(l);
                l
            }
        };
        let r = [0, 1].map(|i| (l[i] / (init[i] + EPS)).max(EPS));
        let mut r_mean = (r[0] + r[1]) / 2.0;
        if !r_mean.is_finite() || r_mean == 0.0 {
            r_mean = 1.0;
        }
        let g_mean = (0..2)
            .map(|i| g[i] * lambda[i] * self.weights[i])
            .sum::<f64>()
            / 2.0;
        let mut star =
            [0, 1].map(|i| g_mean * (r[i] / r_mean).powf(ALPHA) / (g[i] * lambda[i]).max(EPS));
        let total: f64 = star.iter().sum();
        if total > 0.0 {
            star = star.map(|w| w * 2.0 / total);
        }
        for (w, s) in self.weights.iter_mut().zip(star) {
            *w = (1.0 - RATE) * *w + RATE * s.clamp(WEIGHT_MIN, WEIGHT_MAX);
        }
        self.weights
    }
}
