//! `trainer eval-gnn RUN_DIR`: a finished (or stopped) `train-gnn` run re-scored without
//! retraining. The model is rebuilt from the run's `args.json`, its weights reloaded from a
//! checkpoint, the cohort loaded and split as in the run (paths overridable), and the split's
//! subjects scored with the one test protocol: `metrics.json` (model, identity, skill, forecast-
//! only block, exact topology), `per_subject.csv` and `strata.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use burn::tensor::backend::AutodiffBackend;
use serde_json::json;

use super::breakdown::{Predictions, per_subject, strata, write_per_subject};
use super::config::GnnConfig;
use super::evaluate::{TestMetrics, exact_topology, predict_visit1};
use super::fold_data::FoldData;
use super::settings::ModelKind;
use super::{CohortPaths, Split, fold_stem, prepare};
use crate::backend::{self, BackendJob, DeviceSettings, Placement};
use crate::files::write_json;
use crate::models::clg_ode::objective::{Objective, ObjectiveState};
use crate::models::gcn_baseline::GcnBaseline;
use crate::models::linear_drift::forecast;
use crate::models::vector_lstm::VectorLstm;
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

/// Which subjects are scored.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalSplit {
    /// The held-out test subjects (as at the end of training).
    Test,
    /// The validation subjects of the checkpoint's fold.
    Val,
}

/// `trainer eval-gnn`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub struct EvalGnnSettings {
    /// The run directory of a `train-gnn` run (its `args.json` and `checkpoints/`).
    pub run_dir: PathBuf,
    /// `best` (the best fold's best weights, as the run's test scoring), `last` (that fold's
    /// last weights), or a checkpoint file.
    #[arg(long, default_value = "best")]
    pub checkpoint: String,
    #[arg(long, value_enum, default_value = "test")]
    pub split: EvalSplit,
    /// Output directory (default `<RUN_DIR>/eval-<split>-<checkpoint>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Instead of the run's `--sc_dir`.
    #[arg(long, alias = "sc_dir")]
    pub sc_dir: Option<PathBuf>,
    /// Instead of the run's `--morph_root`.
    #[arg(long, alias = "morph_root")]
    pub morph_root: Option<PathBuf>,
    /// Instead of the run's `--subject_info_csv`.
    #[arg(long, alias = "subject_info_csv")]
    pub subject_info_csv: Option<PathBuf>,
    #[command(flatten)]
    pub device: DeviceSettings,
}

/// The checkpoint file `which` names in `run_dir`.
fn checkpoint_path(run_dir: &Path, which: &str, stem: &str) -> Result<PathBuf> {
    let results = run_dir.join("clg_ode_results.json");
    let best_fold = || -> Result<usize> {
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&results).with_context(|| {
                format!("{}: the run has no test results yet", results.display())
            })?)
            .with_context(|| format!("{}: not JSON", results.display()))?;
        r["best_fold"]
            .as_u64()
            .map(|f| f as usize)
            .with_context(|| format!("{}: no best_fold", results.display()))
    };
    let path = match which {
        "best" | "last" => run_dir.join("checkpoints").join(format!(
            "{}_{which}.safetensors",
            fold_stem(stem, best_fold()?)
        )),
        p => PathBuf::from(p),
    };
    if !path.is_file() {
        bail!("--checkpoint {which}: {} does not exist", path.display());
    }
    Ok(path)
}

/// `trainer eval-gnn`.
pub fn run(s: EvalGnnSettings) -> Result<()> {
    let args = s.run_dir.join("args.json");
    let config: GnnConfig = serde_json::from_str(
        &std::fs::read_to_string(&args)
            .with_context(|| format!("{}: not a train-gnn run directory", s.run_dir.display()))?,
    )
    .with_context(|| format!("{}: unreadable configuration", args.display()))?;
    let stem = config.settings.model_kind.file_stem();
    let ck_path = checkpoint_path(&s.run_dir, &s.checkpoint, stem)?;
    let ck = Checkpoint::load(&ck_path)?;
    let fold: usize = ck
        .metadata
        .get("fold")
        .and_then(|f| f.parse().ok())
        .with_context(|| format!("{}: not a fold's model file (no fold)", ck_path.display()))?;
    let out = s.out.clone().unwrap_or_else(|| {
        let name = Path::new(&s.checkpoint)
            .file_stem()
            .map_or(s.checkpoint.clone(), |n| n.to_string_lossy().into_owned());
        let split = format!("{:?}", s.split).to_lowercase();
        s.run_dir.join(format!("eval-{split}-{name}"))
    });
    let set = &config.settings;
    let paths = CohortPaths {
        sc_dir: s.sc_dir.clone().unwrap_or(set.sc_dir.clone()),
        morph_root: s.morph_root.clone().unwrap_or(set.morph_root.clone()),
        subject_info_csv: s.subject_info_csv.clone().or(set.subject_info_csv.clone()),
    };
    let prep = prepare(
        &paths,
        &Split {
            folds: vec![fold],
            cv_folds: set.cv_folds,
            seed: set.seed,
            topo_bins: set.topo_bins,
        },
    )?;
    let split = &prep.folds[0];
    let stats = prep.cohort.norm_stats(&split.train)?;
    let data = FoldData::new(prep.cohort.clone(), &stats, set.sampling.include_s_mean());
    let subjects = match s.split {
        EvalSplit::Test => prep.test.clone(),
        EvalSplit::Val => split.val.clone(),
    };
    let placement = s.device.placement()?;
    let job = Rescore {
        config: &config,
        ck: &ck,
        data: &data,
        subjects: &subjects,
        run_dir: &s.run_dir,
    };
    let preds = backend::dispatch_checked(placement, job)?;
    let rows = per_subject(&data, &subjects, &preds, set.topo_bins);
    let metrics = TestMetrics::of(&rows);
    let exact = exact_topology(
        &data,
        &subjects,
        &preds.matrices,
        set.objective.topology.loss_bins,
    );
    let mut m = serde_json::to_value(&metrics)?;
    if let serde_json::Value::Object(o) = &mut m {
        o.insert("exact_topology".into(), serde_json::to_value(&exact)?);
        o.insert("fold".into(), json!(fold));
        o.insert("checkpoint".into(), json!(ck_path));
        o.insert(
            "split".into(),
            json!(format!("{:?}", s.split).to_lowercase()),
        );
    }
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    write_json(&out.join("metrics.json"), &m)?;
    write_per_subject(&out.join("per_subject.csv"), &rows)?;
    write_json(&out.join("strata.json"), &strata(&rows))?;
    eprintln!(
        "[eval-gnn] {} subjects, fold {fold}: sc_log_mse {:.6} (identity {:.6}, skill {:+.4}); \
         wrote {}",
        subjects.len(),
        metrics.model.sc_log_mse,
        metrics.identity_baseline.sc_log_mse,
        metrics.skill.skill,
        out.display()
    );
    Ok(())
}

/// Predictions of the run's model on one backend.
struct Rescore<'a> {
    config: &'a GnnConfig,
    ck: &'a Checkpoint,
    data: &'a FoldData,
    subjects: &'a [usize],
    run_dir: &'a Path,
}

impl BackendJob for Rescore<'_> {
    type Output = Predictions;
    fn run<B: AutodiffBackend>(self, device: B::Device, _p: Placement) -> Result<Self::Output> {
        let set = &self.config.settings;
        let weights = self.ck.with_prefix("model");
        match set.model_kind {
            ModelKind::LinearDrift => {
                let d = weights
                    .get("drift")
                    .context("the checkpoint has no drift")?
                    .data
                    .clone();
                Ok(self
                    .subjects
                    .iter()
                    .map(|&s| {
                        let scans = self.data.scans(s);
                        match scans.get(1) {
                            Some(_) => forecast(
                                &scans[0].a_raw,
                                &d,
                                super::batch::delta_t(scans, 0, 1),
                                set.drift.drift_support,
                            ),
                            None => scans[0].a_raw.clone(),
                        }
                    })
                    .collect::<Vec<_>>()
                    .into())
            }
            ModelKind::Gcn => {
                let model = params::load(
                    GcnBaseline::<B::InnerBackend>::new(set.sizes.hidden_dim, &device),
                    &weights,
                    &device,
                )?;
                Ok(
                    super::gcn::predict(&model, self.data, self.subjects, set.batch_size, &device)
                        .into(),
                )
            }
            ModelKind::VectorLstm => {
                let n = self.data.n_nodes();
                let model = params::load(
                    VectorLstm::<B::InnerBackend>::new(
                        n * n.saturating_sub(1) / 2,
                        set.sizes.latent_dim,
                        &device,
                    ),
                    &weights,
                    &device,
                )?;
                Ok(
                    super::lstm::predict(&model, self.data, self.subjects, set.batch_size, &device)
                        .into(),
                )
            }
            ModelKind::ClgOde => {
                let model = params::load(
                    self.config.model.init::<B::InnerBackend>(&device),
                    &weights,
                    &device,
                )?;
                let mut objective = Objective::new(
                    set.objective.clone(),
                    set.decoder.fixed_support,
                    set.max_epochs,
                    set.seed,
                );
                objective.state = final_state(self.run_dir);
                Ok(predict_visit1(
                    &model,
                    &objective,
                    self.data,
                    &set.sampling,
                    self.subjects,
                    8,
                    set.max_epochs,
                    &device,
                ))
            }
        }
    }
}

/// The objective's state at the end of the run (from its last resume checkpoint), as the test
/// scoring at the end of training used it; the initial state when there is none.
fn final_state(run_dir: &Path) -> ObjectiveState {
    Checkpoint::load(&run_dir.join("checkpoints/last.safetensors"))
        .ok()
        .and_then(|ck| ck.metadata.get("job_state").cloned())
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| serde_json::from_value(v["objective"].clone()).ok())
        .unwrap_or_default()
}
