//! `trainer compare RUN_DIR…`: the test results of several CLG-ODE runs side by side, each
//! against its identity baseline (the way the authors compare their variants), and one plot of
//! the validation skill per epoch of every run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::Value;

use super::metrics::MetricsFiles;

/// One run's line of the comparison.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub run: String,
    pub fold: Option<i64>,
    pub epochs: usize,
    pub best_epoch: Option<i64>,
    pub test_sc_log_mse: f64,
    pub identity_sc_log_mse: f64,
    pub skill: f64,
    pub test_pearson_sparse: f64,
    pub identity_pearson_sparse: f64,
    pub pearson_sparse_gain: f64,
    pub betti0_l1: Option<f64>,
    pub identity_betti0_l1: Option<f64>,
    pub betti1_l1: Option<f64>,
    pub identity_betti1_l1: Option<f64>,
    pub degree_pearson: Option<f64>,
    pub strength_pearson: Option<f64>,
    /// Σ over epochs of training and evaluation seconds.
    pub wall_seconds: f64,
    /// CPU seconds of the whole run when recorded, else of the training steps.
    pub cpu_seconds: f64,
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// Reads `dir/clg_ode_results.json` and `dir/metrics.jsonl`.
pub fn summarize(dir: &Path) -> Result<RunSummary> {
    let file = dir.join("clg_ode_results.json");
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "{}: cannot read it (a finished `trainer train-gnn` run directory has one)",
            file.display()
        )
    })?;
    let r: Value =
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", file.display()))?;
    let need = |path: &[&str]| {
        num(&r, path)
            .with_context(|| format!("{}: no number at {}", file.display(), path.join(".")))
    };
    let rows = MetricsFiles::new(dir).rows()?;
    let sum = |key: &str| -> f64 {
        rows.iter()
            .filter_map(|row| row.get(key).and_then(Value::as_f64))
            .sum()
    };
    let best_fold = r.get("best_fold").and_then(Value::as_i64);
    let fold_info = r.get("cv_folds").and_then(Value::as_array).and_then(|f| {
        f.iter()
            .find(|f| f.get("fold").and_then(Value::as_i64) == best_fold)
    });
    let exact = |who: &str, key: &str| num(&r, &["test_exact_topology", who, key]);
    Ok(RunSummary {
        run: dir.display().to_string(),
        fold: best_fold,
        epochs: rows.len(),
        best_epoch: fold_info.and_then(|f| f.get("best_epoch")?.as_i64()),
        test_sc_log_mse: need(&["test_sc_metrics", "sc_log_mse"])?,
        identity_sc_log_mse: need(&["test_identity_baseline_sc_metrics", "sc_log_mse"])?,
        skill: need(&["test_skill", "skill"])?,
        test_pearson_sparse: need(&["test_sc_metrics", "sc_log_pearson_sparse"])?,
        identity_pearson_sparse: need(&[
            "test_identity_baseline_sc_metrics",
            "sc_log_pearson_sparse",
        ])?,
        pearson_sparse_gain: need(&["test_skill", "pearson_sparse_gain"])?,
        betti0_l1: exact("model", "betti0_l1"),
        identity_betti0_l1: exact("identity_baseline", "betti0_l1"),
        betti1_l1: exact("model", "betti1_l1"),
        identity_betti1_l1: exact("identity_baseline", "betti1_l1"),
        degree_pearson: exact("model", "degree_pearson"),
        strength_pearson: exact("model", "strength_pearson"),
        wall_seconds: sum("seconds") + sum("eval_seconds"),
        cpu_seconds: num(&r, &["cpu_seconds"]).unwrap_or_else(|| sum("train_cpu_seconds")),
    })
}

/// The comparison table, one line per run; every model figure beside its identity figure.
pub fn table(runs: &[RunSummary]) -> String {
    let opt = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    let mut lines = vec![format!(
        "{:<4} {:>6} {:>4} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>11} {:>11} {:>6} {:>6} {:>8} {:>8}  run",
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
        "cpu_s"
    )];
    for s in runs {
        lines.push(format!(
            "{:<4} {:>6} {:>4} {:>9.3e} {:>9.3e} {:>+7.3} {:>7.4} {:>7.4} {:>+7.4} {:>11} {:>11} {:>6} {:>6} {:>8.1} {:>8.1}  {}",
            s.fold.map_or("-".into(), |f| f.to_string()),
            s.epochs,
            s.best_epoch.map_or("-".into(), |e| e.to_string()),
            s.test_sc_log_mse,
            s.identity_sc_log_mse,
            s.skill,
            s.test_pearson_sparse,
            s.identity_pearson_sparse,
            s.pearson_sparse_gain,
            format!("{} ({})", opt(s.betti0_l1, 1), opt(s.identity_betti0_l1, 1)),
            format!("{} ({})", opt(s.betti1_l1, 0), opt(s.identity_betti1_l1, 0)),
            opt(s.degree_pearson, 3),
            opt(s.strength_pearson, 3),
            s.wall_seconds,
            s.cpu_seconds,
            s.run
        ));
    }
    lines.join("\n") + "\n"
}

/// `trainer compare`: prints the table (or JSON) and, with `plot`, writes the validation skill
/// of every run per epoch.
pub fn run(runs: &[PathBuf], json: bool, plot: Option<&Path>) -> Result<()> {
    if runs.is_empty() {
        bail!("give at least one run directory");
    }
    let summaries = runs
        .iter()
        .map(|d| summarize(d))
        .collect::<Result<Vec<_>>>()?;
    if json {
        println!("{}", serde_json::to_string_pretty(&summaries)?);
    } else {
        print!("{}", table(&summaries));
        println!(
            "skill = 1 − mse/identity (> 0: better than \"the next scan equals this one\"); \
             r_sp = sc_log_pearson_sparse; β L1 = exact Betti-curve distance to the truth \
             (identity's in brackets)"
        );
    }
    if let Some(out) = plot {
        super::curves::plot_runs(runs, &["val_skill".to_string()], out)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
