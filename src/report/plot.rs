//! `trainer plot RUN_DIR|SWEEP_DIR…`: curves of runs, and of every task of a sweep, each line
//! labelled by what the sweep varied (`lr=0.01 seed=2`). Tasks that have not written a metrics
//! row yet are named and left out, so the command works while the sweep runs (a live view
//! beside `sweep status --watch` and TensorBoard).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::outputs::{RunDir, curves};
use crate::sweep::{Manifest, run_dir, state};

/// Draws the curves of `inputs` (run or sweep directories) into `out`.
pub fn plot(inputs: &[PathBuf], metrics: &[String], title: Option<&str>, out: &Path) -> Result<()> {
    let mut runs = Vec::new();
    for input in inputs {
        if state::manifest_path(input).is_file() {
            let mut tasks = sweep_runs(input)?;
            if inputs.len() > 1 {
                let name = input.file_name().unwrap_or_default().to_string_lossy();
                for (label, _) in &mut tasks {
                    *label = format!("{name}: {label}");
                }
            }
            runs.extend(tasks);
        } else {
            let name = input
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| input.display().to_string());
            runs.push((name, input.clone()));
        }
    }
    curves::plot_labelled(&runs, metrics, title, out)
}

/// `compare --plot`: the validation skill per epoch where the runs computed it
/// (`--val_sc_eval_every`), else the validation loss, one line per labelled run.
pub fn validation_curves(runs: &[(String, PathBuf)], out: &Path) -> Result<()> {
    let has_skill = runs.iter().any(|(_, dir)| {
        RunDir::new(dir).read_metrics().is_ok_and(|rows| {
            rows.iter()
                .any(|r| r.get("val_skill").is_some_and(serde_json::Value::is_number))
        })
    });
    let metric = if has_skill { "val_skill" } else { "val_loss" };
    if !has_skill {
        eprintln!("[compare] --plot: no run computed val_skill; plotting val_loss");
    }
    curves::plot_labelled(runs, &[metric.to_string()], None, out)
}

/// The tasks of the sweep at `dir` that have metrics rows, labelled by their varied settings.
fn sweep_runs(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let manifest = Manifest::read(dir)?;
    let labels = legend_labels(manifest.tasks.iter().map(|t| (&t.name, &t.varied)));
    let mut runs = Vec::new();
    let mut waiting = Vec::new();
    for (task, label) in manifest.tasks.iter().zip(labels) {
        let run = run_dir(dir, task);
        let started = RunDir::new(&run)
            .read_metrics()
            .is_ok_and(|rows| !rows.is_empty());
        if started {
            runs.push((label, run));
        } else {
            waiting.push(task.name.as_str());
        }
    }
    if runs.is_empty() {
        bail!(
            "{}: none of the sweep's {} task(s) has a metrics row yet (`trainer sweep status {}`)",
            dir.display(),
            manifest.tasks.len(),
            dir.display()
        );
    }
    if !waiting.is_empty() {
        eprintln!(
            "[plot] {}: {} task(s) without metrics rows yet, left out: {}",
            dir.display(),
            waiting.len(),
            waiting.join(" ")
        );
    }
    Ok(runs)
}

/// A legend label per task: its varied settings `key=value`, leaving out keys whose value is the
/// same for every task (they tell the lines nothing); the task's name when nothing is left.
fn legend_labels<'a>(
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
