//! Arguments of the training commands, grouped under `--help` headings (data, model,
//! optimisation, run, cluster) that are also the sections of `config.toml`.

use std::path::PathBuf;

use clap::Args;

use super::common::{DATA, DeviceArgs, EarlyStopArgs, MODEL, OPTIM, RUN, RunArgs};
use crate::models::clg_ode::objective::{EdgeLoss, GradNormScope};

/// `trainer train-mnist`.
#[derive(Args, Debug, Clone)]
pub struct MnistArgs {
    /// Directory holding the four IDX files (raw or .gz; `train-images-idx3-ubyte` or
    /// `train-images.idx3-ubyte` spellings).
    #[arg(long, help_heading = DATA)]
    pub data_dir: PathBuf,
    /// Use only the first N training images.
    #[arg(long, help_heading = DATA)]
    pub limit_train: Option<usize>,
    /// Use only the first N test images.
    #[arg(long, help_heading = DATA)]
    pub limit_test: Option<usize>,
    /// Turn dropout off (used to compare data-parallel runs with single-process runs).
    #[arg(long, help_heading = MODEL)]
    pub no_dropout: bool,
    #[arg(long, default_value_t = 1, help_heading = OPTIM)]
    pub epochs: usize,
    /// Training batch size (per rank when data-parallel).
    #[arg(long, default_value_t = 64, help_heading = OPTIM)]
    pub batch_size: usize,
    /// Adam learning rate of the first epoch; multiplied by `--lr-gamma` after every epoch.
    #[arg(long, default_value_t = 1e-3, help_heading = OPTIM)]
    pub lr: f64,
    /// Per-epoch learning-rate decay (StepLR with step 1, as PyTorch's examples/mnist).
    #[arg(long, default_value_t = 0.7, help_heading = OPTIM)]
    pub lr_gamma: f64,
    /// Seed of weight init, shuffling and dropout.
    #[arg(long, default_value_t = 1, help_heading = OPTIM)]
    pub seed: u64,
    /// Batch size for evaluation.
    #[arg(long, default_value_t = 1000, help_heading = OPTIM)]
    pub test_batch_size: usize,
    #[command(flatten)]
    pub early_stop: EarlyStopArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `trainer train-gnn`: every flag of the reference's `train_clg_ode.py`, with its default, in
/// kebab case with the reference's underscore spelling as alias (see docs/clg-ode-surface.md).
#[derive(Args, Debug, Clone)]
#[command(
    args_override_self = true,
    mut_arg("early_stop_metric", |a| a.default_value("val_loss")),
    mut_arg("patience", |a| a.default_value("20"))
)]
pub struct GnnArgs {
    /// Directory of SC matrices, one `<subject>_<session>.csv` (dense N×N, no header) per scan.
    #[arg(long, alias = "sc_dir", help_heading = DATA)]
    pub sc_dir: PathBuf,
    /// Root of the morphology tree (`Schaefer400_Morphology_<subject>.csv`, session in the path).
    #[arg(long, alias = "morph_root", help_heading = DATA)]
    pub morph_root: PathBuf,
    /// Subject table with `scanid`, `age`, `sex`, `siteid` columns.
    #[arg(long, alias = "subject_info_csv", help_heading = DATA)]
    pub subject_info_csv: PathBuf,
    /// Cross-validation fold to train (0..cv_folds−1), or −1 for every fold in turn.
    #[arg(long, alias = "cv_fold", default_value_t = -1, allow_negative_numbers = true, help_heading = DATA)]
    pub cv_fold: i64,
    /// Folds of the GroupKFold cross-validation on the train/validation subjects (≥ 2).
    #[arg(long, alias = "cv_folds", default_value_t = 5, help_heading = DATA)]
    pub cv_folds: usize,
    /// Bins of the Euler-characteristic curve: the numeric covariates, their z-scoring and the ECC
    /// metrics.
    #[arg(long, alias = "topo_bins", default_value_t = 32, help_heading = DATA)]
    pub topo_bins: usize,
    /// Leave s_mean out of the numeric covariates (34 instead of 35).
    #[arg(long, alias = "disable_s_mean", help_heading = DATA)]
    pub disable_s_mean: bool,
    /// Probability of an adjacent visit triplet (i, i+1, i+2) for subjects with more than 3 visits.
    #[arg(long, alias = "adjacent_pair_prob", default_value_t = 0.7, help_heading = DATA)]
    pub adjacent_pair_prob: f64,
    /// σ of the Gaussian noise added to the z-scored morphology of the reconstruction input.
    #[arg(long, alias = "morph_noise_sigma", default_value_t = 0.05, help_heading = DATA)]
    pub morph_noise_sigma: f64,
    /// Probability of dropping each edge of the reconstruction input (not with --residual-skip).
    #[arg(long, alias = "sc_pos_edge_drop_prob", default_value_t = 0.02, help_heading = DATA)]
    pub sc_pos_edge_drop_prob: f64,
    /// L, the latent size of each of the two encodings.
    #[arg(long, alias = "latent_dim", default_value_t = 64, help_heading = MODEL)]
    pub latent_dim: usize,
    /// H, the hidden size of every MLP.
    #[arg(long, alias = "hidden_dim", default_value_t = 128, help_heading = MODEL)]
    pub hidden_dim: usize,
    /// RK4 steps per forecast interval.
    #[arg(long, alias = "solver_steps", default_value_t = 12, help_heading = MODEL)]
    pub solver_steps: usize,
    /// Log-space residual decoder: weight = expm1(log A0 + g(Δt)·cap·tanh(ρS + b)) on A0's support.
    #[arg(long, alias = "residual_skip", help_heading = MODEL)]
    pub residual_skip: bool,
    /// τ of the residual's Δt gate Δt/(Δt + τ).
    #[arg(long, alias = "residual_tau", default_value_t = 1.0, help_heading = MODEL)]
    pub residual_tau: f64,
    /// Cap of the residual step.
    #[arg(long, alias = "residual_cap", default_value_t = 0.5, help_heading = MODEL)]
    pub residual_cap: f64,
    /// No Δt gate on the residual (also at Δt = 0).
    #[arg(long, alias = "residual_no_dt_gate", help_heading = MODEL)]
    pub residual_no_dt_gate: bool,
    /// Initial ρ of the residual (not a reference flag; the reference starts at 1, where the
    /// tanh is saturated; 0 starts at the identity forecast).
    #[arg(long, alias = "residual_scale_init", default_value_t = 1.0, help_heading = MODEL)]
    pub residual_scale_init: f64,
    /// Predict only on the start visit's edges: no edge-existence loss, a support-only weight loss.
    #[arg(long, alias = "fixed_support", help_heading = MODEL)]
    pub fixed_support: bool,
    /// New-edge module on forecasts (needs --fixed-support).
    #[arg(long, alias = "innovation_enabled", help_heading = MODEL)]
    pub innovation_enabled: bool,
    /// Candidates among the start visit's non-edges, by new-edge logit.
    #[arg(long, alias = "innovation_topm", default_value_t = 400, help_heading = MODEL)]
    pub innovation_topm: usize,
    /// New edges kept per forecast.
    #[arg(long, alias = "innovation_k_new", default_value_t = 80, help_heading = MODEL)]
    pub innovation_k_new: usize,
    /// Temperature of the new-edge probability.
    #[arg(long, alias = "innovation_tau", default_value_t = 0.1, help_heading = MODEL)]
    pub innovation_tau: f64,
    /// The new-edge threshold δ: this quantile of the candidates' logits.
    #[arg(long, alias = "innovation_delta_quantile", default_value_t = 0.95, help_heading = MODEL)]
    pub innovation_delta_quantile: f64,
    /// Offset of the new-edge gate on Δt (months).
    #[arg(long, alias = "innovation_dt_offset_months", default_value_t = 0.0, help_heading = MODEL)]
    pub innovation_dt_offset_months: f64,
    /// Ramp of the new-edge gate on Δt (months).
    #[arg(long, alias = "innovation_dt_ramp_months", default_value_t = 12.0, help_heading = MODEL)]
    pub innovation_dt_ramp_months: f64,
    /// Accepted and recorded without effect, as in the reference (deprecated there).
    #[arg(long, alias = "innovation_dt_scale_years", default_value_t = 1.0, help_heading = MODEL)]
    pub innovation_dt_scale_years: f64,
    /// γ of the new-edge focal loss.
    #[arg(long, alias = "innovation_focal_gamma", default_value_t = 2.0, help_heading = MODEL)]
    pub innovation_focal_gamma: f64,
    /// α of the new-edge focal loss.
    #[arg(long, alias = "innovation_focal_alpha", default_value_t = 0.25, help_heading = MODEL)]
    pub innovation_focal_alpha: f64,
    /// From this epoch on train only the new-edge scalars and sample long visit intervals (−1:
    /// never).
    #[arg(long, alias = "innovation_freeze_backbone_after", default_value_t = -1, allow_negative_numbers = true, help_heading = MODEL)]
    pub innovation_freeze_backbone_after: i64,
    /// Epochs per fold.
    #[arg(long, alias = "max_epochs", default_value_t = 120, help_heading = OPTIM)]
    pub max_epochs: usize,
    /// Subjects per optimiser step (per rank when data-parallel).
    #[arg(long, alias = "batch_size", default_value_t = 2, help_heading = OPTIM)]
    pub batch_size: usize,
    /// Adam learning rate (constant).
    #[arg(long, alias = "learning_rate", default_value_t = 5e-5, help_heading = OPTIM)]
    pub learning_rate: f64,
    /// Weight of the manifold (reconstruction) term; λ_man of GradNorm.
    #[arg(long, alias = "lambda_manifold", default_value_t = 1.0, help_heading = OPTIM)]
    pub lambda_manifold: f64,
    /// Weight of the sparsified log-weight loss inside each reconstruction.
    #[arg(long, alias = "lambda_weight", default_value_t = 1.0, help_heading = OPTIM)]
    pub lambda_weight: f64,
    /// Weight of the KL term.
    #[arg(long, alias = "lambda_kl", default_value_t = 1e-4, help_heading = OPTIM)]
    pub lambda_kl: f64,
    /// Weight of the velocity term.
    #[arg(long, alias = "lambda_vel", default_value_t = 0.2, help_heading = OPTIM)]
    pub lambda_vel: f64,
    /// Weight of the acceleration term.
    #[arg(long, alias = "lambda_acc", default_value_t = 0.1, help_heading = OPTIM)]
    pub lambda_acc: f64,
    /// First epoch (0-based) with the velocity term (the reference's name).
    #[arg(long, alias = "warmup_manifold_epochs", default_value_t = 10, help_heading = OPTIM)]
    pub warmup_manifold_epochs: usize,
    /// First epoch (0-based) with the acceleration term (the reference's name).
    #[arg(long, alias = "warmup_vel_epochs", default_value_t = 20, help_heading = OPTIM)]
    pub warmup_vel_epochs: usize,
    /// Edge-existence loss on the logits: bce or focal.
    #[arg(long, alias = "edge_loss", value_enum, default_value = "bce", help_heading = OPTIM)]
    pub edge_loss: EdgeLoss,
    /// Positive-class weight of the BCE edge loss.
    #[arg(long, alias = "edge_pos_weight", default_value_t = 5.0, help_heading = OPTIM)]
    pub edge_pos_weight: f64,
    /// γ of the focal edge loss.
    #[arg(long, alias = "focal_gamma", default_value_t = 2.0, help_heading = OPTIM)]
    pub focal_gamma: f64,
    /// α of the focal edge loss (< 0: no α weighting).
    #[arg(long, alias = "focal_alpha", default_value_t = -1.0, help_heading = OPTIM)]
    pub focal_alpha: f64,
    /// Weight of the full-edge log MSE.
    #[arg(long, alias = "lambda_full_log_mse", default_value_t = 0.0, help_heading = OPTIM)]
    pub lambda_full_log_mse: f64,
    /// Weight of the penalty on predicted weight where the target has no edge.
    #[arg(long, alias = "lambda_zero_log", default_value_t = 0.0, help_heading = OPTIM)]
    pub lambda_zero_log: f64,
    /// The zero-edge penalty is off before this epoch …
    #[arg(long, alias = "zero_log_warmup_epochs", default_value_t = 0, help_heading = OPTIM)]
    pub zero_log_warmup_epochs: usize,
    /// … then ramps up over this many epochs.
    #[arg(long, alias = "zero_log_ramp_epochs", default_value_t = 0, help_heading = OPTIM)]
    pub zero_log_ramp_epochs: usize,
    /// Weight of the shrinkage of the predicted log weights toward the start visit.
    #[arg(long, alias = "lambda_delta_log", default_value_t = 0.0, help_heading = OPTIM)]
    pub lambda_delta_log: f64,
    /// Weight of the expected-edge-count penalty ((Σσ(ℓ) − k)/k)².
    #[arg(long, alias = "lambda_density", default_value_t = 0.0, help_heading = OPTIM)]
    pub lambda_density: f64,
    /// The density penalty is off before this epoch …
    #[arg(long, alias = "density_warmup_epochs", default_value_t = 0, help_heading = OPTIM)]
    pub density_warmup_epochs: usize,
    /// … then ramps up over this many epochs.
    #[arg(long, alias = "density_ramp_epochs", default_value_t = 0, help_heading = OPTIM)]
    pub density_ramp_epochs: usize,
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
    /// Weight of the Betti-curve topology loss (0: off, and no GradNorm).
    #[arg(long, alias = "lambda_topo", default_value_t = 1e-3, help_heading = OPTIM)]
    pub lambda_topo: f64,
    /// Thresholds of the topology loss.
    #[arg(long, alias = "topo_loss_bins", default_value_t = 8, help_heading = OPTIM)]
    pub topo_loss_bins: usize,
    /// Slope of the soft threshold of the prediction.
    #[arg(long, alias = "betti_sharpness", default_value_t = 20.0, help_heading = OPTIM)]
    pub betti_sharpness: f64,
    /// Heat-kernel time t of the Betti estimate.
    #[arg(long, alias = "betti_t", default_value_t = 10.0, help_heading = OPTIM)]
    pub betti_t: f64,
    /// Taylor order of exp(−tL).
    #[arg(long, alias = "betti_taylor_order", default_value_t = 20, help_heading = OPTIM)]
    pub betti_taylor_order: usize,
    /// Hutchinson probe vectors.
    #[arg(long, alias = "betti_probes", default_value_t = 2, help_heading = OPTIM)]
    pub betti_probes: usize,
    /// Quantile of an epoch's raw topology values that updates the scale.
    #[arg(long, alias = "topo_scale_quantile", default_value_t = 0.9, help_heading = OPTIM)]
    pub topo_scale_quantile: f64,
    /// Normalise the topology loss as raw/scale instead of log1p(raw/scale).
    #[arg(long, alias = "disable_topo_log_compress", help_heading = OPTIM)]
    pub disable_topo_log_compress: bool,
    /// Cosine warm-up of the topology weight over this fraction of --max-epochs.
    #[arg(long, alias = "topo_warmup_frac", default_value_t = 0.2, help_heading = OPTIM)]
    pub topo_warmup_frac: f64,
    /// GradNorm between the manifold and topology terms, or none.
    #[arg(long, alias = "gradnorm_scope", value_enum, default_value = "manifold_topo", help_heading = OPTIM)]
    pub gradnorm_scope: GradNormScope,
    /// Also compute the AUPRC of the existence probabilities (mask diagnostics).
    #[arg(long, alias = "compute_mask_auprc", help_heading = OPTIM)]
    pub compute_mask_auprc: bool,
    /// Validation SC metrics (and the identity baseline) every N epochs (0: only when the early-
    /// stopping metric needs them).
    #[arg(long, alias = "val_sc_eval_every", default_value_t = 0, help_heading = OPTIM)]
    pub val_sc_eval_every: usize,
    /// w of monitor_mse_plus_density = val sc_log_mse + w·val density loss.
    #[arg(long, alias = "early_stop_density_weight", default_value_t = 0.0, help_heading = OPTIM)]
    pub early_stop_density_weight: f64,
    /// Seed of the split, weight init, shuffling, visit sampling, augmentation and probes (--random-
    /// state).
    #[arg(long, visible_alias = "random-state", alias = "random_state", default_value_t = 42, help_heading = OPTIM)]
    pub seed: u64,
    /// Results root: the run directory is `<results-dir>/runs/<run name>/`.
    #[arg(long, alias = "results_dir", help_heading = RUN)]
    pub results_dir: PathBuf,
    /// Start the fold from a checkpoint's weights (a new run: fresh optimiser, epochs from 0); needs
    /// --cv-fold ≥ 0.
    #[arg(long, alias = "resume_from", help_heading = RUN)]
    pub resume_from: Option<PathBuf>,
    /// Also print the reference's console lines on stdout (`Fold 1/5, epoch 3/120, train_loss=…`),
    /// for scripts that parse them.
    #[arg(long, help_heading = RUN)]
    pub porcelain: bool,
    /// A named configuration (flags given beside it override it): `residual`, the fixed
    /// support + residual skip variant that beats the identity forecast.
    #[arg(long, help_heading = RUN)]
    pub preset: Option<String>,
    #[command(flatten)]
    pub early_stop: EarlyStopArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub run: RunArgs,
}
