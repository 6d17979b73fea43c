//! Opening a `train-gnn` run again (`eval-gnn`, `predict`, `plot-sc`): its settings from
//! `args.json`, a checkpoint (`best`, `last` or a file) and the fold it belongs to, the cohort
//! loaded and split as the run did (paths overridable) with that fold's normalisation; and the
//! run's model predicting from it on any backend ([`Forecast`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use burn::tensor::backend::AutodiffBackend;

use super::super::config::GnnConfig;
use super::super::cv::{Forecaster, WithModel};
use super::super::prepared::{Prepared, Split, fold_stem, prepare};
use super::super::protocol::breakdown::Predictions;
use super::super::protocol::fold_data::FoldData;
use super::super::protocol::saved_run::{Horizon, SavedRun};
use super::super::registry::{ModelInfo, with_model};
use crate::backend::{BackendJob, Placement};
use crate::data::connectome::CohortPaths;
use crate::outputs::RunDir;
use crate::outputs::result_files::RunResults;
use crate::toolbox::checkpoint::Checkpoint;

/// Cohort paths that replace the run's own (e.g. after the data moved), each optional.
#[derive(clap::Args, Debug, Clone, Default)]
pub(crate) struct DataOverrides {
    /// The reference project's `configs/paths.yaml`: its `local.data.*` keys replace the run's
    /// data paths (a path flag below wins over it). Read once, where the command line is read.
    #[arg(long, value_name = "FILE", alias = "paths_yaml")]
    pub paths_yaml: Option<PathBuf>,
    /// Instead of the run's `--sc_dir`.
    #[arg(long, alias = "sc_dir")]
    pub sc_dir: Option<PathBuf>,
    /// Instead of the run's `--morph_root`.
    #[arg(long, alias = "morph_root")]
    pub morph_root: Option<PathBuf>,
    /// Instead of the run's `--subject_info_csv`.
    #[arg(long, alias = "subject_info_csv")]
    pub subject_info_csv: Option<PathBuf>,
    /// Score data other than the cohort the run was trained on (another `cohort_fingerprint`):
    /// refused without it, since the scores would describe another cohort.
    #[arg(long)]
    pub other_cohort: bool,
}

impl SavedRun {
    /// Opens `run_dir` with checkpoint `which` (`best`, `last` or a file).
    pub(crate) fn open(run_dir: &Path, which: &str, paths: &DataOverrides) -> Result<Self> {
        let files = RunDir::new(run_dir);
        let args = files.args_json();
        let text = std::fs::read_to_string(&args).map_err(|_| {
            anyhow::anyhow!(
                "{}: not a train-gnn run directory (no readable args.json)",
                run_dir.display()
            )
        })?;
        let meta: Option<serde_json::Value> =
            crate::outputs::run_files::read_json(&files.run_meta_json()).ok();
        let command = meta
            .as_ref()
            .and_then(|m| m["argv"][1].as_str().map(str::to_string));
        if command.as_deref() == Some("train-mnist") {
            bail!(
                "{}: a train-mnist run; this command reads train-gnn runs (an MNIST checkpoint: \
                 `trainer eval --checkpoint {} --data-dir DIR`)",
                run_dir.display(),
                files.best_checkpoint().display()
            );
        }
        let config: GnnConfig = serde_json::from_str(&text)
            .with_context(|| format!("{}: unreadable configuration", args.display()))?;
        let ck_path = checkpoint_path(run_dir, which, config.settings.model_kind.info())?;
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
        let now = super::super::config::cohort_fingerprint(&prep.cohort);
        let then = &config.cohort_fingerprint;
        if !then.is_empty() && *then != now {
            if !paths.other_cohort {
                bail!(
                    "{}: trained on cohort {then} (--sc_dir {}), but the data given is another \
                     cohort, {now} (--sc_dir {}): its scores would not be the run's. Give the \
                     run's data, or --other-cohort to score this cohort on purpose",
                    run_dir.display(),
                    set.sc_dir.display(),
                    cohort.sc_dir.display()
                );
            }
            eprintln!(
                "[trainer] WARNING: {} was trained on cohort {then}; scoring another cohort, \
                 {now} (--other-cohort)",
                run_dir.display()
            );
        }
        let stats = prep.cohort.norm_stats(&prep.folds[0].train)?;
        let data = FoldData::new(prep.cohort.clone(), &stats, set.sampling.include_s_mean());
        let split_changes = meta
            .as_ref()
            .map(|m| split_changes(&m["extra"]["split"], &prep, fold))
            .unwrap_or_default();
        Ok(Self {
            run_dir: run_dir.to_path_buf(),
            config,
            ck_path,
            ck,
            fold,
            prep,
            data,
            split_changes,
        })
    }
}

/// How `prep`'s test subjects and fold `fold`'s training and validation subjects differ from
/// the split the run recorded (`run_meta.json` → `extra.split`; nothing when it has none).
fn split_changes(recorded: &serde_json::Value, prep: &Prepared, fold: usize) -> Vec<String> {
    use std::collections::BTreeSet;
    let ids = |v: &serde_json::Value| -> Option<BTreeSet<String>> {
        Some(
            v.as_array()?
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
        )
    };
    let now = |subjects: &[usize]| -> BTreeSet<String> {
        subjects
            .iter()
            .map(|&s| prep.cohort.subjects[s].id.clone())
            .collect()
    };
    let recorded_fold = recorded["folds"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["fold"].as_u64() == Some(fold as u64)));
    let mut parts = vec![("test", ids(&recorded["test"]), now(&prep.test))];
    if let (Some(f), Some(split)) = (recorded_fold, prep.folds.first()) {
        parts.push(("train", ids(&f["train"]), now(&split.train)));
        parts.push(("val", ids(&f["val"]), now(&split.val)));
    }
    let mut out = Vec::new();
    for (name, then, now) in parts {
        let Some(then) = then else { continue };
        let gone: Vec<&String> = then.difference(&now).collect();
        let new: Vec<&String> = now.difference(&then).collect();
        if !gone.is_empty() || !new.is_empty() {
            let few = |v: &[&String]| {
                v.iter()
                    .take(3)
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push(format!(
                "{name} subjects: {} of the run's not there now ({}), {} not the run's ({})",
                gone.len(),
                few(&gone),
                new.len(),
                few(&new)
            ));
        }
    }
    out
}

/// The checkpoint file `which` names in `run_dir`.
fn checkpoint_path(run_dir: &Path, which: &str, model: ModelInfo) -> Result<PathBuf> {
    let files = RunDir::new(run_dir);
    let results = files.results_json();
    let best_fold = || -> Result<usize> {
        let text = std::fs::read_to_string(&results)
            .with_context(|| format!("{}: the run has no test results yet", results.display()))?;
        let r: RunResults = serde_json::from_str(&text).map_err(|e| {
            let what = if e.is_data() {
                "not a run's results"
            } else {
                "not JSON"
            };
            anyhow::Error::new(e).context(format!("{}: {what}", results.display()))
        })?;
        r.best_fold
            .with_context(|| format!("{}: no best_fold", results.display()))
    };
    let path = match which {
        "best" => files.best_model(&fold_stem(model.file_stem, best_fold()?)),
        "last" => files.last_model(&fold_stem(model.file_stem, best_fold()?)),
        p => PathBuf::from(p),
    };
    if !path.is_file() {
        bail!("--checkpoint {which}: {} does not exist", path.display());
    }
    Ok(path)
}

/// The run's model predicting `subjects` (repeats allowed) on one backend.
pub(crate) struct Forecast<'a> {
    pub run: &'a SavedRun,
    pub subjects: &'a [usize],
    pub horizon: Horizon<'a>,
}

impl BackendJob for Forecast<'_> {
    type Output = Predictions;
    fn run<B: AutodiffBackend>(self, device: B::Device, _p: Placement) -> Result<Predictions> {
        let kind = self.run.config.settings.model_kind;
        with_model(kind, OnBackend::<B> { job: self, device })
    }
}

/// A [`Forecast`] on backend `B`, given the model's type.
struct OnBackend<'a, B: AutodiffBackend> {
    job: Forecast<'a>,
    device: B::Device,
}

impl<B: AutodiffBackend> WithModel for OnBackend<'_, B> {
    type Output = Result<Predictions>;
    fn with<M: Forecaster>(self) -> Result<Predictions> {
        let Forecast {
            run,
            subjects,
            horizon,
        } = self.job;
        if !M::TIME_INPUT && matches!(horizon, Horizon::Years { .. }) {
            bail!(
                "--model {} has no time input: it predicts only the next visit (--next-visit)",
                M::KIND
            );
        }
        M::forecast::<B>(run, subjects, &horizon, &self.device)
    }
}
