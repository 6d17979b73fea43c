//! The connection decoder (docs/clg-ode-model.md §2.6) and its variants (porting note §2.4): the expected
//! weight σ(ℓ)·ŵ of the original model, the log-space residual skip on the start visit, and the
//! fixed support of the start visit.

use burn::module::Param;
use burn::prelude::*;
use burn::tensor::activation::sigmoid;
use serde::{Deserialize, Serialize};

use super::loss::softplus;

/// How the decoder turns scores into weights (reference flags `--residual_skip`,
/// `--residual_tau`, `--residual_cap`, `--residual_no_dt_gate`, `--fixed_support`).
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[command(next_help_heading = crate::settings::MODEL)]
pub struct DecoderConfig {
    /// Log-space residual decoder: weight = expm1(log A0 + g(Δt)·cap·tanh(ρS + b)) on A0's
    /// support, instead of softplus(γ'S + β').
    #[arg(long, alias = "residual_skip")]
    pub residual_skip: bool,
    /// τ of the residual's Δt gate g(t) = Δt/(Δt + τ).
    #[arg(long, alias = "residual_tau", default_value_t = 1.0)]
    pub residual_tau: f64,
    /// Cap of the residual step.
    #[arg(long, alias = "residual_cap", default_value_t = 0.5)]
    pub residual_cap: f64,
    /// No Δt gate on the residual (g ≡ 1, also at Δt = 0).
    #[arg(long, alias = "residual_no_dt_gate")]
    pub residual_no_dt_gate: bool,
    /// Predict only on the start visit's edges: A_pred = max(weight, 0)·1\[A0 > 0\], no
    /// edge-existence loss, a support-only weight loss.
    #[arg(long, alias = "fixed_support")]
    pub fixed_support: bool,
    /// Initial ρ of the residual (not a reference flag; the reference starts at 1, where the
    /// score S = z·zᵀ of a fresh model saturates the tanh: every edge moves by ±cap and barely
    /// learns; 0 starts at the identity forecast, with gradients).
    #[arg(long, alias = "residual_scale_init", default_value_t = 1.0)]
    #[serde(default = "one")]
    pub residual_scale_init: f64,
    /// The residual starts from the linear-drift forecast instead of the start visit: log A0 +
    /// Δt·d, d the per-edge population drift fitted in closed form on the fold's training
    /// subjects (as `--model linear-drift`, fixed, on every edge), and the support is that
    /// forecast's (not a reference flag; needs --residual-skip).
    #[arg(long, alias = "drift_head")]
    #[serde(default)]
    pub drift_head: bool,
    /// The residual starts from the eb-drift forecast instead of the start visit: the expected
    /// log1p weight of `--model eb-drift` fitted in closed form on the fold's training subjects
    /// (docs/eb-drift.md; dense, so the residual acts on every edge). Not a reference flag;
    /// needs --residual-skip.
    #[arg(long, alias = "eb_head", conflicts_with = "drift_head")]
    #[serde(default)]
    pub eb_head: bool,
}

fn one() -> f64 {
    1.0
}

impl Default for DecoderConfig {
    fn default() -> Self {
        crate::settings::defaults()
    }
}

impl DecoderConfig {
    /// Whether decoding needs the start visit and the prediction time.
    pub fn needs_start(&self) -> bool {
        self.residual_skip || self.fixed_support
    }
}

/// What a prediction starts from: the start visit's log-domain SC (the model's input) and the
/// time since it (0 for a reconstruction), one per batch row.
#[derive(Debug, Clone)]
pub struct Start<B: Backend> {
    /// log1p(A0), `[B,N,N]`.
    pub a0_log: Tensor<B, 3>,
    /// `[B]`.
    pub t: Tensor<B, 1>,
    /// The population drift per year `[1, N, N]` (`--drift-head`), or none.
    pub drift: Option<Tensor<B, 3>>,
    /// The residual's base of every row `[B, N, N]`, computed on the host (`--eb-head`: the
    /// empirical-Bayes forecast in the log domain), or none.
    pub eb_base: Option<Tensor<B, 3>>,
}

impl<B: Backend> Start<B> {
    /// The residual's base in the log domain `[B, N, N]`: log A0, max(log A0 + Δt·d, 0) with
    /// the drift head, or the empirical-Bayes forecast with the EB head.
    pub fn base(&self) -> Tensor<B, 3> {
        if let Some(base) = &self.eb_base {
            return base.clone();
        }
        match &self.drift {
            None => self.a0_log.clone(),
            Some(d) => {
                let [b, n, _] = self.a0_log.dims();
                let step = d.clone().expand([b, n, n]) * self.t.clone().reshape([b, 1, 1]);
                (self.a0_log.clone() + step).clamp_min(0.0)
            }
        }
    }
}

/// Inner-product connection decoder. All ten calibration scalars of the reference are kept (so
/// checkpoints carry the same tensors); `gamma` and `beta` are unused in every mode, as in the
/// reference.
#[derive(Module, Debug)]
pub struct ConnDecoder<B: Backend> {
    pub alpha: Param<Tensor<B, 1>>,
    pub delta: Param<Tensor<B, 1>>,
    pub gamma: Param<Tensor<B, 1>>,
    pub beta: Param<Tensor<B, 1>>,
    pub residual_scale: Param<Tensor<B, 1>>,
    pub residual_bias: Param<Tensor<B, 1>>,
    pub alpha_new: Param<Tensor<B, 1>>,
    pub delta_new: Param<Tensor<B, 1>>,
    pub gamma_new: Param<Tensor<B, 1>>,
    pub beta_new: Param<Tensor<B, 1>>,
}

/// The decoded connectivity of a batch of states.
#[derive(Debug, Clone)]
pub struct ConnOutput<B: Backend> {
    /// Existence logits ℓ = α(S − δ), `[B,N,N]` (diagonal left as is).
    pub logit: Tensor<B, 3>,
    /// The weight of the mode: softplus(γ'S + β'), or the residual weight; zero diagonal.
    pub weight: Tensor<B, 3>,
    /// New-edge logits α_new(S − δ_new) (innovation module).
    pub l_new: Tensor<B, 3>,
    /// softplus(γ'S + β') with zero diagonal (the new-edge weight; equal to `weight` without
    /// the residual skip).
    pub w_new: Tensor<B, 3>,
    /// The prediction: σ(ℓ)·max(weight, 0), or max(weight, 0)·1\[A0 > 0\] with fixed support.
    pub a_pred: Tensor<B, 3>,
}

/// `[1, N·N]` with ones off the diagonal (a shape flex broadcasts fast over a batch).
pub(crate) fn off_diagonal<B: Backend>(n: usize, device: &B::Device) -> Tensor<B, 2> {
    Tensor::<B, 2>::eye(n, device)
        .neg()
        .add_scalar(1.0)
        .reshape([1, n * n])
}

/// Zeroes the diagonal of every matrix of `x` `[B,N,N]`.
pub(crate) fn zero_diagonal<B: Backend>(x: Tensor<B, 3>) -> Tensor<B, 3> {
    let [b, n, _] = x.dims();
    let off = off_diagonal::<B>(n, &x.device());
    (x.reshape([b, n * n]) * off).reshape([b, n, n])
}

impl<B: Backend> ConnDecoder<B> {
    pub fn new(device: &B::Device) -> Self {
        Self::with_residual_scale(1.0, device)
    }

    /// [`Self::new`] with ρ = `rho` (see [`DecoderConfig::residual_scale_init`]).
    pub fn with_residual_scale(rho: f64, device: &B::Device) -> Self {
        let p = |v: f32| Param::from_tensor(Tensor::from_floats([v], device));
        Self {
            alpha: p(10.0),
            delta: p(0.0),
            gamma: p(1.0),
            beta: p(0.0),
            residual_scale: p(rho as f32),
            residual_bias: p(0.0),
            alpha_new: p(10.0),
            delta_new: p(0.0),
            gamma_new: p(1.0),
            beta_new: p(0.0),
        }
    }

    /// `z_c` `[B,N,L]` → logits, weights and A_pred. `start` is needed by the residual and
    /// fixed-support modes (see [`DecoderConfig::needs_start`]).
    pub fn forward(
        &self,
        z_c: Tensor<B, 3>,
        cfg: &DecoderConfig,
        start: Option<&Start<B>>,
    ) -> ConnOutput<B> {
        let s = z_c.clone().matmul(z_c.swap_dims(1, 2));
        let sc = |p: &Param<Tensor<B, 1>>| p.val().reshape([1, 1, 1]);
        let logit = (s.clone() - sc(&self.delta)) * sc(&self.alpha);
        let l_new = (s.clone() - sc(&self.delta_new)) * sc(&self.alpha_new);
        let w_new = zero_diagonal(softplus(
            s.clone() * sc(&self.gamma_new) + sc(&self.beta_new),
        ));
        let start = start.filter(|_| cfg.needs_start());
        let weight = match (cfg.residual_skip, start) {
            (true, Some(st)) => {
                let b = s.dims()[0];
                let r = (s * sc(&self.residual_scale) + sc(&self.residual_bias))
                    .tanh()
                    .mul_scalar(cfg.residual_cap);
                let base = st.base();
                let support = base.clone().greater_elem(0.0).float();
                let gate = if cfg.residual_no_dt_gate {
                    Tensor::<B, 1>::ones([b], &r.device())
                } else {
                    st.t.clone() / st.t.clone().add_scalar(cfg.residual_tau)
                };
                let step = r * support * gate.reshape([b, 1, 1]);
                zero_diagonal((base + step).exp().sub_scalar(1.0))
            }
            _ => w_new.clone(),
        };
        let a_pred = match (cfg.fixed_support, start) {
            (true, Some(st)) => {
                let support = st.base().greater_elem(0.0).float();
                zero_diagonal(weight.clone().clamp_min(0.0) * support)
            }
            _ => sigmoid(logit.clone()) * weight.clone().clamp_min(0.0),
        };
        ConnOutput {
            logit,
            weight,
            l_new,
            w_new,
            a_pred,
        }
    }
}
