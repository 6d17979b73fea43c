//! `vector-lstm`: the reference's VectorLSTM baseline (`src/models/vector_lstm.py`,
//! docs/baselines-surface.md §1.2): each scan's upper triangle `D = N(N−1)/2` (raw weights) is
//! encoded by `Linear(D, H)` + ReLU, a one-layer LSTM(H, H) runs over a subject's visits, and
//! `Linear(H, D)` on every hidden state predicts the next scan's upper triangle.
//!
//! The LSTM is written here rather than taken from `burn::nn::Lstm` so that its parameters are
//! PyTorch's four-gate blocks (`weight_ih_l0 (4H, H)`, `weight_hh_l0`, `bias_ih_l0`,
//! `bias_hh_l0`, gates in the order input, forget, cell, output): one matmul per step, and a
//! reference state dict maps onto it tensor for tensor. Burn stores a Linear weight as
//! `[in, out]`, the transpose of PyTorch's. Init as PyTorch: `U(±1/√fan_in)` for the Linear
//! layers, `U(±1/√H)` for every LSTM tensor (fan_in = H for both of its Linears).

use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use burn::tensor::activation::{relu, sigmoid};

use super::clg_ode::layers::linear3;

/// Name of the model in checkpoint metadata and file stems.
pub(crate) const MODEL_NAME: &str = "vector_lstm";

/// One LSTM layer over `[B, T, H]` from a zero state (`batch_first`, as the reference's).
#[derive(Module, Debug)]
pub(crate) struct Lstm<B: Backend> {
    /// `W_ih e_t + b_ih`, the four gates side by side (`[H, 4H]` in Burn's layout).
    pub input: Linear<B>,
    /// `W_hh h_{t−1} + b_hh`.
    pub hidden: Linear<B>,
}

/// The LSTM's outputs: every step's hidden state and the final cell state.
#[cfg_attr(not(test), allow(dead_code))] // read by the unit tests (goldens) only
pub(crate) struct LstmOut<B: Backend> {
    /// `[B, T, H]`.
    pub h: Tensor<B, 3>,
    /// `[B, H]` after the last step.
    pub c_last: Tensor<B, 2>,
}

impl<B: Backend> Lstm<B> {
    pub(crate) fn new(size: usize, device: &B::Device) -> Self {
        Self {
            input: LinearConfig::new(size, 4 * size).init(device),
            hidden: LinearConfig::new(size, 4 * size).init(device),
        }
    }

    pub(crate) fn forward(&self, e: Tensor<B, 3>) -> LstmOut<B> {
        let [b, t, h] = e.dims();
        let device = e.device();
        let pre = linear3(&self.input, e);
        let mut hs = Vec::with_capacity(t);
        let mut hp = Tensor::<B, 2>::zeros([b, h], &device);
        let mut c = Tensor::<B, 2>::zeros([b, h], &device);
        for step in 0..t {
            let x = pre.clone().narrow(1, step, 1).reshape([b, 4 * h]);
            let gates = x + self.hidden.forward(hp);
            let gate = |k: usize| gates.clone().narrow(1, k * h, h);
            let (i, f, g, o) = (sigmoid(gate(0)), sigmoid(gate(1)), gate(2).tanh(), gate(3));
            c = f * c + i * g;
            hp = sigmoid(o) * c.clone().tanh();
            hs.push(hp.clone().unsqueeze_dim::<3>(1));
        }
        LstmOut {
            h: Tensor::cat(hs, 1),
            c_last: c,
        }
    }
}

/// `VectorLSTM(input_dim = D, latent_dim = H, num_layers = 1)`.
#[derive(Module, Debug)]
pub(crate) struct VectorLstm<B: Backend> {
    pub encoder: Linear<B>,
    pub lstm: Lstm<B>,
    pub decoder: Linear<B>,
}

/// Every stage of one forward pass (for the goldens).
#[cfg_attr(not(test), allow(dead_code))] // read by the unit tests (goldens) only
pub(crate) struct VectorLstmOutputs<B: Backend> {
    /// `[B·T, H]` before the ReLU.
    pub encoder_out: Tensor<B, 2>,
    pub lstm: LstmOut<B>,
    /// `[B, T, D]`.
    pub y_pred: Tensor<B, 3>,
}

impl<B: Backend> VectorLstm<B> {
    /// A freshly initialised model for `input` = D features and `latent` = H (from the
    /// backend's RNG).
    pub(crate) fn new(input: usize, latent: usize, device: &B::Device) -> Self {
        Self {
            encoder: LinearConfig::new(input, latent).init(device),
            lstm: Lstm::new(latent, device),
            decoder: LinearConfig::new(latent, input).init(device),
        }
    }

    /// The predicted next-scan vectors `[B, T, D]` of the visit vectors `x` `[B, T, D]`.
    pub(crate) fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        self.forward_with(x).y_pred
    }

    pub(crate) fn forward_with(&self, x: Tensor<B, 3>) -> VectorLstmOutputs<B> {
        let [b, t, d] = x.dims();
        let encoder_out = self.encoder.forward(x.reshape([b * t, d]));
        let hidden = encoder_out.dims()[1];
        let e = relu(encoder_out.clone()).reshape([b, t, hidden]);
        let lstm = self.lstm.forward(e);
        let y_pred = linear3(&self.decoder, lstm.h.clone());
        VectorLstmOutputs {
            encoder_out,
            lstm,
            y_pred,
        }
    }
}

/// Σ `mask[b, t] · (ŷ − y)²` over every entry (`mask` `[B, T]`); divided by `Σ mask · D` it is
/// the reference's masked MSE (`Trainer._train_one_epoch`).
pub(crate) fn masked_sq_sum<B: Backend>(
    pred: Tensor<B, 3>,
    target: Tensor<B, 3>,
    mask: Tensor<B, 2>,
) -> Tensor<B, 1> {
    let d = (pred - target).square().sum_dim(2).squeeze_dim::<2>(2);
    (d * mask).sum()
}

/// The reference's loss: `Σ mask · (ŷ − y)² / (Σ mask · D)`.
#[cfg(test)]
pub(crate) fn loss<B: Backend>(
    pred: Tensor<B, 3>,
    target: Tensor<B, 3>,
    mask: Tensor<B, 2>,
) -> Tensor<B, 1> {
    let d = pred.dims()[2];
    let steps = crate::host_reads::scalar(mask.clone().sum());
    masked_sq_sum(pred, target, mask).div_scalar(steps * d as f64)
}

/// The upper triangle of an N×N row-major matrix, row by row (numpy's `triu_indices(N, 1)`;
/// a scan's `SymMatrix::upper` holds the same order).
#[cfg(test)]
pub(crate) fn upper_triangle(m: &[f32], n: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(n * n.saturating_sub(1) / 2);
    for i in 0..n {
        v.extend_from_slice(&m[i * n + i + 1..(i + 1) * n]);
    }
    v
}

/// The symmetric N×N matrix (zero diagonal) of an upper-triangle vector.
pub(crate) fn from_upper_triangle(v: &[f32], n: usize) -> Vec<f32> {
    let mut m = vec![0.0f32; n * n];
    let mut k = 0;
    for i in 0..n {
        for j in i + 1..n {
            m[i * n + j] = v[k];
            m[j * n + i] = v[k];
            k += 1;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upper_triangle_round_trips_row_by_row() {
        let n = 4;
        let m: Vec<f32> = (0..16).map(|x| x as f32).collect();
        let v = upper_triangle(&m, n);
        assert_eq!(v, vec![1.0, 2.0, 3.0, 6.0, 7.0, 11.0]);
        let s = from_upper_triangle(&v, n);
        assert_eq!(s[4], 1.0);
        assert_eq!(s[14], 11.0);
        assert_eq!(s[0], 0.0);
        assert_eq!(upper_triangle(&s, n), v);
    }
}
