//! `trainer plot`'s overlay of runs: one chart per metric, one line per labelled run directory.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, bail};

use super::{Chart, render_titled, stage_lines};
use crate::outputs::figure::Layout;
use crate::outputs::metrics_row::MetricsRow;

/// `trainer plot`: one chart per metric, one line per `(label, run directory)` (and stage).
/// Without `metrics`: `train_loss` and the first of `val_loss`/`test_loss` found.
pub(crate) fn plot_labelled(
    runs: &[(String, std::path::PathBuf)],
    metrics: &[String],
    title: Option<&str>,
    layout: Layout,
    out: &Path,
) -> Result<()> {
    if runs.is_empty() {
        bail!("give at least one run directory");
    }
    let mut rows: BTreeMap<usize, Vec<MetricsRow>> = BTreeMap::new();
    for (i, (_, dir)) in runs.iter().enumerate() {
        let r = crate::outputs::RunDir::new(dir).read_metrics()?;
        if r.is_empty() {
            bail!(
                "{}: no metrics rows (metrics.jsonl missing or empty): not a run directory?",
                dir.display()
            );
        }
        rows.insert(i, r);
    }
    let metrics: Vec<String> = if metrics.is_empty() {
        let mut m = vec!["train_loss".to_string()];
        if let Some(eval) = ["val_loss", "test_loss"]
            .into_iter()
            .find(|c| rows.values().flatten().any(|r| r.contains_key(*c)))
        {
            m.push(eval.into());
        }
        m
    } else {
        metrics.to_vec()
    };
    let mut charts = Vec::new();
    for metric in &metrics {
        let mut lines = Vec::new();
        for (i, (name, _)) in runs.iter().enumerate() {
            lines.extend(stage_lines(&rows[&i], metric, name, false));
        }
        if lines.is_empty() {
            let columns: std::collections::BTreeSet<&str> = rows
                .values()
                .flatten()
                .flat_map(|r| r.iter())
                .filter(|(_, v)| v.is_number())
                .map(|(k, _)| k.as_str())
                .collect();
            bail!(
                "no run has a metric `{metric}` in its metrics.jsonl; the runs have: {}",
                columns.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
        charts.push(Chart {
            title: metric.clone(),
            lines,
        });
    }
    render_titled(&charts, title, layout, out)
}
