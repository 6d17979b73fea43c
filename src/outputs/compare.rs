//! What `trainer compare` prints, whatever the runs are (ours, a sweep's tasks, the reference
//! trainer's): the per-run table ([`RunSummary`], one line per run, each model figure beside its
//! identity figure, the way the authors compare their variants); the grouped table is
//! [`super::group_table`]. Reading the inputs (sweeps,
//! the reference's run directories) and choosing the view is `crate::report::compare::compare`, the
//! one implementation of the command; this module knows our own run directory only.

use anyhow::{Context, Result};
use serde::Serialize;

use super::RunDir;
use super::metrics_row as col;
use super::result_files::RunResults;
use super::text::csv_cell;

pub use super::group_table::Format;

/// One run's line of the per-run table. A figure the run does not have (the reference writes no
/// identity baseline, an untested fold no test metrics) is `None`: `-` in the table, `null` in
/// JSON.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RunSummary {
    pub run: String,
    pub fold: Option<i64>,
    pub epochs: usize,
    pub best_epoch: Option<i64>,
    pub test_sc_log_mse: Option<f64>,
    pub identity_sc_log_mse: Option<f64>,
    pub skill: Option<f64>,
    pub test_pearson_sparse: Option<f64>,
    pub identity_pearson_sparse: Option<f64>,
    pub pearson_sparse_gain: Option<f64>,
    pub betti0_l1: Option<f64>,
    pub identity_betti0_l1: Option<f64>,
    pub betti1_l1: Option<f64>,
    pub identity_betti1_l1: Option<f64>,
    pub degree_pearson: Option<f64>,
    pub strength_pearson: Option<f64>,
    /// Σ over epochs of training and evaluation seconds.
    pub wall_seconds: Option<f64>,
    /// CPU seconds of the whole run when recorded, else of the training steps.
    pub cpu_seconds: Option<f64>,
}

/// The per-run line of our run directory `dir`: its `clg_ode_results.json` and `metrics.jsonl`.
pub(crate) fn summarize(dir: &RunDir) -> Result<RunSummary> {
    let file = dir.results_json();
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "{}: cannot read it (a finished `trainer train-gnn` run directory has one)",
            file.display()
        )
    })?;
    let r: RunResults = serde_json::from_str(&text).map_err(|e| {
        let what = if e.is_data() {
            "not a run's results"
        } else {
            "not JSON"
        };
        anyhow::Error::new(e).context(format!("{}: {what}", file.display()))
    })?;
    let need = |v: f64, path: &str| {
        (!v.is_nan())
            .then_some(Some(v))
            .with_context(|| format!("{}: no number at {path}", file.display()))
    };
    let rows = dir.read_metrics()?;
    let sum = |key: &str| -> f64 { rows.iter().filter_map(|row| row.number(key)).sum() };
    let fold_info = r.cv_folds.iter().find(|f| f.fold == r.best_fold);
    let (model, identity) = (&r.test_sc_metrics, &r.test_identity_baseline_sc_metrics);
    let exact = |v: f64| (!v.is_nan()).then_some(v);
    let (em, ei) = (
        &r.test_exact_topology.model,
        &r.test_exact_topology.identity_baseline,
    );
    Ok(RunSummary {
        run: dir.path().display().to_string(),
        fold: r.best_fold.map(|f| f as i64),
        epochs: rows.len(),
        best_epoch: fold_info.and_then(|f| Some(f.best_epoch? as i64)),
        test_sc_log_mse: need(model.sc_log_mse, "test_sc_metrics.sc_log_mse")?,
        identity_sc_log_mse: need(
            identity.sc_log_mse,
            "test_identity_baseline_sc_metrics.sc_log_mse",
        )?,
        skill: need(r.test_skill.skill, "test_skill.skill")?,
        test_pearson_sparse: need(
            model.sc_log_pearson_sparse,
            "test_sc_metrics.sc_log_pearson_sparse",
        )?,
        identity_pearson_sparse: need(
            identity.sc_log_pearson_sparse,
            "test_identity_baseline_sc_metrics.sc_log_pearson_sparse",
        )?,
        pearson_sparse_gain: need(
            r.test_skill.pearson_sparse_gain,
            "test_skill.pearson_sparse_gain",
        )?,
        betti0_l1: exact(em.betti0_l1),
        identity_betti0_l1: exact(ei.betti0_l1),
        betti1_l1: exact(em.betti1_l1),
        identity_betti1_l1: exact(ei.betti1_l1),
        degree_pearson: exact(em.degree_pearson),
        strength_pearson: exact(em.strength_pearson),
        wall_seconds: Some(sum(col::SECONDS) + sum(col::EVAL_SECONDS)),
        cpu_seconds: Some(exact(r.cpu_seconds).unwrap_or_else(|| sum(col::TRAIN_CPU_SECONDS))),
    })
}

/// What the per-run table says below itself.
pub(crate) const PER_RUN_LEGEND: &str = "skill = 1 − mse/identity (> 0: better than \"the next scan \
     equals this one\"); r_sp = sc_log_pearson_sparse; β L1 = exact Betti-curve distance to the \
     truth (identity's in brackets)";

/// The per-run table's columns (the run's name last).
const HEADER: [&str; 16] = [
    "fold",
    "epochs",
    "best",
    "mse",
    "identity",
    "skill",
    "r_sp",
    "id_r_sp",
    "Δr_sp",
    "β0 L1 (id)",
    "β1 L1 (id)",
    "deg_r",
    "str_r",
    "wall_s",
    "cpu_s",
    "run",
];

/// The width of each column of the text table but the last (the first left-aligned).
const WIDTHS: [usize; 15] = [4, 6, 4, 9, 9, 7, 7, 7, 7, 11, 11, 6, 6, 8, 8];

/// A run's cells of the per-run table, as [`HEADER`].
fn cells(s: &RunSummary) -> Vec<String> {
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    let sci = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.3e}"));
    let signed = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:+.digits$}"));
    vec![
        s.fold.map_or("-".into(), |f| f.to_string()),
        s.epochs.to_string(),
        s.best_epoch.map_or("-".into(), |e| e.to_string()),
        sci(s.test_sc_log_mse),
        sci(s.identity_sc_log_mse),
        signed(s.skill, 3),
        opt(s.test_pearson_sparse, 4),
        opt(s.identity_pearson_sparse, 4),
        signed(s.pearson_sparse_gain, 4),
        format!("{} ({})", opt(s.betti0_l1, 1), opt(s.identity_betti0_l1, 1)),
        format!("{} ({})", opt(s.betti1_l1, 0), opt(s.identity_betti1_l1, 0)),
        opt(s.degree_pearson, 3),
        opt(s.strength_pearson, 3),
        opt(s.wall_seconds, 1),
        opt(s.cpu_seconds, 1),
        s.run.clone(),
    ]
}

/// The per-run table, one line per run; every model figure beside its identity figure.
pub(crate) fn table(runs: &[RunSummary]) -> String {
    let line = |cells: &[String]| -> String {
        let mut out = String::new();
        for (i, (c, w)) in cells.iter().zip(WIDTHS).enumerate() {
            match i {
                0 => out.push_str(&format!("{c:<w$}")),
                _ => out.push_str(&format!(" {c:>w$}")),
            }
        }
        format!("{out}  {}", cells[WIDTHS.len()])
    };
    let header: Vec<String> = HEADER.iter().map(|h| h.to_string()).collect();
    let mut lines = vec![line(&header)];
    lines.extend(runs.iter().map(|s| line(&cells(s))));
    lines.join("\n") + "\n"
}

/// The per-run view as `f`: the text table and its legend, Markdown (the same cells), CSV (one
/// row per run, every figure a number, empty where the run has none, the run's name never a
/// spreadsheet formula: [`csv_cell`]) or JSON (a list of records, `null` where the run has
/// none).
pub fn render_runs(runs: &[RunSummary], f: Format) -> Result<String> {
    Ok(match f {
        Format::Table => format!("{}{PER_RUN_LEGEND}\n", table(runs)),
        Format::Md => {
            let header: Vec<String> = HEADER.iter().map(|h| h.to_string()).collect();
            let rows: Vec<Vec<String>> = runs.iter().map(cells).collect();
            let md = super::group_table::text_table(f, &header, &rows);
            format!("{md}\n{PER_RUN_LEGEND}\n")
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            if runs.is_empty() {
                w.serialize(RunSummary::default())?;
                let all = String::from_utf8(w.into_inner().context("writing CSV")?)?;
                return Ok(all.lines().next().unwrap_or_default().to_string() + "\n");
            }
            for r in runs {
                // The run's name is the one text cell: never a spreadsheet formula.
                let run = csv_cell(&r.run).into_owned();
                w.serialize(RunSummary { run, ..r.clone() })?;
            }
            String::from_utf8(w.into_inner().context("writing CSV")?)?
        }
        Format::Json => serde_json::to_string_pretty(runs)? + "\n",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_a_run_lacks_is_a_dash() {
        let full = RunSummary {
            run: "r".into(),
            test_sc_log_mse: Some(1.5e-3),
            identity_sc_log_mse: Some(2e-3),
            skill: Some(0.25),
            wall_seconds: Some(3.0),
            ..Default::default()
        };
        let t = table(&[full, RunSummary::default()]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].contains(" 1.500e-3  2.000e-3  +0.250 "), "{t}");
        assert!(
            lines[2].starts_with("-         0    -         -         -"),
            "{t}"
        );
    }
}
