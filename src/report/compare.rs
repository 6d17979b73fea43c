//! `trainer compare`, the one implementation: every input (a run directory of ours, a sweep's
//! tasks, the reference trainer's run directory or its `fold<k>` directories) becomes runs
//! (`runs`), shown in one of two views chosen by the flags alone:
//!
//! * the per-run table (no `--group-by`, `--metric` or `--format`, or `--per-run`): one line per
//!   run, fold, epochs, best epoch, test figures beside the identity's, exact topology, seconds
//!   ([`crate::outputs::compare::RunSummary`]), in any `--format` (`--json`: JSON);
//! * the grouped table (`--group-by KEY[,KEY]`, `--metric NAME…`, `--format table|md|csv|json`):
//!   runs grouped by the values of the keys (a varied setting of a sweep, `variant`, `model`,
//!   `fold`, `stage`, `source`, or any setting in a run's `args.json`); each metric gets mean ±
//!   sd, min, max and n over the group (folds and seeds), groups in the order of their first
//!   run (the inputs' order, a sweep's tasks in the spec's), the identity's rows last. `--json`
//!   is `--format json` here.
//!
//! * the paired view (`--against MODEL`): every run paired by test subject with that model's run
//!   of the same fold and seed (or, `--against identity`, with its own identity forecast) and
//!   with the identity ([`super::against`]), in any `--format`, p-values Holm-adjusted over
//!   the table.
//!
//! A run given twice (another spelling of its path, a symbolic link) is refused, and so is a
//! group (or `--against`'s runs) pooling runs of different cohorts unless `--pool-cohorts`
//! ([`pooling`]).
//!
//! A sweep's task without results is named as missing, not dropped silently; a run directory
//! named on the command line must have finished (the per-run view says which file it lacks).
//! Run directories of the reference's PyTorch trainer sit beside ours
//! (`super::reference_run`): each fold counts as a run, and when both kinds are grouped a
//! `source` column (`reference`, `trainer`) keeps them in separate rows. `--plot` draws the
//! validation skill per epoch of our runs, in either view; `--frontier` the grouped view's
//! configurations on both axes, log-MSE skill against topology skill ([`frontier`]).

use std::path::PathBuf;

use anyhow::{Result, bail};

use super::reference_run::{find, text};
use super::runs::{self, Run, RunStatus, read_json};
use crate::outputs::compare::{self as view, Format};
use crate::outputs::run_files::refuse_run_file;

/// `trainer compare`'s settings (its flags).
#[derive(Debug, Clone, Default)]
pub(crate) struct CompareSettings {
    /// Run directories (ours or the reference's) and sweep directories.
    pub runs: Vec<PathBuf>,
    /// `--label NAME=PATH`: the name of a run (or a sweep) in the tables and `--plot`'s legend
    /// ([`crate::outputs::run_label`]).
    pub labels: Vec<crate::outputs::run_label::Label>,
    pub group_by: Vec<String>,
    pub metrics: Vec<String>,
    pub format: Option<Format>,
    pub json: bool,
    pub plot: Option<PathBuf>,
    /// `--frontier PATH`: the grouped table's configurations on both axes ([`frontier`]).
    pub frontier: Option<PathBuf>,
    /// `--column`: `--plot`'s figure laid out for a journal's column.
    pub column: bool,
    /// `--against MODEL`: every run paired by subject with that model's run
    /// ([`super::against`]).
    pub against: Option<String>,
    /// `--strata`: every run's strata as a table.
    pub strata: bool,
    /// `--per-run`: the per-run view whatever the other flags (`--format` then formats it).
    pub per_run: bool,
    /// `--pool-cohorts`: a group (or `--against`'s runs) may pool runs of different cohorts
    /// (else refused: [`pooling`]).
    pub pool_cohorts: bool,
}

impl CompareSettings {
    /// The grouped view: asked for by `--group-by`, `--metric` or `--format` (never by what the
    /// inputs are).
    pub(crate) fn grouped(&self) -> bool {
        !self.per_run
            && (!self.group_by.is_empty()
                || !self.metrics.is_empty()
                || self.format.is_some()
                || self.frontier.is_some())
    }

    /// The format asked for: `--format`, else JSON with `--json`, else `default`.
    pub(crate) fn format_or(&self, default: Format) -> Format {
        match (self.format, self.json) {
            (Some(f), _) => f,
            (None, true) => Format::Json,
            (None, false) => default,
        }
    }
}

/// `key`'s value for `run`: what the sweep varied, else the run's model or settings.
fn group_value(run: &Run, key: &str) -> String {
    if let Some(v) = run.varied.get(key) {
        return v.clone();
    }
    if key == "cohort" {
        return pooling::Cohort::of(run).key();
    }
    if let Some(r) = &run.reference {
        return match key {
            // The reference has no presets and no variants: its defaults.
            "preset" | "variant" => "none".into(),
            _ => r.group_value(key).unwrap_or_else(|| "?".into()),
        };
    }
    let results = run.dir.read_results().ok();
    let args = || read_json(&run.dir.args_json());
    match key {
        "source" => "trainer".into(),
        "model" => results
            .as_ref()
            .and_then(|r| r.model.clone())
            .or_else(|| args()?.get("model_kind").map(text))
            .unwrap_or_else(|| "?".into()),
        // `[run] preset` of the run's config.toml; "none" for the reference's defaults.
        "preset" | "variant" => match std::fs::read_to_string(run.dir.config_toml()) {
            Ok(text) => text
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("run")?.get(key)?.as_str().map(str::to_owned))
                .unwrap_or_else(|| "none".into()),
            Err(_) => "?".into(),
        },
        "fold" => results
            .as_ref()
            .and_then(|r| r.cv_fold.map(|f| f.to_string()))
            .unwrap_or_else(|| "?".into()),
        _ => args()
            .and_then(|a| find(&a, key))
            .map_or_else(|| "?".into(), |v| text(&v)),
    }
}

/// `trainer compare`: the runs of every input, in the view the flags ask for, then `--plot`.
pub(crate) fn compare(s: &CompareSettings) -> Result<()> {
    if s.runs.is_empty() {
        bail!("give at least one run directory");
    }
    refuse_run_file("--plot", s.plot.as_deref())?;
    refuse_run_file("--frontier", s.frontier.as_deref())?;
    if s.column && s.plot.is_none() && s.frontier.is_none() {
        bail!("--column lays out a figure: give --plot FILE (or --frontier FILE)");
    }
    let runs = runs::read(&s.runs, &s.labels)?;
    pooling::check_distinct(&runs)?;
    if s.strata {
        views::strata_tables(&runs, s.format_or(Format::Table))?;
    } else if let Some(against) = &s.against {
        views::against(&runs, s, against)?;
    } else if s.grouped() {
        groups::grouped(&runs, s, s.format_or(Format::Table))?;
    } else {
        per_run(&runs, s.format_or(Format::Table))?;
    }
    if let Some(out) = &s.plot {
        views::plot(&runs, s, out)?;
    }
    for w in degenerate::warnings(&runs) {
        eprintln!("[compare] warning: {w}");
    }
    Ok(())
}

/// The per-run view: one line per run, as `format`; a sweep's tasks without results are named
/// on standard error.
fn per_run(runs: &[Run], format: Format) -> Result<()> {
    let (lines, missing) = per_run_lines(runs)?;
    print!("{}", view::render_runs(&lines, format)?);
    if !missing.is_empty() {
        eprintln!(
            "[compare] {} run(s) without test results: {}",
            missing.len(),
            missing.join(" ")
        );
    }
    Ok(())
}

/// The lines of the per-run view, and the names of a sweep's tasks without results. A run
/// named on the command line without results is an error naming the file it lacks.
fn per_run_lines(runs: &[Run]) -> Result<(Vec<view::RunSummary>, Vec<&str>)> {
    let mut lines = Vec::new();
    let mut missing = Vec::new();
    for r in runs {
        match &r.reference {
            Some(f) if f.done() => lines.push(f.summary(&r.name)),
            None if !r.task || r.done() => {
                let mut line = view::summarize(&r.dir)?;
                if r.label.is_some() {
                    line.run = r.name.clone();
                }
                lines.push(line);
            }
            _ => missing.push(r.name.as_str()),
        }
    }
    Ok((lines, missing))
}

mod degenerate;
mod differing;
mod frontier;
mod groups;
mod pooling;
mod views;

#[cfg(test)]
mod tests;
