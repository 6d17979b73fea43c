//! The per-prediction terms, each a `[P]` tensor over the batch's predictions: the three parts
//! of a reconstruction (morphology MSE, edge existence, sparsified log weight) and the
//! log-domain and density penalties (porting note §2.4, §2.6, §2.7).

use burn::prelude::*;
use burn::tensor::activation::sigmoid;

use super::config::{EdgeLoss, ObjectiveConfig};
use crate::models::clg_ode::loss::{bce_pos_weight, focal, huber};

/// What the per-prediction terms need, as `[P,N,N]` tensors (`upper` is `[1,N·N]`).
pub(crate) struct PredTensors<B: Backend> {
    pub n: usize,
    pub logit: Tensor<B, 3>,
    /// The final prediction (after the innovation module).
    pub a_pred: Tensor<B, 3>,
    /// Its top-k sparsification (keep mask applied; symmetric).
    pub sparse: Tensor<B, 3>,
    /// 1 where the target has an edge, upper triangle only.
    pub y: Tensor<B, 3>,
    /// log1p(max(target, 0)).
    pub target_log: Tensor<B, 3>,
    /// The start visit's log SC.
    pub start_log: Tensor<B, 3>,
    pub upper: Tensor<B, 2>,
}

impl<B: Backend> PredTensors<B> {
    fn p(&self) -> usize {
        self.logit.dims()[0]
    }

    /// Σ over the upper triangle of each prediction → `[P]`.
    fn ut_sum(&self, x: Tensor<B, 3>) -> Tensor<B, 1> {
        let (p, n) = (self.p(), self.n);
        (x.reshape([p, n * n]) * self.upper.clone())
            .sum_dim(1)
            .reshape([p])
    }

    fn ut_mean(&self, x: Tensor<B, 3>) -> Tensor<B, 1> {
        let m = (self.n * (self.n - 1) / 2).max(1) as f64;
        self.ut_sum(x).div_scalar(m)
    }

    /// log1p(max(A_pred, 0)).
    fn pred_log(&self) -> Tensor<B, 3> {
        self.a_pred.clone().clamp_min(0.0).log1p()
    }

    /// Edge-existence loss: BCE with positive weight, or focal; 0 with fixed support.
    pub(crate) fn edge(&self, c: &ObjectiveConfig, fixed_support: bool) -> Tensor<B, 1> {
        if fixed_support {
            return Tensor::zeros([self.p()], &self.logit.device());
        }
        let e = match c.edge_loss {
            EdgeLoss::Bce => bce_pos_weight(self.logit.clone(), self.y.clone(), c.edge_pos_weight),
            EdgeLoss::Focal => focal(
                self.logit.clone(),
                self.y.clone(),
                c.focal_gamma,
                c.focal_alpha,
            ),
        };
        self.ut_mean(e)
    }

    /// Weight loss. Normal: Huber on the log of the sparsified prediction over the target's
    /// edges, divided by their number. Fixed support: mean Huber over the start visit's
    /// support (0 without support).
    pub(crate) fn weight(&self, fixed_support: bool) -> Tensor<B, 1> {
        let d = huber(self.sparse.clone().clamp_min(0.0).log1p() - self.target_log.clone());
        if fixed_support {
            let support = self.start_log.clone().greater_elem(0.0).float();
            let count = self.ut_sum(support.clone()).clamp_min(1.0);
            self.ut_sum(d * support) / count
        } else {
            let count = self.ut_sum(self.y.clone()).clamp_min(1.0);
            self.ut_sum(d * self.y.clone()) / count
        }
    }

    /// mean (log1p(max(A_pred, 0)) − log1p(max(T, 0)))².
    pub(crate) fn full_log(&self) -> Tensor<B, 1> {
        self.ut_mean((self.pred_log() - self.target_log.clone()).square())
    }

    /// mean over the target's non-edges of log1p(max(A_pred, 0))² (0 where there is none).
    pub(crate) fn zero_log(&self) -> Tensor<B, 1> {
        let zero = self.target_log.clone().lower_equal_elem(0.0).float();
        let count = self.ut_sum(zero.clone()).clamp_min(1.0);
        self.ut_sum(self.pred_log().square() * zero) / count
    }

    /// mean (log1p(max(A_pred, 0)) − log A_start)²: shrinkage toward the start visit.
    pub(crate) fn delta_log(&self) -> Tensor<B, 1> {
        self.ut_mean((self.pred_log() - self.start_log.clone()).square())
    }

    /// ((Σ σ(ℓ) − k)/k)² with k the target's edge count (0 when k = 0).
    pub(crate) fn density(&self) -> Tensor<B, 1> {
        let k = self.ut_sum(self.y.clone());
        let mass = self.ut_sum(sigmoid(self.logit.clone()));
        let has = k.clone().greater_elem(0.0).float();
        ((mass - k.clone()) / k.clamp_min(1.0)).square() * has
    }
}
