//! `trainer predict RUN_DIR … --out DIR`: a run's model predicts connectomes and writes them in
//! the input format, N×N CSV of raw weights (symmetric, zero diagonal; our SC reader reads them
//! back), with an index `predictions.csv` (subject, start scan, start age, target age, Δt, file,
//! the true scan where one exists). Horizons: `--next-visit` (visit 1 from visit 0, the test
//! protocol), `--target-age A`, `--dt-years D` or `--ages A,B,…` (a trajectory per subject);
//! `--population` adds the mean predicted matrix per one-year age bin; `--plot` draws truth,
//! prediction, identity and both differences for every prediction with a true scan.
//!
//! Everything is written into a staging directory renamed to `--out` at the end: an error
//! (a subject not in the data, a target age before the start scan, a run without a checkpoint)
//! or SIGINT/SIGTERM while writing leaves nothing behind, and a staging directory a killed run
//! left is removed by the next one.
//!
//! Horizons are checked against what the fold's training subjects cover (Δt up to their
//! longest follow-up, ages within theirs); `--extrapolate` allows beyond. A forecast that is
//! not finite is an error naming the subject and horizon, never a file. Every file name is
//! distinct (`<subject>_ses-age<age>.csv`, a suffix when two ages round alike), and
//! `predictions.csv` says which part of the run's split each subject was in.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use anyhow::{Context, Result, bail};
use signal_hook::consts::{SIGINT, SIGTERM};

use super::super::protocol::saved_run::{Horizon, SavedRun};
use super::reopen::{DataOverrides, Forecast};
use crate::backend::{self, DeviceSettings};
use crate::outputs::heatmap;
use crate::outputs::run_files::refuse_run_file;
use crate::settings::non_negative;

mod plan;
mod write;

use plan::{named_subjects, plan};
use write::{remove_stale_staging, write_all};

/// Which subjects are predicted when `--subjects` is not given.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PredictSplit {
    All,
    /// The run's held-out test subjects.
    Test,
    /// The validation subjects of the checkpoint's fold.
    Val,
}

/// How far ahead (exactly one).
#[derive(clap::Args, Debug, Clone)]
#[group(required = true, multiple = false)]
pub(crate) struct HorizonArgs {
    /// Visit 1 from visit 0 (subjects with two scans or more), as the test protocol.
    #[arg(long)]
    pub next_visit: bool,
    /// The age (years) to predict at, from visit 0.
    #[arg(long, value_parser = non_negative, allow_negative_numbers = true)]
    pub target_age: Option<f64>,
    /// Years after visit 0, one or several (comma-separated: one prediction per subject and
    /// value).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = non_negative,
        allow_negative_numbers = true
    )]
    pub dt_years: Option<Vec<f64>>,
    /// Ages of a trajectory, comma-separated (ages before a subject's start scan are skipped).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = non_negative,
        allow_negative_numbers = true
    )]
    pub ages: Option<Vec<f64>>,
}

/// `trainer predict`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PredictSettings {
    /// The run directory of a `train-gnn` run.
    pub run_dir: PathBuf,
    /// `best`, `last` or a checkpoint file (as eval-gnn).
    #[arg(long, default_value = "best")]
    pub checkpoint: String,
    #[command(flatten)]
    pub paths: DataOverrides,
    /// Subjects: comma-separated ids, or a file with one id per line.
    #[arg(long)]
    pub subjects: Option<String>,
    /// The subjects when --subjects is not given.
    #[arg(long, value_enum, default_value = "all")]
    pub split: PredictSplit,
    #[command(flatten)]
    pub horizon: HorizonArgs,
    /// Also write the mean predicted matrix per one-year age bin (`population/`).
    #[arg(long)]
    pub population: bool,
    /// Also draw truth / prediction / identity / differences for predictions with a true scan
    /// (`plots/<subject>_<session>.png`).
    #[arg(long)]
    pub plot: bool,
    /// A file of ROI names in atlas order (one per line, e.g. Schaefer `7Networks_LH_Vis_1`):
    /// each node's network is a colour strip along the heatmaps, the networks named under them.
    #[arg(long)]
    pub roi_names: Option<PathBuf>,
    /// With `--roi-names`: also draw a line across the heatmaps at every network boundary.
    #[arg(long, requires = "roi_names")]
    pub network_lines: bool,
    /// Output directory (must not exist, or be empty).
    #[arg(long)]
    pub out: PathBuf,
    /// Allow horizons beyond what the fold's training subjects cover (longer Δt, ages outside
    /// theirs): the model then extrapolates.
    #[arg(long)]
    pub extrapolate: bool,
    #[command(flatten)]
    pub device: DeviceSettings,
}

/// `trainer predict`.
pub(crate) fn run(s: PredictSettings) -> Result<()> {
    refuse_run_file("--out", s.out.as_path())?;
    if s.out.exists() && std::fs::read_dir(&s.out).map_or(true, |mut d| d.next().is_some()) {
        bail!("--out {}: exists and is not empty", s.out.display());
    }
    let run = SavedRun::open(&s.run_dir, &s.checkpoint, &s.paths)?;
    run.warn_split_changes("predict");
    let subjects = match &s.subjects {
        Some(spec) => named_subjects(&run, spec)?,
        None => match s.split {
            PredictSplit::All => (0..run.prep.cohort.subjects.len()).collect(),
            PredictSplit::Test => run.prep.test.clone(),
            PredictSplit::Val => run.prep.folds[0].val.clone(),
        },
    };
    let items = plan(&run, &s, &subjects)?;
    let names = match &s.roi_names {
        Some(p) => Some(heatmap::read_roi_names(p, run.data.n_nodes())?),
        None => None,
    };
    let who: Vec<usize> = items.iter().map(|i| i.subject).collect();
    let dts: Vec<f64> = items.iter().map(|i| i.dt).collect();
    let targets: Vec<Option<usize>> = items.iter().map(|i| i.truth).collect();
    let horizon = if s.horizon.next_visit {
        Horizon::NextVisit
    } else {
        Horizon::Years {
            dts: &dts,
            targets: &targets,
        }
    };
    let job = Forecast {
        run: &run,
        subjects: &who,
        horizon,
    };
    let preds = backend::dispatch_checked(s.device.placement()?, job)?;
    for (item, m) in items.iter().zip(&preds.matrices) {
        if m.iter().any(|v| !v.is_finite()) {
            bail!(
                "{}: the forecast {} y after visit 0 (age {}) is not finite; nothing written \
                 (a horizon this far out is beyond what the model can represent)",
                run.prep.cohort.subjects[item.subject].id,
                item.dt,
                item.target_age
            );
        }
    }

    let parent = s.out.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    remove_stale_staging(parent);
    let staging = parent.join(format!(".predict-{}.tmp", std::process::id()));
    // SIGINT/SIGTERM while the files are written: stop, remove the staging directory.
    let stop = Arc::new(AtomicUsize::new(0));
    let hooks: Vec<_> = [SIGINT, SIGTERM]
        .iter()
        .filter_map(|&sig| signal_hook::flag::register_usize(sig, stop.clone(), sig as usize).ok())
        .collect();
    let written = std::fs::create_dir(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))
        .and_then(|_| {
            write_all(
                &staging,
                &run,
                &s,
                &items,
                &preds.matrices,
                names.as_deref(),
                &stop,
            )
        });
    for hook in hooks {
        signal_hook::low_level::unregister(hook);
    }
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if s.out.exists() {
        std::fs::remove_dir(&s.out)?;
    }
    std::fs::rename(&staging, &s.out)
        .with_context(|| format!("cannot move the predictions to {}", s.out.display()))?;
    eprintln!(
        "[predict] {} predictions of {} subjects (fold {}, {}); wrote {}",
        items.len(),
        subjects.len(),
        run.fold,
        run.ck_path.display(),
        s.out.display()
    );
    Ok(())
}
