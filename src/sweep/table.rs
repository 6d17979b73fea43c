//! Tables over runs: `trainer compare SWEEP_DIR|RUN_DIR… --group-by KEY[,KEY] --metric NAME…
//! --format table|md|csv|json`. Runs are grouped by the values of the keys (a varied setting of a
//! sweep, `variant`, `model`, `fold`, or any setting in a run's `args.json`); each metric gets
//! mean ± sd, min, max and n over the group (folds and seeds). A sweep task without results is
//! named as missing, not dropped silently.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

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
}

fn read_json(p: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

/// The value of `key` (either spelling) anywhere in a JSON object tree.
fn find(v: &Value, key: &str) -> Option<Value> {
    let alt = key.replace('-', "_");
    match v {
        Value::Object(m) => m
            .get(&alt)
            .cloned()
            .or_else(|| m.values().find_map(|x| find(x, key))),
        _ => None,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The runs of every input: a sweep's tasks, or a run directory.
fn runs(inputs: &[PathBuf]) -> Result<Vec<Run>> {
    let mut out = Vec::new();
    for p in inputs {
        if p.join("sweep.json").is_file() {
            let m = Manifest::read(p)?;
            for t in &m.tasks {
                out.push(Run {
                    dir: run_dir(p, t),
                    name: t.name.clone(),
                    varied: t.varied.clone(),
                });
            }
        } else if p.join("args.json").is_file() {
            out.push(Run {
                dir: p.clone(),
                name: p.display().to_string(),
                varied: BTreeMap::new(),
            });
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
    let results = read_json(&run.dir.join("clg_ode_results.json"));
    match key {
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
        let best = results["cv_folds"][0]["best_epoch"].as_u64()?;
        let rows = std::fs::read_to_string(dir.join("metrics.jsonl")).ok()?;
        rows.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["epoch"].as_u64() == Some(best))?[name]
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
    let mut groups: BTreeMap<Vec<String>, (Vec<&Run>, Vec<&Run>)> = BTreeMap::new();
    for r in &runs {
        let key: Vec<String> = group_by.iter().map(|k| group_value(r, k)).collect();
        let entry = groups.entry(key).or_default();
        if r.dir.join("test_metrics.json").is_file() {
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
            let values: Vec<f64> = done.iter().filter_map(|r| metric(&r.dir, m)).collect();
            if values.is_empty() {
                row.extend(["N/A".into(), "N/A".into(), "N/A".into()]);
                rec[m] = Value::Null;
                continue;
            }
            let (mean, sd, min, max) = stats(&values);
            row.extend([format!("{} ± {}", fmt(mean), fmt(sd)), fmt(min), fmt(max)]);
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
