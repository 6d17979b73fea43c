//! The files of one run directory, named in one place: every file a run writes, and every file a
//! later command (`compare`, `eval-gnn`, `predict`, `plot-sc`, `sweep`) reads back, is named
//! through [`RunDir`]. Writes go through [`crate::files`] (atomic).
//!
//! ```text
//! <run>/args.json               the run's settings (`GnnConfig`, `MnistSettings`, …)
//! <run>/config.toml             the resolved flags as a `--config` file (when there was one)
//! <run>/run_meta.json           host, backend, scheduler, preflight (`RunMeta`)
//! <run>/metrics.jsonl           one JSON row per epoch (the source of metrics.csv)
//! <run>/metrics.csv             the same rows as CSV
//! <run>/steps.csv               one line per step (when asked)
//! <run>/curves.svg              the curves, rewritten at each epoch's end
//! <run>/.lock                   the live run's advisory lock
//! <run>/written_checkpoints.json the per-epoch files this run wrote (all `best-last` may remove)
//! <run>/checkpoints/last.safetensors         the resume checkpoint
//! <run>/checkpoints/epoch_NNN.safetensors    one per epoch (`--keep-checkpoints all`)
//! <run>/checkpoints/best.safetensors         best weights of a job without model files
//! <run>/checkpoints/<stem>_best.safetensors  model files (train-gnn: `<model>_fold<k>`)
//! <run>/checkpoints/<stem>_last.safetensors
//! <run>/checkpoints/<stem>_epoch_NNN.safetensors  model file per epoch (`--keep-checkpoints all`)
//! <run>/clg_ode_results.json    train-gnn's results (the reference's name, for every model)
//! <run>/test_metrics.json       train-gnn's test report
//! <run>/test_sc_metrics.json    train-gnn's test SC metrics of the model
//! <run>/per_subject.csv         train-gnn's test metrics per subject
//! <run>/strata.json             train-gnn's skill by stratum
//! <run>/eval-<split>-<name>/    an `eval-gnn` re-scoring (metrics.json, per_subject.csv, strata.json)
//! ```
//!
//! [`refuse_run_file`] keeps a user's output path (`--out`, `--scores`, `--plot` of the reports)
//! off these files.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::metrics::{MetricsFiles, MetricsRow};
use super::result_files::{RunResults, TestMetricsFile};
use super::run_meta::RunMeta;
use crate::files::{write_atomic, write_json};

mod guard;
pub(crate) use guard::refuse_run_file;

/// `args.json`.
pub(crate) const ARGS_JSON: &str = "args.json";
/// `config.toml`.
pub(crate) const CONFIG_TOML: &str = "config.toml";
/// `run_meta.json`.
pub(crate) const RUN_META_JSON: &str = "run_meta.json";
pub(crate) use super::metrics::{METRICS_CSV, METRICS_JSONL};
/// `steps.csv`.
pub(crate) const STEPS_CSV: &str = "steps.csv";
/// `curves.svg`.
pub(crate) const CURVES_SVG: &str = "curves.svg";
/// `.lock`.
pub(crate) const LOCK: &str = ".lock";
/// `checkpoints/`.
pub(crate) const CHECKPOINTS: &str = "checkpoints";
/// The folder in a run directory holding the event files.
pub(crate) const TENSORBOARD_DIR: &str = "tensorboard";
/// The extension of every checkpoint and model file.
pub(crate) const CHECKPOINT_EXT: &str = ".safetensors";
/// The suffix of a best model file, `<stem>_best.safetensors`.
pub(crate) const BEST_MODEL_SUFFIX: &str = "_best.safetensors";
/// train-gnn's results file (the reference's CLG-ODE name, written for every model).
pub(crate) const RESULTS_JSON: &str = "clg_ode_results.json";
/// `test_metrics.json`.
pub(crate) const TEST_METRICS_JSON: &str = "test_metrics.json";
/// `test_sc_metrics.json`.
pub(crate) const TEST_SC_METRICS_JSON: &str = "test_sc_metrics.json";
/// `per_subject.csv`.
pub(crate) const PER_SUBJECT_CSV: &str = "per_subject.csv";
/// `strata.json`.
pub(crate) const STRATA_JSON: &str = "strata.json";
/// `metrics.json` (of an `eval-gnn` re-scoring directory).
pub(crate) const EVAL_METRICS_JSON: &str = "metrics.json";
/// `finished.json`: written when a run has finished (its last stage and its final scoring).
pub(crate) const FINISHED_JSON: &str = "finished.json";
/// `written_checkpoints.json`: the per-epoch files of `checkpoints/` this run wrote.
pub(crate) const WRITTEN_CHECKPOINTS_JSON: &str = "written_checkpoints.json";

/// The files a run writes at the top of its directory, besides `run_meta.json`, its lock and
/// its folders: the one list the checks of a directory's files (`rundir.rs`'s foreign files,
/// `guard.rs`'s run files) start from.
pub(crate) const TOP_FILES: [&str; 13] = [
    ARGS_JSON,
    CONFIG_TOML,
    METRICS_JSONL,
    METRICS_CSV,
    STEPS_CSV,
    CURVES_SVG,
    RESULTS_JSON,
    TEST_METRICS_JSON,
    TEST_SC_METRICS_JSON,
    PER_SUBJECT_CSV,
    STRATA_JSON,
    FINISHED_JSON,
    WRITTEN_CHECKPOINTS_JSON,
];

/// A run directory: the path of each of its files, and typed readers and (atomic) writers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct RunDir {
    path: PathBuf,
}

impl RunDir {
    pub(crate) fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The directory itself.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    // ---- the files every training run writes ----

    pub(crate) fn args_json(&self) -> PathBuf {
        self.file(ARGS_JSON)
    }

    pub(crate) fn config_toml(&self) -> PathBuf {
        self.file(CONFIG_TOML)
    }

    pub(crate) fn run_meta_json(&self) -> PathBuf {
        self.file(RUN_META_JSON)
    }

    pub(crate) fn metrics_jsonl(&self) -> PathBuf {
        self.file(METRICS_JSONL)
    }

    pub(crate) fn metrics_csv(&self) -> PathBuf {
        self.file(METRICS_CSV)
    }

    pub(crate) fn steps_csv(&self) -> PathBuf {
        self.file(STEPS_CSV)
    }

    pub(crate) fn curves_svg(&self) -> PathBuf {
        self.file(CURVES_SVG)
    }

    /// `written_checkpoints.json`: the per-epoch files this run wrote into `checkpoints/` (the
    /// only files `--keep-checkpoints best-last` removes). In the run directory, not in
    /// `checkpoints/`, which may be a link to a folder other runs share.
    pub(crate) fn written_checkpoints_json(&self) -> PathBuf {
        self.file(WRITTEN_CHECKPOINTS_JSON)
    }

    /// The advisory lock of the live run ([`super::rundir::claim`]).
    pub(crate) fn lock_file(&self) -> PathBuf {
        self.file(LOCK)
    }

    // ---- checkpoints and model files ----

    /// The `checkpoints/` folder.
    pub(crate) fn checkpoints(&self) -> PathBuf {
        self.file(CHECKPOINTS)
    }

    /// `checkpoints/last.safetensors`: the resume checkpoint, rewritten at each epoch's end.
    pub(crate) fn last_checkpoint(&self) -> PathBuf {
        self.checkpoints().join("last.safetensors")
    }

    /// `checkpoints/epoch_NNN.safetensors` (1-based epoch, three digits at least).
    pub(crate) fn epoch_checkpoint(&self, epoch: u64) -> PathBuf {
        self.checkpoints()
            .join(format!("epoch_{epoch:03}{CHECKPOINT_EXT}"))
    }

    /// `checkpoints/<stem>_epoch_NNN.safetensors`: a model file of one epoch.
    pub(crate) fn epoch_model(&self, stem: &str, epoch: u64) -> PathBuf {
        self.checkpoints()
            .join(format!("{stem}_epoch_{epoch:03}{CHECKPOINT_EXT}"))
    }

    /// The files in `checkpoints/` named like per-epoch files (`epoch_NNN`,
    /// `<stem>_epoch_NNN`), whoever wrote them, sorted; none when the folder cannot be read.
    pub(crate) fn epoch_files(&self) -> Vec<PathBuf> {
        self.checkpoint_files(is_epoch_file_name)
            .unwrap_or_default()
    }

    /// `checkpoints/best.safetensors`: the best weights of a job that monitors a metric but
    /// names no model files.
    pub(crate) fn best_checkpoint(&self) -> PathBuf {
        self.checkpoints().join("best.safetensors")
    }

    /// `checkpoints/<stem>_best.safetensors`.
    pub(crate) fn best_model(&self, stem: &str) -> PathBuf {
        self.checkpoints()
            .join(format!("{stem}{BEST_MODEL_SUFFIX}"))
    }

    /// `checkpoints/<stem>_last.safetensors`.
    pub(crate) fn last_model(&self, stem: &str) -> PathBuf {
        self.checkpoints()
            .join(format!("{stem}_last{CHECKPOINT_EXT}"))
    }

    /// The best model files in `checkpoints/` (`*_best.safetensors`), sorted; an error when the
    /// folder cannot be read.
    pub(crate) fn best_models(&self) -> Result<Vec<PathBuf>> {
        self.checkpoint_files(|n| n.ends_with(BEST_MODEL_SUFFIX))
    }

    /// Whether `checkpoints/` holds any `.safetensors` file.
    pub(crate) fn has_checkpoints(&self) -> bool {
        self.checkpoint_files(|n| n.ends_with(CHECKPOINT_EXT))
            .is_ok_and(|f| !f.is_empty())
    }

    /// The files of `checkpoints/` whose name passes `keep`, sorted.
    fn checkpoint_files(&self, keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
        let dir = self.checkpoints();
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .with_context(|| format!("no {}", dir.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|f| f.file_name().is_some_and(|n| keep(&n.to_string_lossy())))
            .collect();
        found.sort();
        Ok(found)
    }

    // ---- train-gnn's test results ----

    /// `clg_ode_results.json` (the reference's name; train-gnn writes it for every model).
    pub(crate) fn results_json(&self) -> PathBuf {
        self.file(RESULTS_JSON)
    }

    pub(crate) fn test_metrics_json(&self) -> PathBuf {
        self.file(TEST_METRICS_JSON)
    }

    pub(crate) fn test_sc_metrics_json(&self) -> PathBuf {
        self.file(TEST_SC_METRICS_JSON)
    }

    pub(crate) fn per_subject_csv(&self) -> PathBuf {
        self.file(PER_SUBJECT_CSV)
    }

    pub(crate) fn strata_json(&self) -> PathBuf {
        self.file(STRATA_JSON)
    }

    /// `eval-<split>-<name>/`: where `eval-gnn` writes a re-scoring of this run. Its files are
    /// named like the run's (`per_subject_csv`, `strata_json`) plus `eval_metrics_json`.
    pub(crate) fn eval_dir(&self, split: &str, name: &str) -> RunDir {
        RunDir::new(self.file(&format!("eval-{split}-{name}")))
    }

    /// `metrics.json` of an `eval-gnn` re-scoring directory ([`Self::eval_dir`]).
    pub(crate) fn eval_metrics_json(&self) -> PathBuf {
        self.file(EVAL_METRICS_JSON)
    }

    // ---- readers ----

    /// The metrics rows (`metrics.jsonl`; none when the file is missing).
    pub(crate) fn metrics(&self) -> MetricsFiles {
        MetricsFiles::new(&self.path)
    }

    /// The rows of `metrics.jsonl`, in order (see [`MetricsFiles::rows`]).
    pub(crate) fn read_metrics(&self) -> Result<Vec<MetricsRow>> {
        self.metrics().rows()
    }

    /// `args.json`, as the run's settings type.
    #[cfg(test)]
    pub(crate) fn read_args<T: DeserializeOwned>(&self) -> Result<T> {
        read_json(&self.args_json())
    }

    /// `clg_ode_results.json`.
    pub(crate) fn read_results(&self) -> Result<RunResults> {
        read_json(&self.results_json())
    }

    /// `test_metrics.json`.
    pub(crate) fn read_test_metrics(&self) -> Result<TestMetricsFile> {
        read_json(&self.test_metrics_json())
    }

    // ---- writers (atomic) ----

    pub(crate) fn write_args(&self, args: &impl Serialize) -> Result<()> {
        write_json(&self.args_json(), args)
    }

    pub(crate) fn write_config_toml(&self, toml: &str) -> Result<()> {
        write_atomic(&self.config_toml(), |w| {
            Ok(std::io::Write::write_all(w, toml.as_bytes())?)
        })
    }

    /// `finished.json`: the run finished (a resume of it has nothing to do).
    pub(crate) fn finished_json(&self) -> PathBuf {
        self.file(FINISHED_JSON)
    }

    pub(crate) fn write_finished(&self, record: &impl Serialize) -> Result<()> {
        write_json(&self.finished_json(), record)
    }

    pub(crate) fn write_run_meta(&self, meta: &RunMeta) -> Result<()> {
        write_json(&self.run_meta_json(), meta)
    }
}

impl AsRef<Path> for RunDir {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl From<PathBuf> for RunDir {
    fn from(path: PathBuf) -> Self {
        Self::new(path)
    }
}

impl From<&Path> for RunDir {
    fn from(path: &Path) -> Self {
        Self::new(path)
    }
}

/// Whether `name` is a per-epoch file's name: `epoch_NNN.safetensors` or
/// `<stem>_epoch_NNN.safetensors`.
pub(crate) fn is_epoch_file_name(name: &str) -> bool {
    let head = name.strip_suffix(CHECKPOINT_EXT).unwrap_or("");
    let digits = head.rsplit('_').next().unwrap_or("");
    let before = &head[..head.len() - digits.len()];
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (before == "epoch_" || before.ends_with("_epoch_"))
}

/// A JSON file: an error naming it when it cannot be read (`{path}: cannot read it`) or is not
/// JSON of the type (`{path}: not JSON`).
pub(crate) fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{}: cannot read it", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
}

#[cfg(test)]
mod tests;
