//! The resolved `train-gnn` configuration (`args.json`), the settings a resume must share
//! (its fingerprint) and the run's extra metadata (`run_meta.json`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::batch::LossSettings;
use super::{CV_FOLDS, Prepared, SPLIT_SEED, TEST_SIZE};
use crate::cli::GnnArgs;
use crate::data::connectome::Cohort;
use crate::engine::{Monitor, Row, RunInfo};
use crate::models::clg_ode::ClgOdeConfig;

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
    pub monitor: Option<Monitor>,
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
    pub world_size: usize,
    /// Per-rank batch × world size.
    pub effective_batch_size: usize,
}

impl GnnConfig {
    /// The settings a resumed run must share with the checkpoint (everything but paths,
    /// placement and resume options).
    pub fn fingerprint(&self) -> Value {
        json!({
            "folds": self.folds, "max_epochs": self.max_epochs,
            "effective_batch_size": self.effective_batch_size,
            "learning_rate": self.learning_rate, "monitor": self.monitor, "seed": self.seed,
            "model": self.model, "loss": self.loss,
        })
    }

    /// Fills in where and how the run happens.
    pub fn set_run(&mut self, run: &RunInfo) {
        self.results_dir = run.run_dir.clone();
        self.run_name = run
            .run_dir
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.backend = run.placement.backend.name().into();
        self.device = run.placement.device.to_string();
        self.world_size = run.world_size;
        self.effective_batch_size = self.batch_size * run.world_size;
    }

    /// The extra fields of `run_meta.json`.
    pub fn meta(&self, prep: &Prepared) -> Row {
        let cohort = &prep.cohort;
        let mut row = Row::new();
        row.insert("run_name".into(), json!(self.run_name));
        row.insert("base_results_dir".into(), json!(self.base_results_dir));
        row.insert(
            "cohort".into(),
            json!({
                "n_subjects": cohort.subjects.len(), "n_scans": cohort.n_scans(),
                "n_nodes": cohort.n_nodes, "n_metrics": cohort.n_metrics(),
                "site_vocab": cohort.site_vocab, "n_trainval": prep.trainval.len(),
                "n_test": prep.test.len(),
            }),
        );
        row
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

/// The configuration of a run training folds `fold_ids` (run-dependent fields empty).
pub fn gnn_config(args: &GnnArgs, prep: &Prepared, fold_ids: &[usize]) -> GnnConfig {
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
        results_dir: PathBuf::new(),
        run_name: String::new(),
        cv_fold: args.cv_fold,
        folds: fold_ids.to_vec(),
        max_epochs: args.max_epochs,
        batch_size: args.batch_size,
        learning_rate: args.learning_rate,
        optimizer: "adam(beta1=0.9, beta2=0.999, eps=1e-8), constant lr, no weight decay".into(),
        monitor: args.early_stop.monitor(Some("val_loss")),
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
        backend: String::new(),
        device: String::new(),
        resume: args.run.resume.clone(),
        checkpoint_every: args.run.checkpoint_every,
        world_size: 1,
        effective_batch_size: args.batch_size,
    }
}
