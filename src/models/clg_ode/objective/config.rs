//! The objective's settings: one field per reference flag that shapes the loss (porting note
//! §1.3), with the reference's defaults, and the warm-up schedules.

use serde::{Deserialize, Serialize};

/// The edge-existence loss on the logits (`--edge_loss`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EdgeLoss {
    /// BCE with a positive-class weight (`--edge_pos_weight`).
    Bce,
    /// Focal loss (`--focal_gamma`, `--focal_alpha`).
    Focal,
}

/// Whether GradNorm balances the manifold and topology terms (`--gradnorm_scope`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GradNormScope {
    #[value(name = "manifold_topo")]
    ManifoldTopo,
    None,
}

/// The innovation (new-edge) module (porting note §2.5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InnovationConfig {
    pub enabled: bool,
    /// M: candidates among the start visit's non-edges, by new-edge logit.
    pub topm: usize,
    /// K_new: candidates kept.
    pub k_new: usize,
    pub tau: f64,
    pub delta_quantile: f64,
    pub dt_offset_months: f64,
    pub dt_ramp_months: f64,
    /// Accepted and recorded, without effect (as in the reference).
    pub dt_scale_years: f64,
    pub focal_gamma: f64,
    pub focal_alpha: f64,
    pub lambda_new_sparse: f64,
    /// The whole module is off before this epoch; then the sparsity factor ramps.
    pub new_sparse_warmup_epochs: usize,
    pub new_sparse_ramp_epochs: usize,
    pub lambda_new_reg: f64,
    /// From this epoch on, only the four new-edge scalars train.
    pub freeze_backbone_after: Option<usize>,
}

impl Default for InnovationConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            topm: 400,
            k_new: 80,
            tau: 0.10,
            delta_quantile: 0.95,
            dt_offset_months: 0.0,
            dt_ramp_months: 12.0,
            dt_scale_years: 1.0,
            focal_gamma: 2.0,
            focal_alpha: 0.25,
            lambda_new_sparse: 0.10,
            new_sparse_warmup_epochs: 10,
            new_sparse_ramp_epochs: 10,
            lambda_new_reg: 0.0,
            freeze_backbone_after: None,
        }
    }
}

impl InnovationConfig {
    /// Whether the backbone is frozen (and visits sampled as long intervals) at epoch `e`.
    pub fn frozen(&self, epoch: usize) -> bool {
        self.enabled && self.freeze_backbone_after.is_some_and(|n| epoch >= n)
    }
}

/// The Betti-curve topology loss (porting note §2.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopologyConfig {
    pub lambda_topo: f64,
    /// Thresholds K.
    pub loss_bins: usize,
    pub sharpness: f64,
    /// Heat-kernel time t.
    pub t: f64,
    pub taylor_order: usize,
    pub probes: usize,
    pub scale_quantile: f64,
    pub log_compress: bool,
    pub warmup_frac: f64,
    pub gradnorm: GradNormScope,
}

impl Default for TopologyConfig {
    fn default() -> Self {
        Self {
            lambda_topo: 1e-3,
            loss_bins: 8,
            sharpness: 20.0,
            t: 10.0,
            taylor_order: 20,
            probes: 2,
            scale_quantile: 0.9,
            log_compress: true,
            warmup_frac: 0.2,
            gradnorm: GradNormScope::ManifoldTopo,
        }
    }
}

/// Every setting of the CLG-ODE objective, reference defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveConfig {
    pub lambda_manifold: f64,
    /// λ_w of the weight term inside each reconstruction.
    pub lambda_weight: f64,
    pub lambda_kl: f64,
    pub lambda_vel: f64,
    pub lambda_acc: f64,
    /// First epoch (0-based) with the velocity term (`--warmup_manifold_epochs`).
    pub vel_from_epoch: usize,
    /// First epoch (0-based) with the acceleration term (`--warmup_vel_epochs`).
    pub acc_from_epoch: usize,
    /// Weight of the i→k forecast (the reference's 0.5).
    pub forecast_k_weight: f64,
    pub edge_loss: EdgeLoss,
    pub edge_pos_weight: f64,
    pub focal_gamma: f64,
    /// `None`: no α weighting (the reference's `--focal_alpha` < 0).
    pub focal_alpha: Option<f64>,
    pub lambda_full_log_mse: f64,
    pub lambda_zero_log: f64,
    pub zero_log_warmup_epochs: usize,
    pub zero_log_ramp_epochs: usize,
    pub lambda_delta_log: f64,
    pub lambda_density: f64,
    pub density_warmup_epochs: usize,
    pub density_ramp_epochs: usize,
    /// Support-only weight loss, no edge loss (the decoder's fixed support).
    pub fixed_support: bool,
    pub compute_mask_auprc: bool,
    /// Epochs of the run (the topology warm-up length and the epoch of test-time losses).
    pub max_epochs: usize,
    pub topology: TopologyConfig,
    pub innovation: InnovationConfig,
}

impl Default for ObjectiveConfig {
    fn default() -> Self {
        Self {
            lambda_manifold: 1.0,
            lambda_weight: 1.0,
            lambda_kl: 1e-4,
            lambda_vel: 0.2,
            lambda_acc: 0.1,
            vel_from_epoch: 10,
            acc_from_epoch: 20,
            forecast_k_weight: 0.5,
            edge_loss: EdgeLoss::Bce,
            edge_pos_weight: 5.0,
            focal_gamma: 2.0,
            focal_alpha: None,
            lambda_full_log_mse: 0.0,
            lambda_zero_log: 0.0,
            zero_log_warmup_epochs: 0,
            zero_log_ramp_epochs: 0,
            lambda_delta_log: 0.0,
            lambda_density: 0.0,
            density_warmup_epochs: 0,
            density_ramp_epochs: 0,
            fixed_support: false,
            compute_mask_auprc: false,
            max_epochs: 120,
            topology: TopologyConfig::default(),
            innovation: InnovationConfig::default(),
        }
    }
}

impl ObjectiveConfig {
    pub fn vel_on(&self, epoch: usize) -> bool {
        epoch >= self.vel_from_epoch && self.lambda_vel > 0.0
    }
    pub fn acc_on(&self, epoch: usize) -> bool {
        epoch >= self.acc_from_epoch && self.lambda_acc > 0.0
    }
    pub fn zero_log_factor(&self, epoch: usize) -> f64 {
        linear_factor(
            epoch,
            self.zero_log_warmup_epochs,
            self.zero_log_ramp_epochs,
        )
    }
    pub fn density_factor(&self, epoch: usize) -> f64 {
        linear_factor(epoch, self.density_warmup_epochs, self.density_ramp_epochs)
    }
    /// Whether the topology term (and with it GradNorm) is on.
    pub fn topo_on(&self) -> bool {
        self.topology.lambda_topo > 0.0
    }
    pub fn gradnorm_on(&self) -> bool {
        self.topo_on() && self.topology.gradnorm == GradNormScope::ManifoldTopo
    }
    /// Cosine warm-up of the topology weight: W = max(⌈max_epochs·frac⌉, 1) epochs.
    pub fn topo_warmup_factor(&self, epoch: usize) -> f64 {
        let frac = self.topology.warmup_frac;
        if frac <= 0.0 {
            return 1.0;
        }
        let w = ((self.max_epochs as f64 * frac).ceil() as usize).max(1);
        if epoch < w {
            0.5 * (1.0 - (std::f64::consts::PI * (epoch + 1) as f64 / w as f64).cos())
        } else {
            1.0
        }
    }
    /// Whether the innovation module acts at epoch `e`.
    pub fn innovation_on(&self, epoch: usize) -> bool {
        let i = &self.innovation;
        self.fixed_support && i.enabled && i.k_new > 0 && epoch >= i.new_sparse_warmup_epochs
    }
}

/// The linear warm-up/ramp factor f(e; W, R): 0 before epoch W, then rising over R epochs to 1
/// (1 throughout when both are 0).
pub fn linear_factor(epoch: usize, warmup: usize, ramp: usize) -> f64 {
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
