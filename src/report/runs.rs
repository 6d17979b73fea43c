//! The one reader of the runs named on a report's command line (`trainer compare`, `trainer
//! plot`): a run directory of ours, a sweep's tasks (through its checked manifest), the
//! reference trainer's run directory (one run per fold, [`super::reference_run`]) or a directory
//! of its `fold<k>` run directories. Each becomes a [`Run`]: where it is, its name and legend,
//! what its sweep varied, whether it has results ([`Run::status`]) and its metrics
//! ([`Run::metric`]). Files inside a run are named by `crate::outputs::RunDir`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde_json::Value;

use super::reference_run::{self, RefFold};
use crate::outputs::RunDir;
use crate::outputs::run_label::{self, Label};
use crate::sweep::{Manifest, run_dir, state};

/// Whether a run has results.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RunStatus {
    Done,
    NoResults,
    /// A results file that is not a JSON object (torn, truncated): named, never grouped.
    Unreadable(PathBuf),
}

/// One run: where, what varied, and whether it has results.
pub(super) struct Run {
    pub dir: RunDir,
    /// The task's name (`LABEL/task` when its sweep has a `--label`), or the path given (its
    /// `--label` when it has one).
    pub name: String,
    /// A curve's legend: a task's varied settings that differ between its sweep's tasks
    /// ([`legend_labels`]), else the run's `--label`, else its short default name
    /// ([`run_label::default_names`]: never a whole path).
    pub legend: String,
    /// The input's `--label`, if it has one.
    pub label: Option<String>,
    /// The input's name in a legend: its `--label`, else its short default name.
    pub source: String,
    pub varied: BTreeMap<String, String>,
    /// Which of the paths given it was read from (a sweep's tasks share theirs).
    pub input: usize,
    /// A task of a sweep (`false`: a run directory named on the command line).
    pub task: bool,
    /// One fold of a reference trainer's run; `None` for ours.
    pub reference: Option<RefFold>,
}

impl Run {
    /// A run directory of ours named on the command line, known in legends as `source`.
    fn given(dir: &Path, input: usize, label: Option<String>, source: &str) -> Self {
        Self {
            dir: RunDir::new(dir),
            name: label.clone().unwrap_or_else(|| dir.display().to_string()),
            legend: source.to_string(),
            label,
            source: source.to_string(),
            varied: BTreeMap::new(),
            input,
            task: false,
            reference: None,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.status() == RunStatus::Done
    }

    /// Whether the run has test results that can be read.
    pub(super) fn status(&self) -> RunStatus {
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
    pub(super) fn label(&self) -> String {
        match self.status() {
            RunStatus::Unreadable(file) => {
                format!("{} (unreadable: {})", self.name, file.display())
            }
            _ => self.name.clone(),
        }
    }

    pub(super) fn metric(&self, name: &str) -> Option<f64> {
        match &self.reference {
            Some(r) => r.metric(name),
            None => metric(&self.dir, name),
        }
    }
}

pub(super) fn read_json(p: &Path) -> Option<Value> {
    crate::outputs::run_files::read_json(p).ok()
}

/// Whether `d` is a run directory of ours: its settings (`args.json`, written first), its
/// results, or its metrics rows (what `trainer plot` draws).
fn ours(d: &RunDir) -> bool {
    [d.args_json(), d.results_json(), d.metrics_jsonl()]
        .iter()
        .any(|f| f.is_file())
}

/// The runs of every input: a sweep's tasks, a run directory of ours, a reference run
/// directory (one run per fold), or a directory of reference `fold<k>` run directories; each
/// input named by its `--label` (`labels`: one of `inputs` each, [`run_label::given`]).
pub(super) fn read(inputs: &[PathBuf], labels: &[Label]) -> Result<Vec<Run>> {
    let given = run_label::given(labels, inputs)?;
    let sources = run_label::names(labels, inputs)?;
    let mut out = Vec::new();
    for (input, p) in inputs.iter().enumerate() {
        let (label, source) = (given[input].clone(), sources[input].as_str());
        let folds = reference_run::fold_dirs(p);
        if state::manifest_path(p).is_file() {
            let m = Manifest::read(p)?;
            let legends = legend_labels(m.tasks.iter().map(|t| (&t.name, &t.varied)));
            for (t, legend) in m.tasks.iter().zip(legends) {
                out.push(Run {
                    dir: RunDir::new(run_dir(p, t)),
                    name: label
                        .as_ref()
                        .map_or_else(|| t.name.clone(), |l| format!("{l}/{}", t.name)),
                    legend,
                    label: label.clone(),
                    source: source.to_string(),
                    varied: t.varied.clone(),
                    input,
                    task: true,
                    reference: None,
                });
            }
        } else if reference_run::is_reference_run(p) || !folds.is_empty() {
            let dirs = if folds.is_empty() {
                vec![p.clone()]
            } else {
                folds
            };
            for dir in dirs {
                for f in reference_run::read(&dir)? {
                    // A fold directory of a labelled input is named after the label.
                    let short = if dir == *p {
                        source.to_string()
                    } else {
                        let fold = dir.file_name().unwrap_or_default().to_string_lossy();
                        format!("{source}/{fold}")
                    };
                    out.push(Run {
                        name: match &label {
                            Some(_) => short.clone(),
                            None => dir.display().to_string(),
                        },
                        legend: short,
                        label: label.clone(),
                        source: source.to_string(),
                        dir: RunDir::new(&dir),
                        varied: BTreeMap::new(),
                        input,
                        task: false,
                        reference: Some(f),
                    });
                }
            }
        } else if ours(&RunDir::new(p)) {
            out.push(Run::given(p, input, label, source));
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
    Ok(out)
}

/// Metric `name` of a finished run: a test metric of the model (`sc_log_mse`), `skill`,
/// `pearson_gain`, `identity_<metric>`, `forecast_only.<metric>` ([`TestMetricsFile::metric`]),
/// or a column of the best epoch's metrics row (`val_mask_ratio`); `None` when the run has no
/// results.
///
/// [`TestMetricsFile::metric`]: crate::outputs::result_files::TestMetricsFile::metric
pub(super) fn metric(dir: &RunDir, name: &str) -> Option<f64> {
    let test = dir.read_test_metrics().ok()?;
    test.metric(name).or_else(|| {
        let results = dir.read_results().ok()?;
        let info = results.best_fold_entry()?;
        let best = info.best_epoch? as u64;
        let fold = serde_json::json!(info.fold);
        let rows = dir.read_metrics().ok()?;
        rows.iter()
            .find(|r| {
                r.epoch() == Some(best) && r.get("fold").is_none_or(|f| f.is_null() || *f == fold)
            })?
            .get(name)?
            .as_f64()
    })
}

/// A legend label per task: its varied settings `key=value`, leaving out keys whose value is the
/// same for every task (they tell the lines nothing); the task's name when nothing is left.
pub(super) fn legend_labels<'a>(
    tasks: impl Iterator<Item = (&'a String, &'a BTreeMap<String, String>)> + Clone,
) -> Vec<String> {
    let mut values: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for (_, varied) in tasks.clone() {
        for (k, v) in varied {
            values.entry(k).or_default().insert(v);
        }
    }
    tasks
        .map(|(name, varied)| {
            let parts: Vec<String> = varied
                .iter()
                .filter(|(k, _)| values.get(k.as_str()).is_some_and(|s| s.len() > 1))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if parts.is_empty() {
                name.clone()
            } else {
                parts.join(" ")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_what_differs_between_tasks() {
        let tasks: Vec<(String, BTreeMap<String, String>)> = [
            ("t0", [("lr", "0.1"), ("seed", "1"), ("model", "clg-ode")]),
            ("t1", [("lr", "0.01"), ("seed", "1"), ("model", "clg-ode")]),
        ]
        .into_iter()
        .map(|(n, kv)| {
            let m = kv.iter().map(|(k, v)| (k.to_string(), v.to_string()));
            (n.to_string(), m.collect())
        })
        .collect();
        let labels = legend_labels(tasks.iter().map(|(n, v)| (n, v)));
        assert_eq!(labels, ["lr=0.1", "lr=0.01"]);
        let one = legend_labels(tasks[..1].iter().map(|(n, v)| (n, v)));
        assert_eq!(one, ["t0"]);
    }
}
