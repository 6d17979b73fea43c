//! The resolved `train-gnn` configuration (`args.json`): the settings, and what the run and the
//! cohort add (run directory, folds, model dimensions, placement); the settings a resume must
//! share (its fingerprint) and the run's extra metadata (`run_meta.json`).

use std::path::PathBuf;

use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::prepared::{Prepared, TEST_SIZE};
use super::settings::GnnSettings;
use crate::engine::{Monitor, OptimizerSpec, Row, RunContext};
use crate::models::clg_ode::ClgOdeConfig;

/// Where this port differs from the reference on purpose (recorded in `args.json`; see
/// docs/guide/forecasts.md, "Where we differ from the reference, and why").
pub(crate) const DEVIATIONS: &[&str] = &[
    "best checkpoint = copy of the best epoch's weights (reference: last weights)",
    "validation/test loss: clean inputs, visits (0,1,2) (reference: augmented, sampled)",
    "all randomness seeded from --seed/--random-state, torch-side draws included \
     (reference: unseeded torch RNG; topology probes from ChaCha8, not numpy's PCG64)",
    "GradNorm weights and the topology scale start afresh in every fold (reference: carried \
     over from fold to fold)",
    "mask diagnostics averaged over predictions (reference: sums of batch means divided by \
     the number of predictions)",
    "validation SC columns are null in epochs that do not compute them (reference: 0)",
    "N comes from the data (reference: every matrix padded/truncated to 400)",
];

/// The resolved configuration, saved as `args.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GnnConfig {
    /// Every flag's value (`results_dir` is the base results directory given).
    #[serde(flatten)]
    pub settings: GnnSettings,
    /// The run directory (`<results_dir>/runs/<run name>`).
    pub run_dir: PathBuf,
    pub run_name: String,
    pub folds: Vec<usize>,
    /// The optimiser run (`adam(beta1=0.9, …), constant lr, no weight decay`).
    pub optimizer: String,
    pub monitor: Option<Monitor>,
    pub test_size: f64,
    /// The model's dimensions, from the flags and the cohort.
    pub model: ClgOdeConfig,
    pub deviations: Vec<String>,
    pub backend: String,
    pub device: String,
    pub resume: Option<String>,
    pub checkpoint_every: u64,
    pub world_size: usize,
    /// Per-rank batch × world size.
    pub effective_batch_size: usize,
    /// MD5 of the loaded cohort (every subject's id, sex and site, every scan's id, age,
    /// connectome and morphology): a resume on other data is refused like one with other
    /// settings. Empty in runs written before it existed.
    #[serde(default)]
    pub cohort_fingerprint: String,
}

/// The MD5 of what a run learns from: subjects (id, sex, site) and their scans (id, age, SC
/// matrix, morphology), in the cohort's order.
pub(crate) fn cohort_fingerprint(cohort: &crate::data::connectome::Cohort) -> String {
    use md5::{Digest, Md5};
    let mut h = Md5::new();
    for s in &cohort.subjects {
        h.update(s.id.as_bytes());
        h.update((s.sex as u64).to_le_bytes());
        h.update((s.site as u64).to_le_bytes());
        for scan in &s.scans {
            h.update(scan.scan_id.as_bytes());
            h.update(scan.age.to_le_bytes());
            let bytes: Vec<u8> = scan
                .a_raw
                .dense()
                .iter()
                .chain(scan.x.iter())
                .flat_map(|v| v.to_le_bytes())
                .collect();
            h.update(&bytes);
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

impl GnnConfig {
    /// The configuration of a run of `settings` on the prepared cohort, in `ctx`.
    pub(crate) fn new<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: &Prepared,
        optimizer: OptimizerSpec,
        ctx: &RunContext<B>,
    ) -> Self {
        let cohort = &prep.cohort;
        let numeric_dim = cohort
            .subjects
            .first()
            .and_then(|s| s.scans.first())
            .map_or(35, |s| {
                2 + usize::from(settings.sampling.include_s_mean()) + s.ecc.len()
            });
        let model = ClgOdeConfig {
            morph_dim: cohort.n_metrics(),
            sizes: settings.sizes.clone(),
            sex_vocab: cohort.sex_vocab,
            site_vocab: cohort.site_vocab,
            cov_embed_dim: 8,
            numeric_cov_dim: numeric_dim,
            decoder: settings.decoder.clone(),
        };
        Self {
            run_dir: ctx.run_dir.clone(),
            run_name: ctx
                .run_dir
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            folds: settings.fold_ids(),
            optimizer: format!("{optimizer}, constant lr, no weight decay"),
            monitor,
            test_size: TEST_SIZE,
            model,
            deviations: DEVIATIONS.iter().map(|d| d.to_string()).collect(),
            backend: ctx.placement.backend.name().into(),
            device: ctx.placement.device.to_string(),
            resume: ctx.run.resume.clone(),
            checkpoint_every: ctx.run.checkpoint_every,
            world_size: ctx.world_size(),
            effective_batch_size: settings.batch() * ctx.world_size(),
            cohort_fingerprint: cohort_fingerprint(cohort),
            settings,
        }
    }

    /// The settings a resumed run must share with the checkpoint (everything but paths,
    /// placement, output and resume options).
    pub(crate) fn fingerprint(&self) -> Value {
        let s = &self.settings;
        json!({
            "folds": self.folds, "max_epochs": s.max_epochs,
            "effective_batch_size": self.effective_batch_size,
            "learning_rate": s.learning_rate, "monitor": self.monitor, "seed": s.seed,
            "cv_folds": s.cv_folds, "topo_bins": s.topo_bins, "model": self.model,
            "objective": s.objective, "sampling": s.sampling,
            "val_sc_eval_every": s.val_sc_eval_every,
            "early_stop_density_weight": s.early_stop_density_weight,
            "model_kind": s.model_kind, "drift": s.drift,
            "cohort": self.cohort_fingerprint,
        })
    }

    /// The extra fields of `run_meta.json`.
    pub(crate) fn meta(&self, prep: &Prepared) -> Row {
        let cohort = &prep.cohort;
        let mut row = Row::new();
        row.insert("run_name".into(), json!(self.run_name));
        row.insert("base_results_dir".into(), json!(self.settings.results_dir));
        row.insert("data_defects".into(), prep.report.counts());
        row.insert(
            "data_warnings".into(),
            json!(prep.report.warnings_capped(100)),
        );
        row.insert(
            "cohort".into(),
            json!({
                "n_subjects": cohort.subjects.len(), "n_scans": cohort.n_scans(),
                "n_nodes": cohort.n_nodes, "n_metrics": cohort.n_metrics(),
                "site_vocab": cohort.site_vocab, "n_trainval": prep.trainval.len(),
                "n_test": prep.test.len(),
            }),
        );
        // Which subjects each part of the run saw, by id: a re-score or a reference
        // implementation can take the same split without re-deriving it.
        let ids = |subjects: &[usize]| -> Vec<&str> {
            subjects
                .iter()
                .map(|&s| cohort.subjects[s].id.as_str())
                .collect()
        };
        let folds: Vec<serde_json::Value> = prep
            .folds
            .iter()
            .map(|f| json!({"fold": f.fold, "train": ids(&f.train), "val": ids(&f.val)}))
            .collect();
        row.insert(
            "split".into(),
            json!({"test": ids(&prep.test), "folds": folds}),
        );
        // Folds that monitor another metric than the run's (no validation visit pair).
        let fallbacks: Vec<serde_json::Value> = (0..prep.folds.len())
            .filter_map(|stage| {
                let f =
                    super::protocol::fold_data::fold_monitor(prep, stage, self.monitor.as_ref())
                        .ok()??;
                Some(json!({
                    "fold": prep.folds[stage].fold,
                    "metric": f.metric,
                    "instead_of": self.monitor.as_ref().map(|m| m.metric.clone()),
                    "reason": "no validation subject of the fold has a follow-up scan",
                }))
            })
            .collect();
        if !fallbacks.is_empty() {
            row.insert("monitor_fallback".into(), json!(fallbacks));
        }
        row
    }
}
