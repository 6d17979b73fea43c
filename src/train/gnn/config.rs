//! The resolved `train-gnn` configuration (`args.json`), the settings a resume must share
//! (its fingerprint) and the run's extra metadata (`run_meta.json`).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::batch::Sampling;
use super::{Prepared, TEST_SIZE};
use crate::cli::GnnArgs;
use crate::data::connectome::Cohort;
use crate::engine::{Monitor, Row, RunInfo};
use crate::models::clg_ode::objective::{InnovationConfig, ObjectiveConfig, TopologyConfig};
use crate::models::clg_ode::{ClgOdeConfig, DecoderConfig};

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
    pub test_size: f64,
    pub cv_folds: usize,
    pub topo_bins: usize,
    pub val_sc_eval_every: usize,
    pub early_stop_density_weight: f64,
    pub resume_from: Option<PathBuf>,
    pub porcelain: bool,
    pub model: ClgOdeConfig,
    pub objective: ObjectiveConfig,
    pub sampling: Sampling,
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
            "cv_folds": self.cv_folds, "topo_bins": self.topo_bins, "model": self.model, "objective": self.objective,
            "sampling": self.sampling, "val_sc_eval_every": self.val_sc_eval_every,
            "early_stop_density_weight": self.early_stop_density_weight,
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
        decoder: DecoderConfig {
            residual_skip: args.residual_skip,
            residual_tau: args.residual_tau,
            residual_cap: args.residual_cap,
            residual_no_dt_gate: args.residual_no_dt_gate,
            fixed_support: args.fixed_support,
            residual_scale_init: args.residual_scale_init,
        },
    }
}

/// The objective's settings from the flags.
pub fn objective_config(a: &GnnArgs) -> ObjectiveConfig {
    ObjectiveConfig {
        lambda_manifold: a.lambda_manifold,
        lambda_weight: a.lambda_weight,
        lambda_kl: a.lambda_kl,
        lambda_vel: a.lambda_vel,
        lambda_acc: a.lambda_acc,
        vel_from_epoch: a.warmup_manifold_epochs,
        acc_from_epoch: a.warmup_vel_epochs,
        forecast_k_weight: 0.5,
        edge_loss: a.edge_loss,
        edge_pos_weight: a.edge_pos_weight,
        focal_gamma: a.focal_gamma,
        focal_alpha: (a.focal_alpha >= 0.0).then_some(a.focal_alpha),
        lambda_full_log_mse: a.lambda_full_log_mse,
        lambda_zero_log: a.lambda_zero_log,
        zero_log_warmup_epochs: a.zero_log_warmup_epochs,
        zero_log_ramp_epochs: a.zero_log_ramp_epochs,
        lambda_delta_log: a.lambda_delta_log,
        lambda_density: a.lambda_density,
        density_warmup_epochs: a.density_warmup_epochs,
        density_ramp_epochs: a.density_ramp_epochs,
        fixed_support: a.fixed_support,
        compute_mask_auprc: a.compute_mask_auprc,
        max_epochs: a.max_epochs,
        topology: TopologyConfig {
            lambda_topo: a.lambda_topo,
            loss_bins: a.topo_loss_bins.max(1),
            sharpness: a.betti_sharpness,
            t: a.betti_t,
            taylor_order: a.betti_taylor_order.max(1),
            probes: a.betti_probes.max(1),
            scale_quantile: a.topo_scale_quantile,
            log_compress: !a.disable_topo_log_compress,
            warmup_frac: a.topo_warmup_frac,
            gradnorm: a.gradnorm_scope,
        },
        innovation: InnovationConfig {
            enabled: a.innovation_enabled,
            topm: a.innovation_topm,
            k_new: a.innovation_k_new,
            tau: a.innovation_tau,
            delta_quantile: a.innovation_delta_quantile,
            dt_offset_months: a.innovation_dt_offset_months,
            dt_ramp_months: a.innovation_dt_ramp_months,
            dt_scale_years: a.innovation_dt_scale_years,
            focal_gamma: a.innovation_focal_gamma,
            focal_alpha: a.innovation_focal_alpha,
            lambda_new_sparse: a.lambda_new_sparse,
            new_sparse_warmup_epochs: a.new_sparse_warmup_epochs,
            new_sparse_ramp_epochs: a.new_sparse_ramp_epochs,
            lambda_new_reg: a.lambda_new_reg,
            freeze_backbone_after: usize::try_from(a.innovation_freeze_backbone_after).ok(),
        },
    }
}

/// The configuration of a run training folds `fold_ids` (run-dependent fields empty).
pub fn gnn_config(args: &GnnArgs, prep: &Prepared, fold_ids: &[usize]) -> GnnConfig {
    let cohort = &prep.cohort;
    let numeric_dim = cohort
        .subjects
        .first()
        .and_then(|s| s.scans.first())
        .map_or(35, |s| 2 + usize::from(!args.disable_s_mean) + s.ecc.len());
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
        test_size: TEST_SIZE,
        cv_folds: args.cv_folds,
        topo_bins: args.topo_bins,
        val_sc_eval_every: args.val_sc_eval_every,
        early_stop_density_weight: args.early_stop_density_weight,
        resume_from: args.resume_from.clone(),
        porcelain: args.porcelain,
        model: model_config(args, cohort, numeric_dim),
        objective: objective_config(args),
        sampling: Sampling {
            adjacent_pair_prob: args.adjacent_pair_prob,
            morph_noise_sigma: args.morph_noise_sigma,
            // The residual decoder reads the start visit itself: no edge dropout (as the
            // reference).
            sc_pos_edge_drop_prob: if args.residual_skip {
                0.0
            } else {
                args.sc_pos_edge_drop_prob
            },
            include_s_mean: !args.disable_s_mean,
        },
        deviations: super::DEVIATIONS.iter().map(|d| d.to_string()).collect(),
        backend: String::new(),
        device: String::new(),
        resume: args.run.resume.clone(),
        checkpoint_every: args.run.checkpoint_every,
        world_size: 1,
        effective_batch_size: args.batch_size,
    }
}
