//! `trainer eval-gnn RUN_DIR`: a finished (or stopped) `train-gnn` run re-scored without
//! retraining. The model is rebuilt from the run's `args.json`, its weights reloaded from a
//! checkpoint, the cohort loaded and split as in the run (paths overridable) (`SavedRun`), and
//! the split's subjects scored with the one test protocol: `metrics.json` (model, identity,
//! skill, forecast-only block, exact topology), `per_subject.csv` and `strata.json`.
//!
//! It never writes into a run directory's own files nor into an unrelated directory: `--out`
//! may not be a run directory, and an existing non-empty `--out` must hold only an earlier
//! eval-gnn's three files (replaced as a whole: written to a staging directory, then renamed).
//! When the data as loaded now is split differently from the run (another cohort, seed or
//! subject set), it says so loudly and records it in `metrics.json` (`split_changes`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use super::super::protocol::breakdown::{
    SubjectScore, per_subject, per_subject_at, strata, three_visit_subjects, write_per_subject,
};
use super::super::protocol::evaluate::exact_topology;
use super::super::protocol::fold_data::delta_t;
use super::super::protocol::saved_run::{Horizon, SavedRun};
use super::reopen::{DataOverrides, Forecast};
use crate::backend::{self, DeviceSettings};
use crate::files::write_json;
use crate::metrics::sc::ScMetrics;
use crate::outputs::RunDir;
use crate::outputs::result_files::{EvalMetricsFile, TestMetrics};

/// Which subjects are scored.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EvalSplit {
    /// The held-out test subjects (as at the end of training).
    Test,
    /// The validation subjects of the checkpoint's fold.
    Val,
}

/// Per metric, the paired statistics of model − identity over the forecast subjects (mean with
/// its bootstrap 95% interval over subjects, Wilcoxon p: [`crate::metrics::paired`]).
fn paired_vs_identity(rows: &[SubjectScore]) -> serde_json::Value {
    use crate::metrics::paired::{SEED, paired_values};
    let forecasts: Vec<&SubjectScore> = rows.iter().filter(|r| r.forecast).collect();
    if forecasts.is_empty() {
        return serde_json::Value::Null;
    }
    let mut out = serde_json::Map::new();
    for (i, name) in ScMetrics::NAMES.iter().enumerate() {
        let ab: Vec<(f64, f64)> = forecasts
            .iter()
            .map(|r| (r.model.values()[i], r.identity.values()[i]))
            .collect();
        if ab.iter().all(|(a, b)| (a - b).is_finite()) {
            out.insert(name.to_string(), json!(paired_values(&ab, SEED)));
        }
    }
    serde_json::Value::Object(out)
}

/// `trainer eval-gnn`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct EvalGnnSettings {
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
    #[command(flatten)]
    pub paths: DataOverrides,
    #[command(flatten)]
    pub device: DeviceSettings,
}

/// Refuses an output directory that is a run directory, or that holds anything but an earlier
/// eval-gnn's files.
fn check_out(dir: &Path) -> Result<()> {
    let files = RunDir::new(dir);
    if files.args_json().exists() || files.run_meta_json().exists() || files.checkpoints().exists()
    {
        anyhow::bail!(
            "--out {}: a run directory (it has args.json, run_meta.json or checkpoints/); \
             eval-gnn writes its files into a directory of its own",
            dir.display()
        );
    }
    // The files eval-gnn writes.
    let ours: Vec<std::ffi::OsString> = [
        files.eval_metrics_json(),
        files.per_subject_csv(),
        files.strata_json(),
    ]
    .iter()
    .filter_map(|p| p.file_name().map(|n| n.to_os_string()))
    .collect();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        if !ours.contains(&e.file_name()) {
            let name = e.file_name().to_string_lossy().into_owned();
            anyhow::bail!(
                "--out {}: not empty, and {name} is not an eval-gnn output; choose an empty or \
                 new directory",
                dir.display()
            );
        }
    }
    Ok(())
}

/// `trainer eval-gnn`.
pub(crate) fn run(s: EvalGnnSettings) -> Result<()> {
    let run = SavedRun::open(&s.run_dir, &s.checkpoint, &s.paths)?;
    run.warn_split_changes("eval-gnn");
    let out = match &s.out {
        Some(out) => RunDir::new(out),
        None => {
            let name = Path::new(&s.checkpoint)
                .file_stem()
                .map_or(s.checkpoint.clone(), |n| n.to_string_lossy().into_owned());
            let split = format!("{:?}", s.split).to_lowercase();
            RunDir::new(&s.run_dir).eval_dir(&split, &name)
        }
    };
    crate::outputs::run_files::refuse_run_file("--out", out.path())?;
    check_out(out.path())?;
    let set = &run.config.settings;
    let (data, fold) = (&run.data, run.fold);
    let subjects = match s.split {
        EvalSplit::Test => run.prep.test.clone(),
        EvalSplit::Val => run.prep.folds[0].val.clone(),
    };
    let placement = s.device.placement()?;
    let job = Forecast {
        run: &run,
        subjects: &subjects,
        horizon: Horizon::NextVisit,
    };
    let preds = backend::dispatch_checked(placement, job)?;
    let rows = per_subject(data, &subjects, &preds, set.topo_bins);
    // Visit 0 → visit 2 of the subjects with three visits, for models with a time input.
    let far_rows = if set.model_kind.info().time_input {
        let far = three_visit_subjects(data, &subjects);
        let dts: Vec<f64> = far.iter().map(|&s| delta_t(data.scans(s), 0, 2)).collect();
        let targets = vec![Some(2); far.len()];
        let job = Forecast {
            run: &run,
            subjects: &far,
            horizon: Horizon::Years {
                dts: &dts,
                targets: &targets,
            },
        };
        let preds = backend::dispatch_checked(placement, job)?;
        let visit2 = vec![2; far.len()];
        Some(per_subject_at(data, &far, &visit2, &preds, set.topo_bins))
    } else {
        None
    };
    let metrics = TestMetrics::of(&rows);
    let (exact, exact_rows) =
        exact_topology(data, &subjects, &preds, set.objective.topology.loss_bins);
    let m = EvalMetricsFile {
        metrics,
        exact_topology: exact,
        fold,
        checkpoint: run.ck_path.clone(),
        split: format!("{:?}", s.split).to_lowercase(),
        split_changes: run.split_changes.clone(),
        paired_vs_identity: paired_vs_identity(&rows),
    };
    let dir = out.path();
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = parent.join(format!(".eval-gnn-{}.tmp", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let staged = RunDir::new(&staging);
    let written = std::fs::create_dir(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))
        .and_then(|_| write_json(&staged.eval_metrics_json(), &m))
        .and_then(|_| write_per_subject(&staged.per_subject_csv(), &rows, &exact_rows))
        .and_then(|_| write_json(&staged.strata_json(), &strata(&rows, far_rows.as_deref())));
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .with_context(|| format!("cannot replace {}", dir.display()))?;
    }
    std::fs::rename(&staging, dir)
        .with_context(|| format!("cannot move the results to {}", dir.display()))?;
    if let Some(p) = m.paired_vs_identity["sc_log_mse"].as_object() {
        eprintln!(
            "[eval-gnn] paired over {} forecast subjects, sc_log_mse − identity: {:.3e} \
             [{:.3e}, {:.3e}] (bootstrap 95%), {} lower / {} higher, Wilcoxon p = {:.3e}",
            p["n"],
            p["mean"].as_f64().unwrap_or(f64::NAN),
            p["ci_low"].as_f64().unwrap_or(f64::NAN),
            p["ci_high"].as_f64().unwrap_or(f64::NAN),
            p["below"],
            p["above"],
            p["p_wilcoxon"].as_f64().unwrap_or(f64::NAN)
        );
    }
    eprintln!(
        "[eval-gnn] {} subjects, fold {fold}: sc_log_mse {:.6} (identity {:.6}, skill {:+.4}); \
         wrote {}",
        subjects.len(),
        m.metrics.model.sc_log_mse,
        m.metrics.identity_baseline.sc_log_mse,
        m.metrics.skill.skill,
        dir.display()
    );
    Ok(())
}
