//! `trainer plot-sc RUN_DIR --out FIG.(png|svg)`: a run's prediction for one subject as
//! heatmaps (truth, prediction, identity, both errors on one scale; `--subject`, default the
//! first test subject with two scans), or with `--strata` the skill per stratum of the
//! `strata.json` of one run or several side by side (Δt terciles with their thresholds,
//! horizons) as bars, or with `--new-edges` the precision–recall curves of the edges that
//! appear ([`new_edges`]).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use super::super::protocol::saved_run::{Horizon, SavedRun};
use super::reopen::{DataOverrides, Forecast};
use crate::backend::{self, DeviceSettings};
use crate::outputs::RunDir;
use crate::outputs::heatmap::{self, Comparison};
use crate::outputs::run_files::refuse_run_file;
use crate::outputs::run_label;
use crate::outputs::strata::{self, StrataSkill};

mod new_edges;
mod trajectories;

/// `trainer plot-sc`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PlotScSettings {
    /// The run directory of a `train-gnn` run (several only with `--strata` or `--new-edges`:
    /// one colour per run).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// The figure file, `.png` or `.svg`.
    #[arg(long)]
    pub out: PathBuf,
    /// The subject (default: the first test subject with two scans or more); with
    /// `--trajectories` several, comma-separated (default: the first 4 such subjects).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["strata", "new_edges"])]
    pub subject: Vec<String>,
    /// Draw the skill per stratum of `strata.json` instead.
    #[arg(long, conflicts_with = "new_edges")]
    pub strata: bool,
    /// With `--strata`: leave the small-strata warning off the figure (for a paper); it is still
    /// printed in the log.
    #[arg(long, requires = "strata")]
    pub no_figure_warning: bool,
    /// Draw how well the forecast ranks the edges that appear instead: precision–recall curves
    /// over the test subjects' edges absent at visit 0, scored by the forecast's weight.
    #[arg(long)]
    pub new_edges: bool,
    /// Draw subjects' observed scans and the forecast from each one's first scan over age
    /// instead (one panel per `--measure`).
    #[arg(long, conflicts_with_all = ["strata", "new_edges"])]
    pub trajectories: bool,
    /// With `--trajectories`: what a panel shows, `mean` (the mean log1p weight, default),
    /// `node:K` (node K's edges) or `edge:I-J` (0-based nodes); repeatable.
    #[arg(long, requires = "trajectories")]
    pub measure: Vec<String>,
    /// With `--new-edges`: also write every scored edge to this CSV (run, subject, i, j, score,
    /// appeared).
    #[arg(long, requires = "new_edges")]
    pub scores: Option<PathBuf>,
    /// The figure's title (default: the subject's scans and the model; with `--strata`, "skill
    /// by stratum").
    #[arg(long)]
    pub title: Option<String>,
    /// `best`, `last` or a checkpoint file (as eval-gnn).
    #[arg(long, default_value = "best")]
    pub checkpoint: String,
    /// `NAME=PATH`: the name of the run at PATH (one of the runs given) in the legend, the
    /// default title and `--scores` (repeatable; default: the run directory's name, never its
    /// path). With `--strata`, one NAME given to several runs (a configuration's folds) draws
    /// them as one bar per stratum: their mean skill with its 95% interval over the runs; with
    /// `--new-edges`, as one curve: their mean precision at each recall with its 95% band, the
    /// mean average precision with its interval.
    #[arg(long = "label", value_name = "NAME=PATH", value_parser = run_label::parse)]
    pub labels: Vec<run_label::Label>,
    /// ROI names in atlas order (one per line; Schaefer's `17Networks_LH_VisCent_1`): each
    /// node's network is a colour strip along the heatmaps, the networks named under them.
    #[arg(long, conflicts_with_all = ["strata", "new_edges", "trajectories"])]
    pub roi_names: Option<PathBuf>,
    /// With `--roi-names`: also draw a line across the heatmaps at every network boundary.
    #[arg(long, requires = "roi_names")]
    pub network_lines: bool,
    /// Lay the figure out for a journal's single column (89 mm): 400 pixels wide, legends under
    /// the charts, heatmaps two a row, so that its smallest text prints at 6 pt.
    #[arg(long)]
    pub column: bool,
    #[command(flatten)]
    pub paths: DataOverrides,
    #[command(flatten)]
    pub device: DeviceSettings,
}

/// `trainer plot-sc`.
pub(crate) fn run(s: PlotScSettings) -> Result<()> {
    refuse_run_file("--out", s.out.as_path())?;
    refuse_run_file("--scores", s.scores.as_deref())?;
    if s.strata {
        return strata_chart(&s);
    }
    if s.new_edges {
        return new_edges::run(&s);
    }
    if s.trajectories {
        return trajectories::run(&s);
    }
    let [run_dir] = s.runs.as_slice() else {
        bail!(
            "{} run directories: heatmaps draw one run (several only with --strata or \
             --new-edges)",
            s.runs.len()
        );
    };
    let label = s.label()?;
    let run = SavedRun::open(run_dir, &s.checkpoint, &s.paths)?;
    let cohort = &run.prep.cohort;
    let subject = match s.subject.as_slice() {
        [] => *run
            .forecast_test_subjects()
            .first()
            .context("no test subject has two scans: pass --subject")?,
        [id] => run.subject_index(id)?,
        several => bail!(
            "--subject: {} subjects; heatmaps draw one (several only with --trajectories)",
            several.len()
        ),
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
    let title = s.title.clone().unwrap_or_else(|| {
        format!(
            "{} → {} ({}, {} checkpoint)",
            scans[0].scan_id,
            scans[1].session,
            label.unwrap_or_else(|| run.config.settings.model_kind.file_stem().to_string()),
            s.checkpoint_name()
        )
    });
    let (truth, start) = (scans[1].a_raw.dense(), scans[0].a_raw.dense());
    let fig = Comparison {
        title,
        truth: &truth,
        prediction: &preds.matrices[0],
        start: &start,
        roi_names: names.as_deref(),
        network_lines: s.network_lines,
        layout: s.layout(),
    };
    heatmap::render(&fig, &s.out)?;
    eprintln!("[plot-sc] wrote {}", s.out.display());
    Ok(())
}

impl PlotScSettings {
    /// The one run's `--label` (heatmaps, trajectories), checked against the run given.
    fn label(&self) -> Result<Option<String>> {
        Ok(run_label::given(&self.labels, &self.runs)?
            .into_iter()
            .next()
            .flatten())
    }

    /// The figure's layout (`--column`).
    fn layout(&self) -> crate::outputs::figure::Layout {
        crate::outputs::figure::Layout::column(self.column)
    }

    /// The checkpoint as a title names it: `best`, `last` or the file's name (not its path).
    fn checkpoint_name(&self) -> String {
        std::path::Path::new(&self.checkpoint)
            .file_name()
            .map_or(self.checkpoint.clone(), |n| {
                n.to_string_lossy().into_owned()
            })
    }
}

/// `--strata`: the strata of every run, side by side; runs given one `--label` name are one
/// configuration (its folds, its seeds), drawn as one bar per stratum: their mean with its 95%
/// interval over the runs (`strata::pool`).
fn strata_chart(s: &PlotScSettings) -> Result<()> {
    let mut read: Vec<(String, Vec<strata::Stratum>)> = Vec::new();
    for (dir, label) in s
        .runs
        .iter()
        .zip(run_label::configuration_names(&s.labels, &s.runs)?)
    {
        let path = RunDir::new(dir).strata_json();
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("{}: the run has no strata yet", path.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        read.push((label, strata::read(&v)));
    }
    let mut runs: Vec<(String, Vec<strata::Stratum>)> = Vec::new();
    let mut pooled = std::collections::BTreeMap::new();
    for (name, _) in &read {
        if runs.iter().any(|(n, _)| n == name) {
            continue;
        }
        let of: Vec<&[strata::Stratum]> = read
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, st)| st.as_slice())
            .collect();
        if of.len() > 1 {
            pooled.insert(name.clone(), of.len());
            runs.push((name.clone(), strata::pool::pool(&of)));
        } else {
            runs.push((name.clone(), of[0].to_vec()));
        }
    }
    let chart = StrataSkill {
        title: s.title.clone().unwrap_or_else(|| "skill by stratum".into()),
        runs,
        warning_on_figure: !s.no_figure_warning,
        pooled,
        layout: s.layout(),
    };
    for (name, st) in &chart.runs {
        if let Some(w) = strata::small_warning(st) {
            eprintln!("[plot-sc] warning: {name}: {w}");
        }
    }
    heatmap::render(&chart, &s.out)?;
    eprintln!("[plot-sc] wrote {}", s.out.display());
    Ok(())
}
