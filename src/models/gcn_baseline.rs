//! `gcn`: the reference's "GNN baseline" (`src/models/gnn_baseline.py`, docs/baselines-surface.md
//! §2.2), a two-layer GCN on the start scan whose inner-product decoder predicts the next scan.
//!
//! * node feature `x_i = log1p(Σ_j A_ij)` (1-d; `A` symmetrised, zero diagonal, raw scale);
//! * GCN layer: `Linear(Ã h)` with `Ã = D^-1/2 (A + I) D^-1/2` from the raw weights
//!   (aggregate first, then `W·(Ãh) + b`);
//! * `h1 = ReLU(GCN1(x))`, Dropout(0.1) (hard-coded, as the reference), `h2 = ReLU(GCN2(h1))`;
//! * decoder `P = softplus(h2 h2ᵀ)` (β = 1, threshold 20), `0.5(P + Pᵀ)`, zero diagonal.
//!
//! Parameter names are the reference's (`gcn1.linear.weight`, …); Burn stores a Linear weight
//! as `[in, out]`, the transpose of PyTorch's `[out, in]`. Init as PyTorch's `nn.Linear`:
//! U(±1/√fan_in) for weight and bias.

use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;

use super::clg_ode::layers::linear3;

/// Name of the model in checkpoint metadata.
pub(crate) const MODEL_NAME: &str = "gcn_baseline";

/// The reference's dropout probability (not a flag there).
pub(crate) const DROPOUT: f64 = 0.1;

/// `GCNLayer(in, out)`: a Linear applied after the normalised aggregation.
#[derive(Module, Debug)]
pub(crate) struct GcnLayer<B: Backend> {
    pub linear: Linear<B>,
}

impl<B: Backend> GcnLayer<B> {
    pub(crate) fn new(input: usize, output: usize, device: &B::Device) -> Self {
        Self {
            linear: LinearConfig::new(input, output).init(device),
        }
    }

    /// `Linear(Ã h)`; `norm` = Ã `[B, N, N]`, `h` `[B, N, F]`.
    pub(crate) fn forward(&self, norm: Tensor<B, 3>, h: Tensor<B, 3>) -> Tensor<B, 3> {
        linear3(&self.linear, norm.matmul(h))
    }
}

/// The two-layer GCN baseline.
#[derive(Module, Debug)]
pub(crate) struct GcnBaseline<B: Backend> {
    pub gcn1: GcnLayer<B>,
    pub gcn2: GcnLayer<B>,
    pub dropout: Dropout,
}

/// Every layer's output of one forward pass (for the goldens).
#[cfg_attr(not(test), allow(dead_code))] // read by the unit tests (goldens) only
pub(crate) struct GcnOutputs<B: Backend> {
    pub norm: Tensor<B, 3>,
    pub x: Tensor<B, 3>,
    pub gcn1_out: Tensor<B, 3>,
    pub gcn2_out: Tensor<B, 3>,
    pub y_pred: Tensor<B, 3>,
}

/// `D^-1/2 (A + I) D^-1/2` of a batch `[B, N, N]` (a zero degree gives 0, as the reference's
/// `inf → 0`; unreachable for non-negative weights).
pub(crate) fn gcn_norm<B: Backend>(a: Tensor<B, 3>) -> Tensor<B, 3> {
    let [b, n, _] = a.dims();
    let eye = Tensor::<B, 2>::eye(n, &a.device()).unsqueeze::<3>();
    let a_hat = a + eye.expand([b, n, n]);
    let deg = a_hat.clone().sum_dim(2);
    let zero = deg.clone().equal_elem(0.0);
    let d = deg.powf_scalar(-0.5).mask_fill(zero, 0.0);
    d.clone() * a_hat * d.swap_dims(1, 2)
}

/// softplus with β = 1 and PyTorch's threshold 20 (the input itself above it).
fn softplus20<B: Backend>(s: Tensor<B, 3>) -> Tensor<B, 3> {
    let above = s.clone().greater_elem(20.0);
    let soft = s.clone().clamp_max(20.0).exp().log1p();
    soft.mask_where(above, s)
}

impl<B: Backend> GcnBaseline<B> {
    /// A freshly initialised model with `hidden` channels (from the backend's RNG).
    pub(crate) fn new(hidden: usize, device: &B::Device) -> Self {
        Self {
            gcn1: GcnLayer::new(1, hidden, device),
            gcn2: GcnLayer::new(hidden, hidden, device),
            dropout: DropoutConfig::new(DROPOUT).init(),
        }
    }

    /// The predicted next scan `[B, N, N]` (raw scale) from the start scans `a` `[B, N, N]`;
    /// dropout is on when the backend records gradients (training), off otherwise.
    pub(crate) fn forward(&self, a: Tensor<B, 3>) -> Tensor<B, 3> {
        self.forward_with(a, None).y_pred
    }

    /// The forward pass with every layer's output; `keep`, when given, replaces the dropout
    /// draw by this multiplier (the keep mask × 1/(1−p), `[B, N, hidden]`).
    pub(crate) fn forward_with(
        &self,
        a: Tensor<B, 3>,
        keep: Option<Tensor<B, 3>>,
    ) -> GcnOutputs<B> {
        let [_, n, _] = a.dims();
        let x = a.clone().sum_dim(2).log1p();
        let norm = gcn_norm(a);
        let gcn1_out = self.gcn1.forward(norm.clone(), x.clone());
        let h1 = relu(gcn1_out.clone());
        let h1 = match keep {
            Some(k) => h1 * k,
            None => self.dropout.forward(h1),
        };
        let gcn2_out = self.gcn2.forward(norm.clone(), h1);
        let h2 = relu(gcn2_out.clone());
        let s = h2.clone().matmul(h2.swap_dims(1, 2));
        let p = softplus20(s);
        let p = (p.clone() + p.swap_dims(1, 2)).mul_scalar(0.5);
        let off = Tensor::<B, 2>::eye(n, &p.device())
            .neg()
            .add_scalar(1.0)
            .unsqueeze::<3>();
        let y_pred = p * off;
        GcnOutputs {
            norm,
            x,
            gcn1_out,
            gcn2_out,
            y_pred,
        }
    }
}

/// The upper-triangle indicator `[1, N, N]` (i < j).
pub(crate) fn upper_mask<B: Backend>(n: usize, device: &B::Device) -> Tensor<B, 3> {
    let mut m = vec![0.0f32; n * n];
    for i in 0..n {
        for j in i + 1..n {
            m[i * n + j] = 1.0;
        }
    }
    Tensor::<B, 2>::from_data(TensorData::new(m, [n, n]), device).unsqueeze::<3>()
}

/// Σ over the batch's upper-triangle entries of `(log1p(max(pred, 0)) − log1p(max(target,
/// 0)))²`; divided by `B × N(N−1)/2` it is the reference's `GNNTrainer._loss`.
pub(crate) fn loss_sum<B: Backend>(pred: Tensor<B, 3>, target: Tensor<B, 3>) -> Tensor<B, 1> {
    let [_, n, _] = pred.dims();
    let mask = upper_mask::<B>(n, &pred.device());
    let d = pred.clamp_min(0.0).log1p() - target.clamp_min(0.0).log1p();
    (d.square() * mask).sum()
}

/// The reference's `GNNTrainer._loss`: the mean over `B × E` upper-triangle entries.
pub(crate) fn loss<B: Backend>(pred: Tensor<B, 3>, target: Tensor<B, 3>) -> Tensor<B, 1> {
    let [b, n, _] = pred.dims();
    let e = (b * n * (n - 1) / 2).max(1);
    loss_sum(pred, target).div_scalar(e as f64)
}
