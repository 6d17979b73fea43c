//! The objective's settings: one field per reference flag that shapes the loss (porting note
//! §1.3), each carrying its flag, its underscore alias, its default and its doc, and the warm-up
//! schedules. The defaults are the reference's; [`crate::settings::defaults`] builds them.

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::settings::{
    EpochOrNever, MODEL, OPTIM, OffIfNegative, at_least_one, epoch_or_never, fraction,
    off_if_negative, positive,
};

/// The edge-existence loss on the logits (`--edge_loss`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum EdgeLoss {
    /// BCE with a positive-class weight (`--edge_pos_weight`).
    Bce,
    /// Focal loss (`--focal_gamma`, `--focal_alpha`).
    Focal,
}

/// Whether GradNorm balances the manifold and topology terms (`--gradnorm_scope`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum GradNormScope {
    #[value(name = "manifold_topo")]
    ManifoldTopo,
    None,
}

/// The innovation (new-edge) module (porting note §2.5).
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct InnovationConfig {
    /// New-edge module on forecasts (needs --fixed-support).
    #[arg(id = "innovation_enabled", long = "innovation-enabled", alias = "innovation_enabled", help_heading = MODEL)]
    pub enabled: bool,
    /// Candidates among the start visit's non-edges, by new-edge logit.
    #[arg(id = "innovation_topm", long = "innovation-topm", alias = "innovation_topm", default_value_t = 400, value_parser = at_least_one, help_heading = MODEL)]
    pub topm: usize,
    /// New edges kept per forecast.
    #[arg(id = "innovation_k_new", long = "innovation-k-new", alias = "innovation_k_new", default_value_t = 80, help_heading = MODEL)]
    pub k_new: usize,
    /// Temperature of the new-edge probability.
    #[arg(id = "innovation_tau", long = "innovation-tau", alias = "innovation_tau", default_value_t = 0.1, value_parser = positive, help_heading = MODEL)]
    pub tau: f64,
    /// The new-edge threshold δ: this quantile of the candidates' logits.
    #[arg(id = "innovation_delta_quantile", long = "innovation-delta-quantile", alias = "innovation_delta_quantile", default_value_t = 0.95, value_parser = fraction, help_heading = MODEL)]
    pub delta_quantile: f64,
    /// Offset of the new-edge gate on Δt (months).
    #[arg(id = "innovation_dt_offset_months", long = "innovation-dt-offset-months", alias = "innovation_dt_offset_months", default_value_t = 0.0, allow_negative_numbers = true, help_heading = MODEL)]
    pub dt_offset_months: f64,
    /// Ramp of the new-edge gate on Δt (months).
    #[arg(id = "innovation_dt_ramp_months", long = "innovation-dt-ramp-months", alias = "innovation_dt_ramp_months", default_value_t = 12.0, value_parser = positive, help_heading = MODEL)]
    pub dt_ramp_months: f64,
    /// Accepted and recorded without effect, as in the reference (deprecated there).
    #[arg(id = "innovation_dt_scale_years", long = "innovation-dt-scale-years", alias = "innovation_dt_scale_years", default_value_t = 1.0, value_parser = positive, help_heading = MODEL)]
    pub dt_scale_years: f64,
    /// γ of the new-edge focal loss.
    #[arg(long, alias = "innovation_focal_gamma", default_value_t = 2.0, help_heading = MODEL)]
    pub innovation_focal_gamma: f64,
    /// α of the new-edge focal loss.
    #[arg(long, alias = "innovation_focal_alpha", default_value_t = 0.25, help_heading = MODEL)]
    pub innovation_focal_alpha: f64,
    /// From this epoch on train only the new-edge scalars and sample long visit intervals (−1:
    /// never).
    #[arg(id = "innovation_freeze_backbone_after", long = "innovation-freeze-backbone-after", alias = "innovation_freeze_backbone_after", default_value = "-1", value_parser = epoch_or_never, allow_negative_numbers = true, help_heading = MODEL)]
    pub freeze_backbone_after: EpochOrNever,
    /// Weight of the sparsity of the new-edge probabilities.
    #[arg(long, alias = "lambda_new_sparse", default_value_t = 0.1, help_heading = OPTIM)]
    pub lambda_new_sparse: f64,
    /// The new-edge module is off before this epoch …
    #[arg(long, alias = "new_sparse_warmup_epochs", default_value_t = 10, help_heading = OPTIM)]
    pub new_sparse_warmup_epochs: usize,
    /// … then its sparsity weight ramps up over this many epochs.
    #[arg(long, alias = "new_sparse_ramp_epochs", default_value_t = 10, help_heading = OPTIM)]
    pub new_sparse_ramp_epochs: usize,
    /// Weight of a log-Huber on the true new edges among the candidates.
    #[arg(long, alias = "lambda_new_reg", default_value_t = 0.0, help_heading = OPTIM)]
    pub lambda_new_reg: f64,
}

impl Default for InnovationConfig {
    fn default() -> Self {
        crate::settings::defaults()
    }
}

impl InnovationConfig {
    /// Whether the backbone is frozen (and visits sampled as long intervals) at epoch `e`.
    pub(crate) fn frozen(&self, epoch: usize) -> bool {
        self.enabled && self.freeze_backbone_after.is_some_and(|n| epoch >= n)
    }
}

/// The Betti-curve topology loss (porting note §2.2).
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[command(next_help_heading = OPTIM)]
pub(crate) struct TopologyConfig {
    /// Weight of the Betti-curve topology loss (0: off, and no GradNorm).
    #[arg(long, alias = "lambda_topo", default_value_t = 1e-3)]
    pub lambda_topo: f64,
    /// Thresholds K of the topology loss.
    #[arg(id = "topo_loss_bins", long = "topo-loss-bins", alias = "topo_loss_bins", default_value_t = 8, value_parser = at_least_one)]
    pub loss_bins: usize,
    /// Slope of the soft threshold of the prediction.
    #[arg(
        id = "betti_sharpness",
        long = "betti-sharpness",
        alias = "betti_sharpness",
        default_value_t = 20.0
    )]
    pub sharpness: f64,
    /// Heat-kernel time t of the Betti estimate.
    #[arg(
        id = "betti_t",
        long = "betti-t",
        alias = "betti_t",
        default_value_t = 10.0
    )]
    pub t: f64,
    /// Taylor order of exp(−tL).
    #[arg(id = "betti_taylor_order", long = "betti-taylor-order", alias = "betti_taylor_order", default_value_t = 20, value_parser = at_least_one)]
    pub taylor_order: usize,
    /// Hutchinson probe vectors.
    #[arg(id = "betti_probes", long = "betti-probes", alias = "betti_probes", default_value_t = 2, value_parser = at_least_one)]
    pub probes: usize,
    /// Quantile of an epoch's raw topology values that updates the scale.
    #[arg(
        id = "topo_scale_quantile",
        long = "topo-scale-quantile",
        alias = "topo_scale_quantile",
        default_value_t = 0.9
    )]
    pub scale_quantile: f64,
    /// Normalise the topology loss as raw/scale instead of log1p(raw/scale).
    #[arg(long, alias = "disable_topo_log_compress")]
    pub disable_topo_log_compress: bool,
    /// Cosine warm-up of the topology weight over this fraction of --max-epochs.
    #[arg(
        id = "topo_warmup_frac",
        long = "topo-warmup-frac",
        alias = "topo_warmup_frac",
        default_value_t = 0.2
    )]
    pub warmup_frac: f64,
    /// GradNorm between the manifold and topology terms, or none.
    #[arg(
        id = "gradnorm_scope",
        long = "gradnorm-scope",
        alias = "gradnorm_scope",
        value_enum,
        default_value = "manifold_topo"
    )]
    pub gradnorm: GradNormScope,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        crate::settings::defaults()
    }
}

impl TopologyConfig {
    /// No topology loss and no GradNorm (the minimal faithful core).
    pub(crate) fn off() -> Self {
        Self {
            lambda_topo: 0.0,
            gradnorm: GradNormScope::None,
            ..Self::default()
        }
    }
    /// Whether the topology term (and with it GradNorm) is on.
    pub(crate) fn on(&self) -> bool {
        self.lambda_topo > 0.0
    }
    /// log1p(raw/scale) (the default) rather than raw/scale.
    pub(crate) fn log_compress(&self) -> bool {
        !self.disable_topo_log_compress
    }
    /// The topology term's coefficient at `epoch` of `max_epochs`, with GradNorm weight `w`.
    pub(crate) fn coefficient(&self, epoch: usize, max_epochs: usize, w: f64) -> f64 {
        if self.on() {
            self.lambda_topo * w * self.warmup_factor(epoch, max_epochs)
        } else {
            0.0
        }
    }
    /// Cosine warm-up of the topology weight: W = max(⌈max_epochs·frac⌉, 1) epochs.
    pub(crate) fn warmup_factor(&self, epoch: usize, max_epochs: usize) -> f64 {
        let frac = self.warmup_frac;
        if frac <= 0.0 {
            return 1.0;
        }
        let w = ((max_epochs as f64 * frac).ceil() as usize).max(1);
        if epoch < w {
            0.5 * (1.0 - (std::f64::consts::PI * (epoch + 1) as f64 / w as f64).cos())
        } else {
            1.0
        }
    }
}

/// Every setting of the CLG-ODE objective, reference defaults.
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[command(next_help_heading = OPTIM)]
pub(crate) struct ObjectiveConfig {
    /// Weight of the manifold (reconstruction) term; λ_man of GradNorm.
    #[arg(long, alias = "lambda_manifold", default_value_t = 1.0)]
    pub lambda_manifold: f64,
    /// Weight of the sparsified log-weight loss inside each reconstruction.
    #[arg(long, alias = "lambda_weight", default_value_t = 1.0)]
    pub lambda_weight: f64,
    /// Weight of the KL term.
    #[arg(long, alias = "lambda_kl", default_value_t = 1e-4)]
    pub lambda_kl: f64,
    /// Weight of the velocity term.
    #[arg(long, alias = "lambda_vel", default_value_t = 0.2)]
    pub lambda_vel: f64,
    /// Weight of the acceleration term.
    #[arg(long, alias = "lambda_acc", default_value_t = 0.1)]
    pub lambda_acc: f64,
    /// First epoch (0-based) with the velocity term (the reference's name).
    #[arg(
        id = "warmup_manifold_epochs",
        long = "warmup-manifold-epochs",
        alias = "warmup_manifold_epochs",
        default_value_t = 10
    )]
    pub vel_from_epoch: usize,
    /// First epoch (0-based) with the acceleration term (the reference's name).
    #[arg(
        id = "warmup_vel_epochs",
        long = "warmup-vel-epochs",
        alias = "warmup_vel_epochs",
        default_value_t = 20
    )]
    pub acc_from_epoch: usize,
    /// Edge-existence loss on the logits: bce or focal.
    #[arg(long, alias = "edge_loss", value_enum, default_value = "bce")]
    pub edge_loss: EdgeLoss,
    /// Positive-class weight of the BCE edge loss.
    #[arg(long, alias = "edge_pos_weight", default_value_t = 5.0)]
    pub edge_pos_weight: f64,
    /// γ of the focal edge loss.
    #[arg(long, alias = "focal_gamma", default_value_t = 2.0)]
    pub focal_gamma: f64,
    /// α of the focal edge loss (< 0: no α weighting).
    #[arg(long, alias = "focal_alpha", default_value = "-1", value_parser = off_if_negative, allow_negative_numbers = true)]
    pub focal_alpha: OffIfNegative,
    /// Weight of the full-edge log MSE.
    #[arg(long, alias = "lambda_full_log_mse", default_value_t = 0.0)]
    pub lambda_full_log_mse: f64,
    /// Weight of the penalty on predicted weight where the target has no edge.
    #[arg(long, alias = "lambda_zero_log", default_value_t = 0.0)]
    pub lambda_zero_log: f64,
    /// The zero-edge penalty is off before this epoch …
    #[arg(long, alias = "zero_log_warmup_epochs", default_value_t = 0)]
    pub zero_log_warmup_epochs: usize,
    /// … then ramps up over this many epochs.
    #[arg(long, alias = "zero_log_ramp_epochs", default_value_t = 0)]
    pub zero_log_ramp_epochs: usize,
    /// Weight of the shrinkage of the predicted log weights toward the start visit.
    #[arg(long, alias = "lambda_delta_log", default_value_t = 0.0)]
    pub lambda_delta_log: f64,
    /// Weight of the expected-edge-count penalty ((Σσ(ℓ) − k)/k)².
    #[arg(long, alias = "lambda_density", default_value_t = 0.0)]
    pub lambda_density: f64,
    /// The density penalty is off before this epoch …
    #[arg(long, alias = "density_warmup_epochs", default_value_t = 0)]
    pub density_warmup_epochs: usize,
    /// … then ramps up over this many epochs.
    #[arg(long, alias = "density_ramp_epochs", default_value_t = 0)]
    pub density_ramp_epochs: usize,
    /// Also compute the AUPRC of the existence probabilities (mask diagnostics).
    #[arg(long, alias = "compute_mask_auprc")]
    pub compute_mask_auprc: bool,
    #[command(flatten)]
    pub topology: TopologyConfig,
    #[command(flatten)]
    pub innovation: InnovationConfig,
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        crate::settings::defaults()
    }
}

impl ObjectiveConfig {
    pub(crate) fn vel_on(&self, epoch: usize) -> bool {
        epoch >= self.vel_from_epoch && self.lambda_vel > 0.0
    }
    pub(crate) fn acc_on(&self, epoch: usize) -> bool {
        epoch >= self.acc_from_epoch && self.lambda_acc > 0.0
    }
    pub(crate) fn zero_log_factor(&self, epoch: usize) -> f64 {
        linear_factor(
            epoch,
            self.zero_log_warmup_epochs,
            self.zero_log_ramp_epochs,
        )
    }
    pub(crate) fn density_factor(&self, epoch: usize) -> f64 {
        linear_factor(epoch, self.density_warmup_epochs, self.density_ramp_epochs)
    }
    /// Whether the density penalty acts at `epoch`.
    pub(crate) fn density_on(&self, epoch: usize) -> bool {
        self.lambda_density > 0.0 && self.density_factor(epoch) > 0.0
    }
    /// The density penalty's coefficient at `epoch`.
    pub(crate) fn density_coefficient(&self, epoch: usize) -> f64 {
        self.lambda_density * self.density_factor(epoch)
    }
    /// Whether the topology term (and with it GradNorm) is on.
    pub(crate) fn topo_on(&self) -> bool {
        self.topology.on()
    }
    /// λ of the two terms GradNorm balances (manifold, topology).
    pub(crate) fn gradnorm_lambdas(&self) -> [f64; 2] {
        [self.lambda_manifold, self.topology.lambda_topo]
    }
    pub(crate) fn gradnorm_on(&self) -> bool {
        self.topo_on() && self.topology.gradnorm == GradNormScope::ManifoldTopo
    }
}

/// The linear warm-up/ramp factor f(e; W, R): 0 before epoch W, then rising over R epochs to 1
/// (1 throughout when both are 0).
pub(crate) fn linear_factor(epoch: usize, warmup: usize, ramp: usize) -> f64 {
    if warmup == 0 && ramp == 0 {
        return 1.0;
    }
    if epoch < warmup {
        return 0.0;
    }
    if ramp == 0 {
        return 1.0;
    }
    ((epoch - warmup + 1) as f64 / ramp as f64).min(1.0)
}
