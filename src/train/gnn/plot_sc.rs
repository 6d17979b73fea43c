//! `trainer plot-sc RUN_DIR --out FIG.(png|svg)`: a run's prediction for one subject as
//! heatmaps (truth, prediction, identity, both errors; `--subject`, default the first test
//! subject with two scans), or with `--strata` the skill per stratum of the run's
//! `strata.json` (Δt terciles, horizons) as bars.

use std::path::PathBuf;

use anyhow::{Context, Result};

use super::reopen::{DataOverrides, Forecast};
use super::saved_run::{Horizon, SavedRun};
use crate::backend::{self, DeviceSettings};
use crate::outputs::RunDir;
use crate::outputs::heatmap::{self, Comparison};
use crate::outputs::strata::{self, StrataSkill};

/// `trainer plot-sc`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub struct PlotScSettings {
    /// The run directory of a `train-gnn` run.
    pub run_dir: PathBuf,
    /// The figure file, `.png` or `.svg`.
    #[arg(long)]
    pub out: PathBuf,
    /// The subject (default: the first test subject with two scans or more).
    #[arg(long, conflicts_with = "strata")]
    pub subject: Option<String>,
    /// Draw the skill per stratum of `strata.json` instead.
    #[arg(long)]
    pub strata: bool,
    /// `best`, `last` or a checkpoint file (as eval-gnn).
    #[arg(long, default_value = "best")]
    pub checkpoint: String,
    /// ROI names in atlas order (one per line): network boundaries are marked.
    #[arg(long)]
    pub roi_names: Option<PathBuf>,
    #[command(flatten)]
    pub paths: DataOverrides,
    #[command(flatten)]
    pub device: DeviceSettings,
}

/// `trainer plot-sc`.
pub fn run(s: PlotScSettings) -> Result<()> {
    if s.strata {
        let path = RunDir::new(&s.run_dir).strata_json();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("{}: the run has no strata yet", path.display()))?;
        let strata: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let title = format!("skill by stratum: {}", s.run_dir.display());
        let chart = StrataSkill::from_json(&title, &strata);
        if let Some(w) = strata::small_warning(&chart.strata) {
            eprintln!("[plot-sc] warning: {w}");
        }
        heatmap::render(&chart, &s.out)?;
        eprintln!("[plot-sc] wrote {}", s.out.display());
        return Ok(());
    }
    let run = SavedRun::open(&s.run_dir, &s.checkpoint, &s.paths)?;
    let cohort = &run.prep.cohort;
    let subject = match &s.subject {
        Some(id) => cohort
            .subjects
            .iter()
            .position(|x| &x.id == id)
            .with_context(|| format!("--subject {id}: not a subject of the cohort"))?,
        None => *run
            .prep
            .test
            .iter()
            .find(|&&t| cohort.subjects[t].scans.len() >= 2)
            .context("no test subject has two scans: pass --subject")?,
    };
    let scans = &cohort.subjects[subject].scans;
    anyhow::ensure!(
        scans.len() >= 2,
        "--subject {}: one scan, nothing to compare a prediction with",
        cohort.subjects[subject].id
    );
    let names = match &s.roi_names {
        Some(p) => Some(heatmap::read_roi_names(p, run.data.n_nodes())?),
        None => None,
    };
    let job = Forecast {
        run: &run,
        subjects: &[subject],
        horizon: Horizon::NextVisit,
    };
    let preds = backend::dispatch_checked(s.device.placement()?, job)?;
    let fig = Comparison {
        title: format!(
            "{} → {} ({}, {})",
            scans[0].scan_id,
            scans[1].session,
            run.config.settings.model_kind.file_stem(),
            run.ck_path.display()
        ),
        truth: &scans[1].a_raw,
        prediction: &preds.matrices[0],
        start: &scans[0].a_raw,
        roi_names: names.as_deref(),
    };
    heatmap::render(&fig, &s.out)?;
    eprintln!("[plot-sc] wrote {}", s.out.display());
    Ok(())
}
