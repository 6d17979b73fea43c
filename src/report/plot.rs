//! `trainer plot RUN_DIR|SWEEP_DIR…`: curves of runs, and of every task of a sweep, each line
//! labelled by what the sweep varied (`lr=0.01 seed=2`). Tasks that have not written a metrics
//! row yet are named and left out, so the command works while the sweep runs (a live view
//! beside `sweep status --watch` and TensorBoard).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::runs::{self, Run};
use crate::outputs::figure::Layout;
use crate::outputs::run_files::refuse_run_file;
use crate::outputs::run_label::Label;
use crate::outputs::{RunDir, curves};

/// Draws the curves of `inputs` (run or sweep directories, read by [`runs::read`], named by
/// their `--label`s, else by short default names) into `out`.
pub(crate) fn plot(
    inputs: &[PathBuf],
    labels: &[Label],
    metrics: &[String],
    title: Option<&str>,
    layout: Layout,
    out: &Path,
) -> Result<()> {
    refuse_run_file("--out", out)?;
    let all = runs::read(inputs, labels)?;
    if let Some(r) = all.iter().find(|r| r.reference.is_some()) {
        bail!(
            "{}: the reference trainer's run has no curves here (`trainer compare` reads it)",
            r.name
        );
    }
    let mut lines = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        let of_input: Vec<&Run> = all.iter().filter(|r| r.input == i).collect();
        if of_input.iter().any(|r| r.task) {
            let mut tasks = sweep_lines(input, &of_input)?;
            // The sweep's name before each task's when there is more than one input, or the
            // sweep has a --label.
            if let Some(first) = of_input.first()
                && (inputs.len() > 1 || first.label.is_some())
            {
                for (label, _) in &mut tasks {
                    *label = format!("{}: {label}", first.source);
                }
            }
            lines.extend(tasks);
        } else {
            lines.extend(
                of_input
                    .iter()
                    .map(|r| (r.legend.clone(), r.dir.path().to_path_buf())),
            );
        }
    }
    curves::plot_labelled(&lines, metrics, title, layout, out)
}

/// `compare --plot`: the validation skill per epoch where the runs computed it
/// (`--val_sc_eval_every`), else the validation loss, one line per labelled run.
pub(crate) fn validation_curves(
    runs: &[(String, PathBuf)],
    layout: Layout,
    out: &Path,
) -> Result<()> {
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
    curves::plot_labelled(runs, &[metric.to_string()], None, layout, out)
}

/// The tasks of the sweep at `dir` that have metrics rows, labelled by their varied settings.
fn sweep_lines(dir: &Path, tasks: &[&Run]) -> Result<Vec<(String, PathBuf)>> {
    let mut runs = Vec::new();
    let mut waiting = Vec::new();
    for task in tasks {
        let started = task.dir.read_metrics().is_ok_and(|rows| !rows.is_empty());
        if started {
            runs.push((task.legend.clone(), task.dir.path().to_path_buf()));
        } else {
            waiting.push(task.name.as_str());
        }
    }
    if runs.is_empty() {
        bail!(
            "{}: none of the sweep's {} task(s) has a metrics row yet (`trainer sweep status {}`)",
            dir.display(),
            tasks.len(),
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
