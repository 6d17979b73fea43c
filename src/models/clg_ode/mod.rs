//! CLG-ODE (docs/clg-ode-model.md §2): two graph encoders, a covariate encoder, a coupled latent ODE
//! integrated with fixed-step RK4, a morphology decoder and an inner-product connection decoder.
//!
//! Port decisions:
//! * `use_mu` everywhere (z0 = μ), as the reference trainer always does; logvar is trained only
//!   through the KL term. There is no reparameterisation sampling.
//! * A batch of trajectories with different Δt is integrated at once: time is rescaled to
//!   s ∈ [0, 1] and `dz/ds = Δt · f(Δt·s, z)` with Δt a per-trajectory tensor. With `steps`
//!   steps this is the reference's RK4 on [0, Δt] step for step.
//! * The covariate and time blocks of the ODE MLPs' first layers are applied once per
//!   integration / distinct time as per-trajectory biases (same function, fewer FLOPs), and the
//!   two MLPs run as one network (`layers::PreparedOde`): four backend operations per
//!   evaluation.
//! * Parameter names follow the reference's, except `net.0`/`net.2` → `fc1`/`fc2`
//!   (see [`torch_name`]). Burn's Linear weights are [in, out] (PyTorch's transposed).

pub(crate) mod decoder;
#[cfg(test)]
mod invariant_tests;
pub(crate) mod layers;
pub(crate) mod loss;
pub(crate) mod objective;
#[cfg(test)]
mod op_count_tests;
pub(crate) mod shared_ode;
#[cfg(test)]
mod shared_ode_tests;

#[cfg(test)]
mod tests;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

pub(crate) use decoder::{ConnDecoder, ConnOutput, DecoderConfig, Start};
#[cfg(test)]
use layers::normalized_adjacency;
pub(crate) use layers::{CovEncoder, GraphEncoder, Mlp2, OdeFunc, propagate};

/// Name of the model in checkpoint metadata.
pub(crate) const MODEL_NAME: &str = "clg_ode";

/// The model's sizes that are flags (reference defaults).
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[command(next_help_heading = crate::settings::MODEL)]
pub(crate) struct ModelSizes {
    /// L, the latent size of each of the two encodings.
    #[arg(long, alias = "latent_dim", default_value_t = 64, value_parser = crate::settings::at_least_one)]
    pub latent_dim: usize,
    /// H, the hidden size of every MLP; also the width of `--model gcn` (the reference's GCN
    /// script defaults to 64 and its job script passes `--hidden_dim 64`).
    #[arg(long, alias = "hidden_dim", default_value_t = 128, value_parser = crate::settings::at_least_one)]
    pub hidden_dim: usize,
    /// RK4 steps per forecast interval.
    #[arg(long, alias = "solver_steps", default_value_t = 12, value_parser = crate::settings::at_least_one)]
    pub solver_steps: usize,
}

impl Default for ModelSizes {
    fn default() -> Self {
        crate::settings::defaults()
    }
}

/// Model dimensions: the sizes given as flags and those the cohort implies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ClgOdeConfig {
    /// F, morphology metrics per node (4).
    pub morph_dim: usize,
    /// L, H and the RK4 steps.
    #[serde(flatten)]
    pub sizes: ModelSizes,
    /// 3.
    pub sex_vocab: usize,
    /// K sites + 1.
    pub site_vocab: usize,
    /// 8 (hard-coded in the reference).
    pub cov_embed_dim: usize,
    /// 35 = age, s, s_mean, 32 z-scored ECC bins.
    pub numeric_cov_dim: usize,
    /// The connection decoder's variant.
    #[serde(default)]
    pub decoder: DecoderConfig,
}

impl ClgOdeConfig {
    /// Reference defaults for a cohort with `morph_dim` metrics and `site_vocab` site ids.
    pub(crate) fn new(morph_dim: usize, site_vocab: usize) -> Self {
        Self {
            morph_dim,
            sizes: ModelSizes::default(),
            sex_vocab: 3,
            site_vocab,
            cov_embed_dim: 8,
            numeric_cov_dim: 35,
            decoder: DecoderConfig::default(),
        }
    }

    /// C = 2·embed + numeric.
    pub(crate) fn cov_dim(&self) -> usize {
        2 * self.cov_embed_dim + self.numeric_cov_dim
    }

    pub(crate) fn init<B: Backend>(&self, device: &B::Device) -> ClgOde<B> {
        let (f, l, h) = (self.morph_dim, self.sizes.latent_dim, self.sizes.hidden_dim);
        ClgOde {
            morph_encoder: GraphEncoder::new(f, h, l, device),
            conn_encoder: GraphEncoder::new(f, h, l, device),
            cov_encoder: CovEncoder::new(
                self.sex_vocab,
                self.site_vocab,
                self.cov_embed_dim,
                device,
            ),
            ode_func: OdeFunc::new(l, self.cov_dim(), h, device),
            morph_decoder: Mlp2::new(l, h, f, device),
            conn_decoder: ConnDecoder::with_residual_scale(
                self.decoder.residual_scale_init,
                device,
            ),
            latent_dim: l,
            solver_steps: self.sizes.solver_steps,
            decoder: self.decoder.clone(),
        }
    }
}

#[derive(Module, Debug)]
pub struct ClgOde<B: Backend> {
    pub morph_encoder: GraphEncoder<B>,
    pub conn_encoder: GraphEncoder<B>,
    pub cov_encoder: CovEncoder<B>,
    pub ode_func: OdeFunc<B>,
    pub morph_decoder: Mlp2<B>,
    pub conn_decoder: ConnDecoder<B>,
    pub latent_dim: usize,
    pub solver_steps: usize,
    #[module(skip)]
    pub decoder: DecoderConfig,
}

/// Encoder outputs, each `[B,N,L]`.
#[derive(Debug, Clone)]
pub(crate) struct Encoded<B: Backend> {
    pub mu_m: Tensor<B, 3>,
    pub logvar_m: Tensor<B, 3>,
    pub mu_c: Tensor<B, 3>,
    pub logvar_c: Tensor<B, 3>,
}

impl<B: Backend> Encoded<B> {
    /// z0 = concat(μ_m, μ_c) `[B,N,2L]` (use_mu).
    pub(crate) fn z0(&self) -> Tensor<B, 3> {
        Tensor::cat(vec![self.mu_m.clone(), self.mu_c.clone()], 2)
    }
}

/// Decoder outputs of a batch of latent states.
#[derive(Debug, Clone)]
pub(crate) struct Decoded<B: Backend> {
    /// x̂ `[B,N,F]`.
    pub x_hat: Tensor<B, 3>,
    pub conn: ConnOutput<B>,
}

/// The full forward pass on a time grid `[0]` or `[0, Δt]`, as the reference's `forward`.
#[derive(Debug, Clone)]
#[cfg(test)]
pub(crate) struct ForwardOutput<B: Backend> {
    pub enc: Encoded<B>,
    /// z at every grid time: `z[t]` is `[B,N,2L]`.
    pub z: Vec<Tensor<B, 3>>,
    /// Decoded states at every grid time.
    pub dec: Vec<Decoded<B>>,
}

impl<B: Backend> ClgOde<B> {
    /// Both encoders on log-domain SC `a_log` `[B,N,N]` and z-scored morphology `x` `[B,N,F]`.
    pub(crate) fn encode(&self, a_log: Tensor<B, 3>, x: Tensor<B, 3>) -> Encoded<B> {
        let ax = propagate(a_log, x);
        let (mu_m, logvar_m) = self.morph_encoder.forward(ax.clone());
        let (mu_c, logvar_c) = self.conn_encoder.forward(ax);
        Encoded {
            mu_m,
            logvar_m,
            mu_c,
            logvar_c,
        }
    }

    /// cov_full `[B, C]` from sex/site ids `[B]` and numeric covariates `[B, 35]`.
    pub fn covariates(
        &self,
        sex: Tensor<B, 1, Int>,
        site: Tensor<B, 1, Int>,
        numeric: Tensor<B, 2>,
    ) -> Tensor<B, 2> {
        self.cov_encoder.forward(sex, site, numeric)
    }

    /// z(Δt) for every trajectory: z0 `[B,N,2L]`, cov `[B,C]`, dt `[B]` (> 0).
    pub fn integrate(&self, z0: Tensor<B, 3>, cov: Tensor<B, 2>, dt: Tensor<B, 1>) -> Tensor<B, 3> {
        self.ode_func
            .prepare(cov, dt)
            .integrate(z0, self.solver_steps)
    }

    /// [`ClgOde::integrate`], replaying the integration `shared` kept of the same inputs where
    /// the backend shares one ([`shared_ode`]).
    pub(crate) fn integrate_shared(
        &self,
        z0: Tensor<B, 3>,
        cov: Tensor<B, 2>,
        dt: Tensor<B, 1>,
        shared: Option<&shared_ode::SharedOde>,
    ) -> Tensor<B, 3> {
        let p = self.ode_func.prepare(cov, dt);
        match shared.and_then(|s| shared_ode::replay(&p, z0.clone(), s)) {
            Some(z) => z,
            None => p.integrate(z0, self.solver_steps),
        }
    }

    /// The integration of [`ClgOde::integrate`] run once with its stages kept, for the graphs
    /// of `Autodiff<B>` that replay it ([`shared_ode`]).
    pub(crate) fn integrate_kept(
        &self,
        z0: Tensor<B, 3>,
        cov: Tensor<B, 2>,
        dt: Tensor<B, 1>,
    ) -> shared_ode::SharedOde {
        shared_ode::SharedOde::forward(&self.ode_func.prepare(cov, dt), z0, self.solver_steps)
    }

    /// Decodes states z `[B,N,2L]`; `start` (start visit and time of each row) is needed by the
    /// residual and fixed-support decoders.
    pub(crate) fn decode(&self, z: Tensor<B, 3>, start: Option<&Start<B>>) -> Decoded<B> {
        let l = self.latent_dim;
        let z_m = z.clone().narrow(2, 0, l);
        let z_c = z.narrow(2, l, l);
        Decoded {
            x_hat: self.morph_decoder.forward(z_m),
            conn: self.conn_decoder.forward(z_c, &self.decoder, start),
        }
    }

    /// The reference forward with `use_mu = true`: grid `[0]` when `dt` is `None`, else
    /// `[0, Δt]` with a per-row Δt `[B]`.
    #[allow(clippy::too_many_arguments)]
    #[cfg(test)]
    pub(crate) fn forward(
        &self,
        a_log: Tensor<B, 3>,
        x: Tensor<B, 3>,
        dt: Option<Tensor<B, 1>>,
        sex: Tensor<B, 1, Int>,
        site: Tensor<B, 1, Int>,
        numeric: Tensor<B, 2>,
    ) -> ForwardOutput<B> {
        let b = a_log.dims()[0];
        let device = a_log.device();
        let enc = self.encode(a_log.clone(), x);
        let z0 = enc.z0();
        let mut z = vec![z0.clone()];
        let mut times = vec![Tensor::<B, 1>::zeros([b], &device)];
        if let Some(dt) = dt {
            let cov = self.covariates(sex, site, numeric);
            z.push(self.integrate(z0, cov, dt.clone()));
            times.push(dt);
        }
        let dec = z
            .iter()
            .zip(times)
            .map(|(z, t)| {
                let start = Start {
                    a0_log: a_log.clone(),
                    t,
                    drift: None,
                    eb_base: None,
                };
                self.decode(z.clone(), Some(&start))
            })
            .collect();
        ForwardOutput { enc, z, dec }
    }
}

/// The reference (PyTorch state_dict) name of one of our parameter names.
pub fn torch_name(name: &str) -> String {
    let mlp = |rest: &str| rest.replacen("fc1.", "0.", 1).replacen("fc2.", "2.", 1);
    if let Some(rest) = name.strip_prefix("morph_decoder.") {
        format!("morph_decoder.net.{}", mlp(rest))
    } else if let Some(rest) = name.strip_prefix("ode_func.") {
        format!("ode_func.{}", mlp(rest))
    } else {
        name.to_string()
    }
}
