//! `linear-drift`: the start scan plus a population drift per edge × Δt, in the log1p domain
//! (the authors' planned baseline B4, "A0 + linear drift"). Fitted in closed form: for every
//! edge, the least-squares slope through the origin of the change of log1p weight between
//! consecutive visits against their interval, over the training subjects' visit pairs. No
//! covariates: the same drift for every subject (sex, site and age effects are left to the
//! learned models).

use burn::module::Param;
use burn::prelude::*;
use ndarray::Array2;
use serde::{Deserialize, Serialize};

/// Name of the model in checkpoint metadata.
pub(crate) const MODEL_NAME: &str = "linear_drift";

/// Where the drift applies.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum DriftSupport {
    /// Every edge: an absent edge whose drift is positive appears.
    All,
    /// Only the start scan's edges: absent edges stay absent.
    Start,
}

/// The form of a closed-form forecast (`--forecast`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ForecastForm {
    /// The expected log1p weight of every edge: the least squared error, but every edge with
    /// any chance of existing gets a small weight (a dense graph).
    #[default]
    Dense,
    /// A plausible connectome: the expected number of edges, those most likely to exist, each
    /// with its expected weight if present; every other edge 0.
    Sparse,
    /// Two objects: the dense forecast for the log-domain columns, and for the topology columns
    /// (ECC, Betti curves, degree, strength) the graph of least expected loss over transplanted
    /// training residuals (`train::gnn::graph_forecast`; docs/frontier.md).
    Graph,
}

/// The settings of the closed-form forecasters: `--drift-support` (`--model linear-drift`) and
/// `--forecast` (`--model eb-drift`).
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[command(next_help_heading = crate::settings::MODEL)]
pub(crate) struct DriftSettings {
    /// linear-drift: the edges the drift applies to, `all` or the start scan's (`start`).
    #[arg(long, alias = "drift_support", value_enum, default_value = "all")]
    pub drift_support: DriftSupport,
    /// eb-drift: the forecast's form, `dense` (the expected log1p weight of every edge: the
    /// least squared error, a dense graph) or `sparse` (the expected number of edges, those most
    /// likely to exist, each at its expected weight if present: a graph with the connectome's
    /// shape) or `graph` (the dense forecast for the log-domain columns, and for the topology
    /// columns the graph of least expected topology loss over the training pairs' transplanted
    /// residuals: docs/frontier.md).
    #[arg(long, value_enum, default_value = "dense")]
    #[serde(default)]
    pub forecast: ForecastForm,
}

impl Default for DriftSettings {
    fn default() -> Self {
        crate::settings::defaults()
    }
}

/// The per-edge drift `[N, N]` (change of log1p weight per year), a module so that checkpoints
/// carry it like any model's weights.
#[derive(Module, Debug)]
pub(crate) struct LinearDrift<B: Backend> {
    pub drift: Param<Tensor<B, 2>>,
}

impl<B: Backend> LinearDrift<B> {
    /// No drift (the identity forecast) for `n` nodes.
    pub(crate) fn new(n: usize, device: &B::Device) -> Self {
        Self {
            drift: Param::from_tensor(Tensor::zeros([n, n], device)),
        }
    }

    /// The model with drift `d` (row-major `[N, N]`).
    pub(crate) fn with_drift(n: usize, d: Vec<f32>, device: &B::Device) -> Self {
        Self {
            drift: Param::from_tensor(Tensor::from_data(TensorData::new(d, [n, n]), device)),
        }
    }

    /// The drift on the host.
    pub(crate) fn host(&self) -> Vec<f32> {
        crate::host_reads::data(self.drift.val())
            .convert::<f32>()
            .to_vec()
            .unwrap_or_default()
    }
}

/// The forecast `dt` years after the raw matrix `a0`: expm1(max(log1p(a0) + dt·drift, 0)) on
/// the edges `support` allows (elsewhere `a0`).
pub(crate) fn forecast(
    a0: &Array2<f32>,
    drift: &[f32],
    dt: f64,
    support: DriftSupport,
) -> Array2<f32> {
    let mut out = a0.clone();
    for ((v, &a), &d) in out.iter_mut().zip(a0.iter()).zip(drift) {
        if support == DriftSupport::Start && a <= 0.0 {
            continue;
        }
        let y = (a.max(0.0) as f64).ln_1p() + dt * d as f64;
        *v = y.max(0.0).exp_m1() as f32;
    }
    out
}

/// The sufficient statistics of the closed-form fit over visit pairs: Σ Δt·Δy and Σ Δy² per
/// edge, Σ Δt² and the number of pairs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct DriftStats {
    pub xy: Vec<f64>,
    pub yy: Vec<f64>,
    pub xx: f64,
    pub pairs: f64,
}

impl DriftStats {
    /// Adds the pair (start `a`, later `b`, `dt` years apart).
    pub(crate) fn add_pair(&mut self, a: &Array2<f32>, b: &Array2<f32>, dt: f64) {
        let n = a.len();
        if self.xy.len() != n {
            self.xy = vec![0.0; n];
            self.yy = vec![0.0; n];
        }
        for (k, (&x0, &x1)) in a.iter().zip(b.iter()).enumerate() {
            let dy = (x1.max(0.0) as f64).ln_1p() - (x0.max(0.0) as f64).ln_1p();
            self.xy[k] += dt * dy;
            self.yy[k] += dy * dy;
        }
        self.xx += dt * dt;
        self.pairs += 1.0;
    }

    /// Adds another set of statistics (another shard, another step).
    pub(crate) fn merge(&mut self, o: &DriftStats) {
        if self.xy.len() < o.xy.len() {
            self.xy.resize(o.xy.len(), 0.0);
            self.yy.resize(o.yy.len(), 0.0);
        }
        for (a, b) in self.xy.iter_mut().zip(&o.xy) {
            *a += b;
        }
        for (a, b) in self.yy.iter_mut().zip(&o.yy) {
            *a += b;
        }
        self.xx += o.xx;
        self.pairs += o.pairs;
    }

    /// The least-squares drift of every edge (0 without pairs).
    pub(crate) fn drift(&self) -> Vec<f32> {
        self.xy
            .iter()
            .map(|&xy| {
                if self.xx > 0.0 {
                    (xy / self.xx) as f32
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// Mean squared residual per pair and edge of the fit `d` over the upper triangle of an
    /// `n`-node matrix (the training error, in the log1p domain).
    pub(crate) fn residual(&self, d: &[f32], n: usize) -> f64 {
        if self.pairs <= 0.0 || n < 2 {
            return f64::NAN;
        }
        let mut sum = 0.0;
        for i in 0..n {
            for j in i + 1..n {
                let k = i * n + j;
                let dk = d[k] as f64;
                sum += self.yy[k] - 2.0 * dk * self.xy[k] + dk * dk * self.xx;
            }
        }
        sum / (self.pairs * (n * (n - 1) / 2) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_recovers_a_drift_and_forecasts_with_it() {
        let a0 = Array2::from_shape_vec((2, 2), vec![0.0, 1.0, 1.0, 0.0]).unwrap();
        let grow = |dt: f64| a0.mapv(|v| (((v as f64).ln_1p() + 0.1 * dt).exp_m1()) as f32);
        let mut s = DriftStats::default();
        s.add_pair(&a0, &grow(2.0), 2.0);
        s.add_pair(&a0, &grow(4.0), 4.0);
        let d = s.drift();
        assert!(
            (d[1] - 0.1).abs() < 1e-6 && (d[2] - 0.1).abs() < 1e-6,
            "{d:?}"
        );
        assert!(s.residual(&d, 2) < 1e-10);
        let f = forecast(&a0, &d, 2.0, DriftSupport::All);
        assert!((f[(0, 1)] - grow(2.0)[(0, 1)]).abs() < 1e-5);
        // Off the support: an absent edge grows under `all`, not under `start`.
        assert!(forecast(&a0, &[0.1; 4], 2.0, DriftSupport::All)[(0, 0)] > 0.0);
        assert_eq!(
            forecast(&a0, &[0.1; 4], 2.0, DriftSupport::Start)[(0, 0)],
            0.0
        );
        // A negative drift never gives a negative weight.
        let f = forecast(&a0, &[-5.0; 4], 2.0, DriftSupport::All);
        assert!(f.iter().all(|&v| v >= 0.0));
    }
}
