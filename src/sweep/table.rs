//! Tables over runs: `trainer compare SWEEP_DIR|RUN_DIR… --group-by KEY[,KEY] --metric NAME…
//! --format table|md|csv|json`. Runs are grouped by the values of the keys (a varied setting of a
//! sweep, `variant`, `model`, `fold`, or any setting in a run's `args.json`); each metric gets
//! mean ± sd, min, max and n over the group (folds and seeds). A sweep task without results is
//! named as missing, not dropped silently. Run directories of the reference's PyTorch trainer
//! sit beside ours ([`super::reference_run`]): each fold counts as a run, and when both kinds are
//! compared a `source` column (`reference`, `trainer`) keeps them in separate rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::reference_run::{self, RefFold};
use super::{Manifest, run_dir};

/// How a table is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Md,
    Csv,
    Json,
}

/// One run: where, what varied, and whether it has results.
struct Run {
    dir: PathBuf,
    name: String,
    varied: BTreeMap<String, String>,
    /// One fold of a reference trainer's run; `None` for ours.
    reference: Option<RefFold>,
}

impl Run {
    fn ours(dir: PathBuf, name: String, varied: BTreeMap<String, String>) -> Self {
        Self {
            dir,
            name,
            varied,
            reference: None,
        }
    }

    fn done(&self) -> bool {
        match &self.reference {
            Some(r) => r.done(),
            None => self.dir.join("test_metrics.json").is_file(),
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
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
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

/// The runs of every input: a sweep's tasks, a run directory of ours, a reference run
/// directory (one run per fold), or a directory of reference `fold<k>` run directories.
fn runs(inputs: &[PathBuf]) -> Result<Vec<Run>> {
    let mut out = Vec::new();
    for p in inputs {
        let folds = reference_run::fold_dirs(p);
        if p.join("sweep.json").is_file() {
            let m = Manifest::read(p)?;
            for t in &m.tasks {
                out.push(Run::ours(run_dir(p, t), t.name.clone(), t.varied.clone()));
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
                        dir: dir.clone(),
                        varied: BTreeMap::new(),
                        reference: Some(f),
                    });
                }
            }
        } else if p.join("args.json").is_file() {
            out.push(Run::ours(
                p.clone(),
                p.display().to_string(),
                BTreeMap::new(),
            ));
        } else {
            bail!(
                "{}: neither a sweep (sweep.json) nor a run directory (args.json)",
                p.display()
            );
        }
    }
    Ok(out)
}

/// `key`'s value for `run`: what the sweep varied, else the run's model or settings.
fn group_value(run: &Run, key: &str) -> String {
    if let Some(v) = run.varied.get(key) {
        return v.clone();
    }
    if let Some(r) = &run.reference {
        return r.group_value(key).unwrap_or_else(|| "?".into());
    }
    let results = read_json(&run.dir.join("clg_ode_results.json"));
    match key {
        "source" => "trainer".into(),
        "model" => results
            .as_ref()
            .and_then(|r| r.get("model").map(text))
            .unwrap_or_else(|| "?".into()),
        "fold" => results
            .as_ref()
            .and_then(|r| r.get("cv_fold").map(text))
            .unwrap_or_else(|| "?".into()),
        _ => read_json(&run.dir.join("args.json"))
            .and_then(|a| find(&a, key))
            .map_or_else(|| "?".into(), |v| text(&v)),
    }
}

/// Metric `name` of a finished run: a test metric of the model (`sc_log_mse`), `skill`,
/// `pearson_gain`, `identity_<metric>`, `forecast_only.<metric>`, or a column of the best
/// epoch's metrics row (`val_mask_ratio`); `None` when the run has no results.
fn metric(dir: &Path, name: &str) -> Option<f64> {
    let test = read_json(&dir.join("test_metrics.json"))?;
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
        let results = read_json(&dir.join("clg_ode_results.json"))?;
        let fold = &results["best_fold"];
        let folds = results["cv_folds"].as_array()?;
        let info = folds
            .iter()
            .find(|f| &f["fold"] == fold)
            .or(folds.first())?;
        let best = info["best_epoch"].as_u64()?;
        let rows = std::fs::read_to_string(dir.join("metrics.jsonl")).ok()?;
        rows.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| {
                r["epoch"].as_u64() == Some(best)
                    && (r["fold"].is_null() || r["fold"] == info["fold"])
            })?[name]
            .as_f64()
    })
}

/// mean, sd (n − 1; NaN below 2), min, max.
fn stats(v: &[f64]) -> (f64, f64, f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let sd = if v.len() > 1 {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        f64::NAN
    };
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (mean, sd, min, max)
}

fn fmt(x: f64) -> String {
    if x.is_nan() {
        "N/A".into()
    } else if x != 0.0 && (x.abs() < 1e-3 || x.abs() >= 1e4) {
        format!("{x:.3e}")
    } else {
        format!("{x:.4}")
    }
}

/// `trainer compare` with groups.
pub fn compare(
    inputs: &[PathBuf],
    group_by: &[String],
    metrics: &[String],
    f: Format,
) -> Result<()> {
    let metrics: Vec<String> = if metrics.is_empty() {
        vec!["sc_log_mse".into(), "skill".into(), "sc_log_pearson".into()]
    } else {
        metrics.to_vec()
    };
    let runs = runs(inputs)?;
    let mut group_by = group_by.to_vec();
    let mixed =
        runs.iter().any(|r| r.reference.is_some()) && runs.iter().any(|r| r.reference.is_none());
    if mixed && !group_by.iter().any(|k| k == "source") {
        group_by.insert(0, "source".into());
    }
    let mut groups: BTreeMap<Vec<String>, (Vec<&Run>, Vec<&Run>)> = BTreeMap::new();
    for r in &runs {
        let key: Vec<String> = group_by.iter().map(|k| group_value(r, k)).collect();
        let entry = groups.entry(key).or_default();
        if r.done() {
            entry.0.push(r);
        } else {
            entry.1.push(r);
        }
    }
    let mut header: Vec<String> = group_by.to_vec();
    header.push("n".into());
    for m in &metrics {
        header.extend([
            format!("{m} mean ± sd"),
            format!("{m} min"),
            format!("{m} max"),
        ]);
    }
    header.push("missing".into());
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut records = Vec::new();
    for (key, (done, missing)) in &groups {
        let mut row = key.clone();
        row.push(done.len().to_string());
        let mut rec = json!({ "group": key, "n": done.len() });
        for m in &metrics {
            let values: Vec<f64> = done.iter().filter_map(|r| r.metric(m)).collect();
            if values.is_empty() {
                row.extend(["N/A".into(), "N/A".into(), "N/A".into()]);
                rec[m] = Value::Null;
                continue;
            }
            let (mean, sd, min, max) = stats(&values);
            let of = if values.len() < done.len() {
                format!(" (n={})", values.len())
            } else {
                String::new()
            };
            row.extend([
                format!("{} ± {}{of}", fmt(mean), fmt(sd)),
                fmt(min),
                fmt(max),
            ]);
            rec[m] = json!({ "mean": mean, "sd": if sd.is_nan() { Value::Null } else { json!(sd) },
                             "min": min, "max": max, "n": values.len() });
        }
        let names: Vec<String> = missing.iter().map(|r| r.name.clone()).collect();
        row.push(names.join(" "));
        rec["missing"] = json!(names);
        rows.push(row);
        records.push(rec);
    }
    match f {
        Format::Json => println!("{}", serde_json::to_string_pretty(&records)?),
        Format::Csv => {
            let mut w = csv::Writer::from_writer(std::io::stdout());
            w.write_record(&header)?;
            for r in &rows {
                w.write_record(r)?;
            }
            w.flush().context("writing CSV")?;
        }
        Format::Md => {
            println!("| {} |", header.join(" | "));
            println!("|{}", " --- |".repeat(header.len()));
            for r in &rows {
                println!("| {} |", r.join(" | "));
            }
        }
        Format::Table => {
            let widths: Vec<usize> = (0..header.len())
                .map(|i| {
                    rows.iter()
                        .map(|r| r[i].chars().count())
                        .chain([header[i].chars().count()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |cells: &[String]| -> String {
                cells
                    .iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c:<w$}"))
                    .collect::<Vec<_>>()
                    .join("  ")
            };
            println!("{}", line(&header).trim_end());
            for r in &rows {
                println!("{}", line(r).trim_end());
            }
        }
    }
    let missing: usize = groups.values().map(|g| g.1.len()).sum();
    if missing > 0 {
        eprintln!("[compare] {missing} run(s) without test results, named under `missing`");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_best_epoch_column_is_of_the_best_folds_best_epoch() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::fs::write(
            d.join("test_metrics.json"),
            r#"{"model": {"sc_log_mse": 1.5}}"#,
        )
        .unwrap();
        let results = json!({"best_fold": 1, "cv_folds": [
            {"fold": 0, "best_epoch": 1}, {"fold": 1, "best_epoch": 2}]});
        std::fs::write(d.join("clg_ode_results.json"), results.to_string()).unwrap();
        let rows =
            [(0, 1, 10.0), (0, 2, 20.0), (1, 1, 30.0), (1, 2, 40.0)].map(|(fold, epoch, v)| {
                json!({"fold": fold, "epoch": epoch, "val_loss": v}).to_string()
            });
        std::fs::write(d.join("metrics.jsonl"), rows.join("\n")).unwrap();
        assert_eq!(metric(d, "sc_log_mse"), Some(1.5));
        assert_eq!(metric(d, "val_loss"), Some(40.0));
        assert_eq!(metric(d, "skill"), None);
    }
}
