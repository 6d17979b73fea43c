//! The resolved `train-gnn` configuration (`args.json`) and the run's metadata
//! (`run_meta.json`).

use std::path::Path;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;

use super::batch::LossSettings;
use super::{CV_FOLDS, Prepared, SPLIT_SEED, TEST_SIZE};
use crate::backend::Placement;
use crate::cli::GnnArgs;
use crate::data::connectome::Cohort;
use crate::files::write_json;
use crate::models::clg_ode::ClgOdeConfig;
use crate::outputs::rundir::RunMeta;

/// The resolved configuration, saved as `args.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GnnConfig {
    pub sc_dir: PathBuf,
    pub morph_root: PathBuf,
    pub subject_info_csv: PathBuf,
    /// The base results directory given on the command line.
    pub base_results_dir: PathBuf,
    /// The run directory (the reference rewrites `results_dir` to it).
    pub results_dir: PathBuf,
    pub run_name: String,
    pub cv_fold: i64,
    pub folds: Vec<usize>,
    pub max_epochs: usize,
    pub batch_size: usize,
    pub learning_rate: f64,
    pub optimizer: String,
    pub patience: usize,
    pub monitor_metric: String,
    pub seed: u64,
    pub split_seed: u32,
    pub test_size: f64,
    pub cv_folds_total: usize,
    pub model: ClgOdeConfig,
    pub loss: LossSettings,
    pub deviations: Vec<String>,
    pub backend: String,
    pub device: String,
    pub resume: Option<String>,
    pub checkpoint_every: u64,
    #[serde(default)]
    pub world_size: usize,
    /// Per-rank batch × world size.
    #[serde(default)]
    pub effective_batch_size: usize,
}

impl GnnConfig {
    /// The settings a resumed run must share with the checkpoint (everything but paths,
    /// placement and resume options).
    pub fn fingerprint(&self) -> Value {
        json!({
            "folds": self.folds, "max_epochs": self.max_epochs,
            "effective_batch_size": self.effective_batch_size,
            "learning_rate": self.learning_rate, "patience": self.patience, "seed": self.seed,
            "model": self.model, "loss": self.loss,
        })
    }
}

fn model_config(args: &GnnArgs, cohort: &Cohort, numeric_dim: usize) -> ClgOdeConfig {
    ClgOdeConfig {
        morph_dim: cohort.n_metrics(),
        latent_dim: args.latent_dim,
        hidden_dim: args.hidden_dim,
        sex_vocab: cohort.sex_vocab,
        site_vocab: cohort.site_vocab,
        cov_embed_dim: 8,
        numeric_cov_dim: numeric_dim,
        solver_steps: args.solver_steps,
    }
}

/// The configuration of a run in `run_dir` with `world` ranks.
pub fn gnn_config(
    args: &GnnArgs,
    prep: &Prepared,
    placement: &Placement,
    run_dir: &Path,
    fold_ids: &[usize],
    world: usize,
) -> GnnConfig {
    let cohort = &prep.cohort;
    let numeric_dim = cohort
        .subjects
        .first()
        .and_then(|s| s.scans.first())
        .map_or(35, |s| 3 + s.ecc.len());
    GnnConfig {
        sc_dir: args.sc_dir.clone(),
        morph_root: args.morph_root.clone(),
        subject_info_csv: args.subject_info_csv.clone(),
        base_results_dir: args.results_dir.clone(),
        results_dir: run_dir.to_path_buf(),
        run_name: run_dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        cv_fold: args.cv_fold,
        folds: fold_ids.to_vec(),
        max_epochs: args.max_epochs,
        batch_size: args.batch_size,
        learning_rate: args.learning_rate,
        optimizer: "adam(beta1=0.9, beta2=0.999, eps=1e-8), constant lr, no weight decay".into(),
        patience: args.patience,
        monitor_metric: "val_loss".into(),
        seed: args.seed,
        split_seed: SPLIT_SEED,
        test_size: TEST_SIZE,
        cv_folds_total: CV_FOLDS,
        model: model_config(args, cohort, numeric_dim),
        loss: LossSettings {
            lambda_kl: args.lambda_kl,
            ..LossSettings::default()
        },
        deviations: vec![
            "lambda_topo = 0 and no GradNorm (reference default: Betti-curve topology loss \
             with lambda 1e-3 and GradNorm)"
                .into(),
            "best checkpoint = copy of the best epoch's weights (reference: last weights)".into(),
            "validation/test loss: clean inputs, visits (0,1,2) (reference: augmented, sampled)"
                .into(),
            "all randomness seeded from --seed (reference: unseeded torch RNG)".into(),
        ],
        backend: placement.backend.name().into(),
        device: placement.device.to_string(),
        resume: args.run.resume.clone(),
        checkpoint_every: args.run.checkpoint_every,
        world_size: world,
        effective_batch_size: args.batch_size * world,
    }
}

/// Writes `args.json` and `run_meta.json` (rank 0 only).
pub fn write_run_files(
    config: &GnnConfig,
    prep: &Prepared,
    placement: &Placement,
    resumed_from: Option<&Path>,
    collective: &str,
) -> Result<()> {
    let run_dir = &config.results_dir;
    let cohort = &prep.cohort;
    write_json(&run_dir.join("args.json"), config)?;
    let mut meta = RunMeta::new(
        run_dir,
        placement.backend.name(),
        &placement.device.to_string(),
    );
    meta.world_size = config.world_size;
    meta.extra.insert("run_name".into(), json!(config.run_name));
    meta.extra
        .insert("base_results_dir".into(), json!(config.base_results_dir));
    meta.extra.insert(
        "resumed_from".into(),
        json!(resumed_from.map(|p| p.display().to_string())),
    );
    meta.extra
        .insert("per_rank_batch_size".into(), json!(config.batch_size));
    meta.extra.insert(
        "effective_batch_size".into(),
        json!(config.effective_batch_size),
    );
    meta.extra.insert("collective".into(), json!(collective));
    meta.extra.insert(
        "cohort".into(),
        json!({
            "n_subjects": cohort.subjects.len(), "n_scans": cohort.n_scans(),
            "n_nodes": cohort.n_nodes, "n_metrics": cohort.n_metrics(),
            "site_vocab": cohort.site_vocab, "n_trainval": prep.trainval.len(),
            "n_test": prep.test.len(),
        }),
    );
    write_json(&run_dir.join("run_meta.json"), &meta)
}
