//! A finished (or stopped) `train-gnn` run opened again: its settings from `args.json`, a
//! checkpoint (`best`, `last` or a file) and the fold it belongs to, the cohort loaded and split
//! as the run did (paths overridable) with that fold's normalisation; and the run's model
//! predicting from it on any backend (`eval-gnn`, `predict`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use burn::tensor::backend::AutodiffBackend;

use super::breakdown::Predictions;
use super::config::GnnConfig;
use super::drift::drift_forecasts;
use super::evaluate::{predict_at, predict_visit1};
use super::fold_data::FoldData;
use super::settings::ModelKind;
use super::{CohortPaths, Prepared, Split, fold_stem, prepare};
use crate::backend::{BackendJob, Placement};
use crate::models::clg_ode::objective::{Objective, ObjectiveState};
use crate::models::gcn_baseline::GcnBaseline;
use crate::models::vector_lstm::VectorLstm;
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

/// Cohort paths that replace the run's own (e.g. after the data moved), each optional.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DataOverrides {
    /// Instead of the run's `--sc_dir`.
    #[arg(long, alias = "sc_dir")]
    pub sc_dir: Option<PathBuf>,
    /// Instead of the run's `--morph_root`.
    #[arg(long, alias = "morph_root")]
    pub morph_root: Option<PathBuf>,
    /// Instead of the run's `--subject_info_csv`.
    #[arg(long, alias = "subject_info_csv")]
    pub subject_info_csv: Option<PathBuf>,
}

/// A run directory with one of its checkpoints and the data of that checkpoint's fold.
pub struct SavedRun {
    pub run_dir: PathBuf,
    pub config: GnnConfig,
    pub ck_path: PathBuf,
    pub ck: Checkpoint,
    pub fold: usize,
    pub prep: Prepared,
    pub data: FoldData,
}

impl SavedRun {
    /// Opens `run_dir` with checkpoint `which` (`best`, `last` or a file).
    pub fn open(run_dir: &Path, which: &str, paths: &DataOverrides) -> Result<Self> {
        let args = run_dir.join("args.json");
        let text = std::fs::read_to_string(&args).map_err(|_| {
            anyhow::anyhow!(
                "{}: not a train-gnn run directory (no readable args.json)",
                run_dir.display()
            )
        })?;
        let config: GnnConfig = serde_json::from_str(&text)
            .with_context(|| format!("{}: unreadable configuration", args.display()))?;
        let stem = config.settings.model_kind.file_stem();
        let ck_path = checkpoint_path(run_dir, which, stem)?;
        let ck = Checkpoint::load(&ck_path)?;
        let fold: usize = ck
            .metadata
            .get("fold")
            .and_then(|f| f.parse().ok())
            .with_context(|| format!("{}: not a fold's model file (no fold)", ck_path.display()))?;
        let set = &config.settings;
        let cohort = CohortPaths {
            sc_dir: paths.sc_dir.clone().unwrap_or(set.sc_dir.clone()),
            morph_root: paths.morph_root.clone().unwrap_or(set.morph_root.clone()),
            subject_info_csv: paths
                .subject_info_csv
                .clone()
                .or(set.subject_info_csv.clone()),
        };
        let prep = prepare(
            &cohort,
            &Split {
                folds: vec![fold],
                cv_folds: set.cv_folds,
                seed: set.seed,
                topo_bins: set.topo_bins,
            },
        )?;
        let stats = prep.cohort.norm_stats(&prep.folds[0].train)?;
        let data = FoldData::new(prep.cohort.clone(), &stats, set.sampling.include_s_mean());
        Ok(Self {
            run_dir: run_dir.to_path_buf(),
            config,
            ck_path,
            ck,
            fold,
            prep,
            data,
        })
    }
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

/// How far ahead a prediction goes.
pub enum Horizon<'a> {
    /// Visit 1 from visit 0 (the reconstruction of visit 0 for a one-scan subject): the test
    /// protocol.
    NextVisit,
    /// `dts[i]` years after visit 0 of `subjects[i]`; `targets[i]`: the visit at that Δt, if
    /// any (CLG-ODE's innovation plan scores against it).
    Years {
        dts: &'a [f64],
        targets: &'a [Option<usize>],
    },
}

/// The run's model predicting `subjects` (repeats allowed) on one backend.
pub struct Forecast<'a> {
    pub run: &'a SavedRun,
    pub subjects: &'a [usize],
    pub horizon: Horizon<'a>,
}

impl BackendJob for Forecast<'_> {
    type Output = Predictions;
    fn run<B: AutodiffBackend>(self, device: B::Device, _p: Placement) -> Result<Self::Output> {
        let run = self.run;
        let (set, data, subjects) = (&run.config.settings, &run.data, self.subjects);
        let weights = run.ck.with_prefix("model");
        let no_time = |model: &str| -> Result<()> {
            match self.horizon {
                Horizon::NextVisit => Ok(()),
                Horizon::Years { .. } => bail!(
                    "--model {model} has no time input: it predicts only the next visit \
                     (--next-visit)"
                ),
            }
        };
        match set.model_kind {
            ModelKind::LinearDrift => {
                let d = weights
                    .get("drift")
                    .context("the checkpoint has no drift")?
                    .data
                    .clone();
                let dts = match &self.horizon {
                    Horizon::NextVisit => None,
                    Horizon::Years { dts, .. } => Some(*dts),
                };
                let support = set.drift.drift_support;
                Ok(drift_forecasts(data, subjects, &d, support, dts).into())
            }
            ModelKind::Gcn => {
                no_time("gcn")?;
                let model = params::load(
                    GcnBaseline::<B::InnerBackend>::new(set.sizes.hidden_dim, &device),
                    &weights,
                    &device,
                )?;
                let preds = super::gcn::predict(&model, data, subjects, set.batch_size, &device);
                Ok(preds.into())
            }
            ModelKind::VectorLstm => {
                no_time("vector-lstm")?;
                let n = data.n_nodes();
                let d = n * n.saturating_sub(1) / 2;
                let model = params::load(
                    VectorLstm::<B::InnerBackend>::new(d, set.sizes.latent_dim, &device),
                    &weights,
                    &device,
                )?;
                let preds = super::lstm::predict(&model, data, subjects, set.batch_size, &device);
                Ok(preds.into())
            }
            ModelKind::ClgOde => {
                let model = params::load(
                    run.config.model.init::<B::InnerBackend>(&device),
                    &weights,
                    &device,
                )?;
                let mut objective = Objective::new(
                    set.objective.clone(),
                    set.decoder.fixed_support,
                    set.max_epochs,
                    set.seed,
                );
                objective.state = final_state(&run.run_dir);
                objective.population_drift =
                    super::test_set::population_drift(&run.config, &run.prep, data, run.fold);
                let (obj, sampling, epoch) = (&objective, &set.sampling, set.max_epochs);
                Ok(match self.horizon {
                    Horizon::NextVisit => {
                        predict_visit1(&model, obj, data, sampling, subjects, 8, epoch, &device)
                    }
                    Horizon::Years { dts, targets } => predict_at(
                        &model, obj, data, sampling, subjects, dts, targets, epoch, &device,
                    ),
                })
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
