//! The settings of a `train-gnn` run, each field with its flag: the cohort and its split, the
//! training recipe and where results go, with the model's, the decoder's, the objective's and
//! the sampling's settings flattened in. The CLI flattens this struct into `trainer train-gnn`;
//! below the CLI it is plain data ([`GnnSettings::check`] holds the checks across fields).

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use super::kind::ModelKind;
use crate::models::clg_ode::objective::ObjectiveConfig;
use crate::models::clg_ode::{DecoderConfig, ModelSizes};
use crate::models::linear_drift::{DriftSettings, ForecastForm};
use crate::settings::{DATA, MODEL, OPTIM, RUN, at_least_one, at_least_two, positive};
use crate::toolbox::optim::OptimizerChoice;

/// The reference's `--batch_size`: the batch on a CPU (`cv/batch.rs` settles the others).
pub(crate) const REFERENCE_BATCH: usize = 2;

/// `trainer train-gnn`'s own settings (every flag of the reference's `train_clg_ode.py`, with
/// its default, in kebab case with the reference's underscore spelling as alias; see
/// docs/clg-ode-surface.md).
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GnnSettings {
    /// The forecaster: `clg-ode` (the reference's model), the baseline `linear-drift` (the
    /// start scan plus a per-edge population drift × Δt, fitted in closed form) or the
    /// reference's baselines `gcn` (its script's --hidden_dim default is 64: pass it) and
    /// `vector-lstm` (its script's defaults: --latent_dim 512 --batch_size 4 --max_epochs 80
    /// --patience 10 --learning_rate 1e-4: pass them).
    #[arg(id = "model", long = "model", value_enum, default_value = "clg-ode", help_heading = MODEL)]
    pub model_kind: ModelKind,
    /// The reference project's `configs/paths.yaml`: `--sc_dir`, `--morph_root`,
    /// `--subject_info_csv` and `--results_dir` not given are read from its `local.data.*` and
    /// `local.outputs.*` keys (relative paths from the folder above `configs/`), as the
    /// reference's scripts read them; `--config FILE.yaml` means the same. The resolved paths
    /// are the run's (args.json, config.toml): it repeats without the file.
    #[arg(long, value_name = "FILE", alias = "paths_yaml", help_heading = DATA)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths_yaml: Option<PathBuf>,
    /// Directory of SC matrices, one `<subject>_<session>.csv` (dense N×N, no header) per scan.
    #[arg(long, alias = "sc_dir", help_heading = DATA)]
    pub sc_dir: PathBuf,
    /// Root of the morphology tree (`Schaefer400_Morphology_<subject>.csv`, session in the path).
    #[arg(long, alias = "morph_root", help_heading = DATA)]
    pub morph_root: PathBuf,
    /// Subject table with `scanid`, `age`, `sex`, `siteid` columns.
    /// Needed by `clg-ode` (ages and covariates); the baselines run without it (ages = visit
    /// indices), as the reference's baseline scripts, which take none.
    #[arg(long, alias = "subject_info_csv", help_heading = DATA)]
    pub subject_info_csv: Option<PathBuf>,
    /// Cross-validation fold to train (0..cv_folds−1), or −1 for every fold in turn.
    #[arg(long, alias = "cv_fold", default_value_t = -1, allow_negative_numbers = true, help_heading = DATA)]
    pub cv_fold: i64,
    /// Folds of the GroupKFold cross-validation on the train/validation subjects (≥ 2).
    #[arg(long, alias = "cv_folds", default_value_t = 5, value_parser = at_least_two, help_heading = DATA)]
    pub cv_folds: usize,
    /// Bins of the Euler-characteristic curve: the numeric covariates, their z-scoring and the
    /// ECC metrics.
    #[arg(long, alias = "topo_bins", default_value_t = 32, value_parser = at_least_one, help_heading = DATA)]
    pub topo_bins: usize,
    /// `--model clg-ode`: after training, the forecasts are the closed-form eb-drift's
    /// (`--model eb-drift` fitted on the best fold's training subjects) unless the network's
    /// sc_log_mse skill on that fold's validation subjects beats eb-drift's by more than
    /// `--min-delta`; the choice and both skills are printed and kept in `test_metrics.json`
    /// (`eb_fallback`). Not a reference flag; set by `--preset residual` and `drift-residual`
    /// (`--eb-fallback false` keeps the network's forecasts).
    #[arg(long, alias = "eb_fallback", num_args = 0..=1, default_value_t = false,
          default_missing_value = "true", action = clap::ArgAction::Set, help_heading = MODEL)]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub eb_fallback: bool,
    #[command(flatten)]
    pub sampling: Sampling,
    #[command(flatten)]
    pub sizes: ModelSizes,
    #[command(flatten)]
    pub decoder: DecoderConfig,
    #[command(flatten)]
    pub drift: DriftSettings,
    #[command(flatten)]
    pub objective: ObjectiveConfig,
    /// Epochs per fold.
    #[arg(long, alias = "max_epochs", default_value_t = 120, value_parser = at_least_one, help_heading = OPTIM)]
    pub max_epochs: usize,
    /// Subjects per optimiser step (per rank when data-parallel). Default: 2, the reference's;
    /// `--model clg-ode` on a CUDA GPU: what the GPU holds, min(256, ½ free memory / memory a
    /// subject, training subjects / 8), printed at the start (docs/guide/forecasts.md,
    /// "Batch"); a resumed run takes its checkpoint's.
    #[arg(long, alias = "batch_size", value_parser = at_least_one, help_heading = OPTIM)]
    pub batch_size: Option<usize>,
    /// Learning rate (constant).
    #[arg(long, alias = "learning_rate", default_value_t = 5e-5, value_parser = positive, help_heading = OPTIM)]
    pub learning_rate: f64,
    /// Adam, as the reference, unless `--optimizer sgd` (not a flag of the reference). In
    /// `args.json` under its own key (`optimizer` there is the optimiser run, described), left
    /// out for Adam: a default run's `args.json` is as before, and one without it reads as Adam.
    #[command(flatten)]
    #[serde(
        rename = "optimizer_choice",
        default,
        skip_serializing_if = "OptimizerChoice::is_default"
    )]
    pub optimizer: OptimizerChoice,
    /// Validation SC metrics (and the identity baseline) every N epochs (0: only when the early-
    /// stopping metric needs them).
    #[arg(long, alias = "val_sc_eval_every", default_value_t = 0, help_heading = OPTIM)]
    pub val_sc_eval_every: usize,
    /// w of monitor_mse_plus_density = val sc_log_mse + w·val density loss.
    #[arg(long, alias = "early_stop_density_weight", default_value_t = 0.0, help_heading = OPTIM)]
    pub early_stop_density_weight: f64,
    /// Seed of the split, weight init, shuffling, visit sampling, augmentation and probes
    /// (--random-state).
    #[arg(long, visible_alias = "random-state", alias = "random_state", default_value_t = 42, help_heading = OPTIM)]
    pub seed: u64,
    /// Results root: the run directory is `<results-dir>/runs/<run name>/`.
    #[arg(long, alias = "results_dir", help_heading = RUN)]
    pub results_dir: PathBuf,
    /// Start the fold from a checkpoint's weights (a new run: fresh optimiser, epochs from 0);
    /// needs --cv-fold ≥ 0. The reference's default, the empty string, means none.
    #[arg(long, alias = "resume_from", help_heading = RUN)]
    pub resume_from: Option<PathBuf>,
    /// Also print the reference's console lines on stdout (`Fold 1/5, epoch 3/120,
    /// train_loss=…`), for scripts that parse them.
    #[arg(long, help_heading = RUN)]
    pub porcelain: bool,
    /// `--model clg-ode` under `--backend tch`: hold the cohort's scans (log and raw SC) on the
    /// device for the run, a step gathering its matrices there by index. `auto`: on a CUDA GPU
    /// when they take at most a quarter of its free memory; `on`: always (on a CPU, in host
    /// memory: 8·N² bytes a scan); `off`: never (each step uploads its batch's matrices). The
    /// results are the same (docs/guide/gnn.md, "The cohort on the GPU").
    #[arg(long, value_enum, default_value = "auto", help_heading = RUN)]
    #[serde(default, skip_serializing_if = "ScansOnDevice::is_auto")]
    pub scans_on_device: ScansOnDevice,
}

/// `--scans-on-device`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ScansOnDevice {
    #[default]
    Auto,
    On,
    Off,
}

impl ScansOnDevice {
    fn is_auto(&self) -> bool {
        *self == ScansOnDevice::Auto
    }
}

impl GnnSettings {
    /// Subjects per step and rank: resolved by the job before anything reads it
    /// (`cv/batch.rs`); the reference's 2 where nothing resolved it.
    pub(crate) fn batch(&self) -> usize {
        self.batch_size.unwrap_or(REFERENCE_BATCH)
    }

    /// The folds this run trains.
    pub(crate) fn fold_ids(&self) -> Vec<usize> {
        match usize::try_from(self.cv_fold) {
            Ok(f) => vec![f],
            Err(_) => (0..self.cv_folds).collect(),
        }
    }

    /// Resolves what depends on several flags: the residual decoder reads the start visit
    /// itself, so the reconstruction input keeps every edge (as the reference); an empty
    /// `--resume-from` (the reference's default) is none.
    pub(crate) fn resolve(mut self) -> Self {
        self.resume_from = self.resume_from.filter(|p| !p.as_os_str().is_empty());
        if self.decoder.residual_skip {
            self.sampling.sc_pos_edge_drop_prob = 0.0;
        }
        self
    }

    /// The checks across flags (each flag's own range is checked by its parser).
    pub(crate) fn check(&self) -> Result<()> {
        if !(-1..self.cv_folds as i64).contains(&self.cv_fold) {
            bail!(
                "--cv-fold must be -1 (all folds) or 0..{}, got {}",
                self.cv_folds.saturating_sub(1),
                self.cv_fold
            );
        }
        if self.objective.innovation.enabled && !self.decoder.fixed_support {
            bail!(
                "--innovation-enabled needs --fixed-support (the new edges are added to the fixed \
                 support)"
            );
        }
        if self.decoder.drift_head && !self.decoder.residual_skip {
            bail!("--drift-head needs --residual-skip (the drift is the residual's base)");
        }
        if self.decoder.eb_head && !self.decoder.residual_skip {
            bail!("--eb-head needs --residual-skip (the eb-drift forecast is the residual's base)");
        }
        if self.subject_info_csv.is_none() && self.model_kind.info().needs_subject_table {
            bail!(
                "--subject-info-csv is required for --model {}",
                self.model_kind
            );
        }
        self.optimizer.spec()?;
        if !self.optimizer.is_default() && !self.model_kind.info().gradient_trained {
            bail!(
                "--optimizer/--momentum do not apply to --model {}: it is fitted in closed form, \
                 without an optimiser",
                self.model_kind
            );
        }
        if self.drift.forecast != ForecastForm::Dense && self.model_kind != ModelKind::EbDrift {
            // The graph's transplants assume a forecast of the expected next scan: linear
            // drift's keeps the start scan's noise, and its graphs lose β0 and strength to the
            // start scan (docs/frontier.md, "Shipped").
            bail!(
                "--forecast {} applies to --model eb-drift only (the forecaster with an existence \
                 probability per edge and an expected next scan to transplant residuals onto), \
                 not to --model {}",
                serde_json::to_value(self.drift.forecast)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                self.model_kind
            );
        }
        if self.eb_fallback && self.model_kind != ModelKind::ClgOde {
            bail!(
                "--eb-fallback applies to --model clg-ode only (a trained network that may lose \
                 to the closed-form eb-drift), not to --model {}",
                self.model_kind
            );
        }
        if !self.scans_on_device.is_auto() && self.model_kind != ModelKind::ClgOde {
            bail!(
                "--scans-on-device applies to --model clg-ode only (the model trained in steps on \
                 a device), not to --model {}",
                self.model_kind
            );
        }
        if self.resume_from.is_some() && self.cv_fold < 0 {
            bail!("--resume-from needs a single fold (--cv-fold >= 0)");
        }
        Ok(())
    }
}

/// Visit sampling and augmentation (reference defaults).
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
#[command(next_help_heading = crate::settings::DATA)]
pub(crate) struct Sampling {
    /// Probability of an adjacent visit triplet (i, i+1, i+2) for subjects with more than 3 visits.
    #[arg(long, alias = "adjacent_pair_prob", default_value_t = 0.7)]
    pub adjacent_pair_prob: f64,
    /// σ of the Gaussian noise added to the z-scored morphology of the reconstruction input.
    #[arg(long, alias = "morph_noise_sigma", default_value_t = 0.05)]
    pub morph_noise_sigma: f64,
    /// Probability of dropping each edge of the reconstruction input (not with --residual-skip,
    /// where the resolved settings hold 0, as the reference skips the dropout there).
    #[arg(long, alias = "sc_pos_edge_drop_prob", default_value_t = 0.02)]
    pub sc_pos_edge_drop_prob: f64,
    /// Leave s_mean out of the numeric covariates (34 instead of 35).
    #[arg(long, alias = "disable_s_mean")]
    pub disable_s_mean: bool,
}

impl Default for Sampling {
    fn default() -> Self {
        crate::settings::defaults()
    }
}

impl Sampling {
    /// Whether s_mean is a numeric covariate.
    pub(crate) fn include_s_mean(&self) -> bool {
        !self.disable_s_mean
    }
}
