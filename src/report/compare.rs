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
//! validation skill per epoch of our runs, in either view.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde_json::Value;

use super::reference_run::{self, RefFold, find, text};
use crate::outputs::RunDir;
use crate::outputs::compare::{self as view, Format};
use crate::sweep::{Manifest, run_dir, state};

/// `trainer compare`'s settings (its flags).
#[derive(Debug, Clone, Default)]
pub struct CompareSettings {
    /// Run directories (ours or the reference's) and sweep directories.
    pub runs: Vec<PathBuf>,
    pub group_by: Vec<String>,
    pub metrics: Vec<String>,
    pub format: Option<Format>,
    pub json: bool,
    pub plot: Option<PathBuf>,
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
    pub fn grouped(&self) -> bool {
        !self.per_run
            && (!self.group_by.is_empty() || !self.metrics.is_empty() || self.format.is_some())
    }

    /// The format asked for: `--format`, else JSON with `--json`, else `default`.
    pub fn format_or(&self, default: Format) -> Format {
        match (self.format, self.json) {
            (Some(f), _) => f,
            (None, true) => Format::Json,
            (None, false) => default,
        }
    }
}

/// Whether a run has results.
#[derive(Debug, Clone, PartialEq)]
enum RunStatus {
    Done,
    NoResults,
    /// A results file that is not a JSON object (torn, truncated): named, never grouped.
    Unreadable(PathBuf),
}

/// One run: where, what varied, and whether it has results.
struct Run {
    dir: RunDir,
    name: String,
    varied: BTreeMap<String, String>,
    /// A task of a sweep (`false`: a run directory named on the command line).
    task: bool,
    /// One fold of a reference trainer's run; `None` for ours.
    reference: Option<RefFold>,
}

impl Run {
    fn ours(dir: PathBuf, name: String, varied: BTreeMap<String, String>, task: bool) -> Self {
        Self {
            dir: RunDir::new(dir),
            name,
            varied,
            task,
            reference: None,
        }
    }

    fn done(&self) -> bool {
        self.status() == RunStatus::Done
    }

    /// Whether the run has test results that can be read.
    fn status(&self) -> RunStatus {
        if let Some(r) = &self.reference {
            return if r.done() {
                RunStatus::Done
            } else {
                RunStatus::NoResults
            };
        }
        let test = self.dir.test_metrics_json();
        if !test.is_file() {
            return RunStatus::NoResults;
        }
        for file in [test, self.dir.results_json()] {
            if file.is_file() && read_json(&file).is_none_or(|v| !v.is_object()) {
                return RunStatus::Unreadable(file);
            }
        }
        RunStatus::Done
    }

    /// The run's name, saying which file cannot be read when one cannot.
    fn label(&self) -> String {
        match self.status() {
            RunStatus::Unreadable(file) => {
                format!("{} (unreadable: {})", self.name, file.display())
            }
            _ => self.name.clone(),
        }
    }

    fn metric(&self, name: &str) -> Option<f64> {
        match &self.reference {
            Some(r) => r.metric(name),
            None => metric(&self.dir, name),
        }
    }
}

fn read_json(p: &Path) -> Option<Value> {
    crate::outputs::run_files::read_json(p).ok()
}

/// The runs of every input: a sweep's tasks, a run directory of ours, a reference run
/// directory (one run per fold), or a directory of reference `fold<k>` run directories.
fn runs(inputs: &[PathBuf]) -> Result<Vec<Run>> {
    let mut out = Vec::new();
    for p in inputs {
        let folds = reference_run::fold_dirs(p);
        if state::manifest_path(p).is_file() {
            let m = Manifest::read(p)?;
            for t in &m.tasks {
                out.push(Run::ours(
                    run_dir(p, t),
                    t.name.clone(),
                    t.varied.clone(),
                    true,
                ));
            }
        } else if reference_run::is_reference_run(p) || !folds.is_empty() {
            let dirs = if folds.is_empty() {
                vec![p.clone()]
            } else {
                folds
            };
            for dir in dirs {
                for f in reference_run::read(&dir)? {
                    out.push(Run {
                        name: dir.display().to_string(),
                        dir: RunDir::new(&dir),
                        varied: BTreeMap::new(),
                        task: false,
                        reference: Some(f),
                    });
                }
            }
        } else if RunDir::new(p).args_json().is_file() || RunDir::new(p).results_json().is_file() {
            out.push(Run::ours(
                p.clone(),
                p.display().to_string(),
                BTreeMap::new(),
                false,
            ));
        } else {
            let d = RunDir::new(p);
            bail!(
                "{}: not a run directory (no {}; a finished one also has {}), a sweep (no {}) \
                 nor the reference trainer's run directory",
                p.display(),
                d.args_json().display(),
                d.results_json().display(),
                state::manifest_path(p).display(),
            );
        }
    }
    pooling::check_distinct(&out)?;
    Ok(out)
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
    let results = read_json(&run.dir.results_json());
    let args = || read_json(&run.dir.args_json());
    match key {
        "source" => "trainer".into(),
        "model" => results
            .as_ref()
            .and_then(|r| r.get("model").map(text))
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
            .and_then(|r| r.get("cv_fold").map(text))
            .unwrap_or_else(|| "?".into()),
        _ => args()
            .and_then(|a| find(&a, key))
            .map_or_else(|| "?".into(), |v| text(&v)),
    }
}

/// Metric `name` of a finished run: a test metric of the model (`sc_log_mse`), `skill`,
/// `pearson_gain`, `identity_<metric>`, `forecast_only.<metric>`, or a column of the best
/// epoch's metrics row (`val_mask_ratio`); `None` when the run has no results.
fn metric(dir: &RunDir, name: &str) -> Option<f64> {
    let test = read_json(&dir.test_metrics_json())?;
    let from_test = if let Some(rest) = name.strip_prefix("forecast_only.") {
        test["forecast_only"]["model"][rest].as_f64()
    } else if let Some(rest) = name.strip_prefix("identity_") {
        test["identity_baseline"][rest].as_f64()
    } else if name == "skill" || name == "pearson_gain" {
        test["skill"][name].as_f64()
    } else {
        test["model"][name].as_f64().or(test[name].as_f64())
    };
    from_test.or_else(|| {
        let results = read_json(&dir.results_json())?;
        let fold = &results["best_fold"];
        let folds = results["cv_folds"].as_array()?;
        let info = folds
            .iter()
            .find(|f| &f["fold"] == fold)
            .or(folds.first())?;
        let best = info["best_epoch"].as_u64()?;
        let rows = std::fs::read_to_string(dir.metrics_jsonl()).ok()?;
        rows.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| {
                r["epoch"].as_u64() == Some(best)
                    && (r["fold"].is_null() || r["fold"] == info["fold"])
            })?[name]
            .as_f64()
    })
}

/// `trainer compare`: the runs of every input, in the view the flags ask for, then `--plot`.
pub fn compare(s: &CompareSettings) -> Result<()> {
    if s.runs.is_empty() {
        bail!("give at least one run directory");
    }
    let runs = runs(&s.runs)?;
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
            None if !r.task || r.done() => lines.push(view::summarize(&r.dir)?),
            _ => missing.push(r.name.as_str()),
        }
    }
    Ok((lines, missing))
}

mod degenerate;
mod groups;
mod pooling;
mod views;

#[cfg(test)]
mod tests;
