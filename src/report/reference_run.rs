//! Run directories of the reference's PyTorch trainer (`scripts/train_clg_ode.py` of
//! xsmilebook/sc_connectome_trajectories), read by `trainer compare` beside ours.
//!
//! The reference writes `<results_dir>/runs/<run_name>/` (the authors' scripts name it
//! `<base>/fold<k>`): `args.json` (its flat argparse namespace), `metrics.csv` (one row per fold
//! and epoch, 1-based epochs, a `fold` column) and, once finished, `clg_ode_results.json`:
//! `cv_folds` (per fold `fold`, `best_val_loss`, `best_monitor_metric`, `best_monitor`; no best
//! epoch), `best_model_path`, `test_loss` and `test_sc_metrics`. With `--cv_fold -1` every fold is
//! in one file, but only the best fold's model is tested. Neither an identity baseline nor a skill
//! is written. Python's `json` writes `NaN`/`Infinity`, read here as missing values.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::outputs::RunDir;
use crate::outputs::compare::RunSummary;

// The reference's run directory uses the names ours took from it (`args.json`, `metrics.csv`,
// `clg_ode_results.json`: [`RunDir`] names them); only its model files differ.
/// The reference's best model file of fold k: `clg_ode_fold<k>_best.pt`.
const BEST_PT_PREFIX: &str = "clg_ode_fold";
const BEST_PT_SUFFIX: &str = "_best.pt";

/// One reference run directory, read once.
pub(super) struct RefRun {
    args: Value,
    /// `None` while the run has not finished.
    results: Option<Value>,
    /// `metrics.csv`: the header and the rows.
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

/// One fold of a reference run: what `compare` counts as a run.
pub(super) struct RefFold {
    run: Rc<RefRun>,
    /// `None` for an unfinished run (its folds are not known yet).
    fold: Option<i64>,
}

/// Whether `dir` is a reference run: `args.json` with the reference's `clg_ode_results.json` or
/// `metrics.csv`, and neither file only ours write (`metrics.jsonl`, `test_metrics.json`).
pub(super) fn is_reference_run(dir: &Path) -> bool {
    let d = RunDir::new(dir);
    d.args_json().is_file()
        && (d.results_json().is_file() || d.metrics_csv().is_file())
        && !d.metrics_jsonl().exists()
        && !d.test_metrics_json().exists()
}

/// The `fold<k>` subdirectories of `dir` that are reference runs (the authors' layout
/// `runs/<base>/fold<k>`), in order.
pub(super) fn fold_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let k = e.file_name().to_str()?.strip_prefix("fold")?.parse().ok()?;
            Some((k, e.path()))
        })
        .filter(|(_, p)| is_reference_run(p))
        .collect();
    out.sort();
    out.into_iter().map(|(_, p)| p).collect()
}

/// Python's JSON: `NaN`, `Infinity` and `-Infinity` outside strings become `null`.
pub(super) fn parse_python_json(s: &str) -> serde_json::Result<Value> {
    let mut out = String::with_capacity(s.len());
    let (mut in_str, mut escaped) = (false, false);
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        if in_str {
            (in_str, escaped) = (escaped || c != '"', !escaped && c == '\\');
        } else if let Some(tok) = ["NaN", "-Infinity", "Infinity"]
            .into_iter()
            .find(|t| rest.starts_with(t))
        {
            out.push_str("null");
            rest = &rest[tok.len()..];
            continue;
        } else {
            in_str = c == '"';
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    serde_json::from_str(&out)
}

fn read_python_json(p: &Path) -> Result<Value> {
    let s = std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))?;
    parse_python_json(&s).with_context(|| {
        format!(
            "{}: not JSON, so not a results file of the reference's trainer",
            p.display()
        )
    })
}

/// Reads the reference run in `dir`: one [`RefFold`] per fold of its results file, or one
/// without a fold while it has none. A results file that is not the reference's is an error.
pub(super) fn read(dir: &Path) -> Result<Vec<RefFold>> {
    let d = RunDir::new(dir);
    let args = read_python_json(&d.args_json())?;
    let file = d.results_json();
    let results = if file.is_file() {
        Some(read_python_json(&file)?)
    } else {
        None
    };
    let folds: Vec<Option<i64>> = match &results {
        None => vec![None],
        Some(r) => {
            let Some(list) = r["cv_folds"].as_array() else {
                bail!(
                    "{}: no `cv_folds` list, so not a results file of the reference's trainer",
                    file.display()
                );
            };
            let ids: Option<Vec<i64>> = list.iter().map(|f| f["fold"].as_i64()).collect();
            let ids = ids
                .with_context(|| format!("{}: a cv_folds entry without `fold`", file.display()))?;
            if ids.is_empty() || !r["test_sc_metrics"].is_object() {
                bail!("{}: no folds or no `test_sc_metrics`", file.display());
            }
            ids.into_iter().map(Some).collect()
        }
    };
    let (header, rows) = read_csv(&d.metrics_csv())?;
    let run = Rc::new(RefRun {
        args,
        results,
        header,
        rows,
    });
    Ok(folds
        .into_iter()
        .map(|fold| RefFold {
            run: run.clone(),
            fold,
        })
        .collect())
}

/// `metrics.csv` (none: no rows); short rows, as a killed append leaves them, are kept.
fn read_csv(p: &Path) -> Result<(Vec<String>, Vec<Vec<String>>)> {
    if !p.is_file() {
        return Ok((Vec::new(), Vec::new()));
    }
    let mut r = csv::ReaderBuilder::new().flexible(true).from_path(p)?;
    let header = r.headers()?.iter().map(String::from).collect();
    let rows = r
        .records()
        .map(|rec| rec.map(|rec| rec.iter().map(String::from).collect()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("{}: not a CSV file", p.display()))?;
    Ok((header, rows))
}

impl RefFold {
    fn results(&self) -> Option<&Value> {
        self.run.results.as_ref()
    }

    fn entry(&self) -> Option<&Value> {
        let fold = self.fold?;
        self.results()?["cv_folds"]
            .as_array()?
            .iter()
            .find(|f| f["fold"].as_i64() == Some(fold))
    }

    /// The fold (`None` while the run has not finished).
    pub(super) fn fold(&self) -> Option<i64> {
        self.fold
    }

    /// Whether the run has finished (its test results are written).
    pub(super) fn done(&self) -> bool {
        self.fold.is_some()
    }

    /// Group value of `key`: `source`, `model` (the same model as our `clg-ode`), `fold`, or a
    /// key of `args.json` in either spelling.
    pub(super) fn group_value(&self, key: &str) -> Option<String> {
        match key {
            "source" => Some("reference".into()),
            "model" => Some("clg-ode".into()),
            "fold" => self
                .fold
                .or_else(|| self.run.args["cv_fold"].as_i64().filter(|f| *f >= 0))
                .map(|f| f.to_string()),
            _ => find(&self.run.args, key).map(|v| text(&v)),
        }
    }

    /// Whether this fold's model is the one the reference tested: its `best_model_path`
    /// (`…/clg_ode_fold<k>_best.pt`), else its rule (the lowest fold score, first).
    fn tested(&self) -> bool {
        let Some(r) = self.results() else {
            return false;
        };
        let from_path = r["best_model_path"].as_str().and_then(|p| {
            let name = Path::new(p).file_name()?.to_str()?;
            name.strip_prefix(BEST_PT_PREFIX)?
                .strip_suffix(BEST_PT_SUFFIX)?
                .parse::<i64>()
                .ok()
        });
        let tested = from_path.or_else(|| {
            let folds = r["cv_folds"].as_array()?;
            let score = |f: &Value| {
                let m = f["best_monitor"].as_f64().unwrap_or(f64::INFINITY);
                if higher_is_better(f["best_monitor_metric"].as_str()) {
                    -m
                } else {
                    m
                }
            };
            let best = folds
                .iter()
                .reduce(|a, b| if score(b) < score(a) { b } else { a })?;
            best["fold"].as_i64()
        });
        tested.is_some() && tested == self.fold
    }

    /// Metric `name` (the names of our runs): a test metric of the tested fold, else a column
    /// of the fold's best epoch in `metrics.csv`. The reference writes no identity baseline or
    /// skill: those are `None`, as are NaN and the 0.0 it writes for validation SC metrics in
    /// epochs where it computed none.
    pub(super) fn metric(&self, name: &str) -> Option<f64> {
        if name == "skill"
            || name == "pearson_gain"
            || name.starts_with("identity_")
            || name.starts_with("forecast_only.")
        {
            return None;
        }
        let test = self.results().filter(|_| self.tested()).and_then(|r| {
            r["test_sc_metrics"][name]
                .as_f64()
                .or_else(|| r[name].as_f64())
        });
        test.or_else(|| self.best_epoch_value(name))
            .filter(|v| v.is_finite())
    }

    /// This fold's line of the per-run table, named `run`: epochs and best epoch from
    /// `metrics.csv`, the test figures when this fold was the one tested; no identity
    /// baseline, skill, exact topology or seconds (the reference writes none).
    pub(super) fn summary(&self, run: &str) -> RunSummary {
        let col = |c: &str| self.run.header.iter().position(|h| h == c);
        let fold = self.fold.map(|f| f.to_string());
        let epochs = col("fold").map_or(0, |fc| {
            self.run
                .rows
                .iter()
                .filter(|r| r.get(fc).map(|f| f.trim()) == fold.as_deref())
                .count()
        });
        let tested = self.results().filter(|_| self.tested());
        let test = |k: &str| {
            tested
                .and_then(|r| r["test_sc_metrics"][k].as_f64())
                .filter(|v| v.is_finite())
        };
        RunSummary {
            run: run.to_string(),
            fold: self.fold,
            epochs,
            best_epoch: self
                .best_row()
                .and_then(|r| r.get(col("epoch")?)?.trim().parse().ok()),
            test_sc_log_mse: test("sc_log_mse"),
            test_pearson_sparse: test("sc_log_pearson_sparse"),
            ..RunSummary::default()
        }
    }

    fn best_epoch_value(&self, name: &str) -> Option<f64> {
        let row = self.best_row()?;
        let col = |c: &str| self.run.header.iter().position(|h| h == c);
        let value: f64 = row.get(col(name)?)?.trim().parse().ok()?;
        let epoch: i64 = row.get(col("epoch")?)?.trim().parse().ok()?;
        let args = &self.run.args;
        let sc_metric = name.starts_with("val_sc_") || name.starts_with("val_ecc_");
        if sc_metric {
            let every = args["val_sc_eval_every"].as_i64().unwrap_or(0);
            let monitor = args["early_stop_metric"].as_str().unwrap_or("val_loss");
            let needs_sc = monitor.starts_with("val_sc_") || monitor == "monitor_mse_plus_density";
            if !(needs_sc || (every > 0 && epoch % every == 0)) {
                return None;
            }
        }
        if name.ends_with("mask_auprc") && args["compute_mask_auprc"] == Value::Bool(false) {
            return None;
        }
        Some(value)
    }

    /// The fold's best epoch's row: the first row of the best monitor value, in the monitor's
    /// direction (the reference keeps a strictly better value only).
    fn best_row(&self) -> Option<&Vec<String>> {
        let fold = self.fold?.to_string();
        let col = |c: &str| self.run.header.iter().position(|h| h == c);
        let (fcol, mcol) = (col("fold")?, col("monitor_value")?);
        let higher = higher_is_better(self.entry()?["best_monitor_metric"].as_str());
        let mut best: Option<(f64, &Vec<String>)> = None;
        for row in &self.run.rows {
            if row.get(fcol).map(|f| f.trim()) != Some(fold.as_str()) {
                continue;
            }
            let Some(v) = row.get(mcol).and_then(|v| v.trim().parse::<f64>().ok()) else {
                continue;
            };
            let better = match best {
                None => v.is_finite(),
                Some((b, _)) => (higher && v > b) || (!higher && v < b),
            };
            if better {
                best = Some((v, row));
            }
        }
        best.map(|(_, r)| r)
    }
}

/// The reference's `_monitor_higher_is_better`.
fn higher_is_better(metric: Option<&str>) -> bool {
    matches!(
        metric,
        Some("val_sc_log_pearson_topk" | "val_sc_log_pearson_sparse")
    )
}

/// The value of `key` (either spelling) anywhere in a JSON object tree.
pub(super) fn find(v: &Value, key: &str) -> Option<Value> {
    let alt = key.replace('-', "_");
    match v {
        Value::Object(m) => m
            .get(&alt)
            .cloned()
            .or_else(|| m.values().find_map(|x| find(x, key))),
        _ => None,
    }
}

pub(super) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests;
