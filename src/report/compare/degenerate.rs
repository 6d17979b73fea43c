//! `compare`'s degeneracy warnings (on standard error, after the table): each run's own (its
//! `finished.json`), a run whose forecast scores exactly as the identity forecast, a varied
//! setting (a grid axis) with no effect on any run, and runs whose test results are identical,
//! with the settings that differ between them, which therefore had no effect on the result
//! (or the `--eb-fallback` that made a run's forecasts eb-drift's, said per run).

use std::collections::BTreeMap;

use serde_json::Value;

use super::Run;
use crate::engine::degeneracy::{REL_TOL, identical};

/// The test metrics two runs must share to count as the same result: the log-domain error and
/// skill every run has, and the topology columns where both runs have them (two forecasts can
/// share a dense forecast's log-MSE and differ in the graph scored for topology:
/// `--forecast dense` against `graph`).
const SAME: [&str; 5] = ["sc_log_mse", "skill", "ecc_l2", "strength_mae", "betti0_l1"];
/// How many of [`SAME`] a run must have.
const REQUIRED: usize = 2;

/// Whether two runs' [`SAME`] values (NaN: the run has none) are one result: each metric
/// identical, or missing from both.
fn same_result(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x.is_nan() && y.is_nan()) || identical(&[*x, *y]))
}

/// [`SAME`] as a warning names it.
fn compared() -> String {
    format!(
        "{} and, where both have them, {}",
        SAME[..REQUIRED].join(", "),
        SAME[REQUIRED..].join(", ")
    )
}

/// Whether run `r`'s forecasts are eb-drift's (`train-gnn --eb-fallback` took the fallback).
fn fell_back(r: &Run) -> bool {
    r.reference.is_none()
        && r.dir
            .read_test_metrics()
            .is_ok_and(|t| t.eb_fallback.is_some_and(|f| f.used))
}

/// The warnings of `runs`, one line each.
pub(super) fn warnings(runs: &[Run]) -> Vec<String> {
    let mut out = Vec::new();
    for r in runs.iter().filter(|r| r.reference.is_none()) {
        let finished = crate::outputs::run_files::read_json::<Value>(&r.dir.finished_json()).ok();
        let own = finished
            .as_ref()
            .and_then(|v| v["warnings"].as_array().cloned());
        for w in own.unwrap_or_default() {
            if let Value::String(w) = w {
                out.push(format!("{}: {w}", r.name));
            }
        }
    }
    for r in runs.iter().filter(|r| fell_back(r)) {
        out.push(format!(
            "{}: its forecasts are eb-drift's (--eb-fallback: the network did not beat eb-drift \
             on the validation subjects; test_metrics.json's eb_fallback has both skills)",
            r.name
        ));
    }
    for r in runs.iter().filter(|r| r.done()) {
        if let (Some(m), Some(i)) = (r.metric("sc_log_mse"), r.metric("identity_sc_log_mse"))
            && identical(&[m, i])
        {
            out.push(format!(
                "{}: its forecast scores exactly as the identity forecast (sc_log_mse {m}): the \
                 model returns the start scan, so its training and settings had no effect on \
                 the result; check the preset or model (a residual that stays at zero, a \
                 fallback taken)",
                r.name
            ));
        }
    }
    let done: Vec<(&Run, Vec<f64>)> = runs
        .iter()
        .filter(|r| r.done())
        .filter_map(|r| {
            let v: Option<Vec<f64>> = SAME[..REQUIRED].iter().map(|m| r.metric(m)).collect();
            let mut v = v?;
            v.extend(
                SAME[REQUIRED..]
                    .iter()
                    .map(|m| r.metric(m).unwrap_or(f64::NAN)),
            );
            Some((r, v))
        })
        .collect();
    let items: Vec<(&BTreeMap<String, String>, &[f64])> = done
        .iter()
        .map(|(r, v)| (&r.varied, v.as_slice()))
        .collect();
    let idle = no_effect_axes(&items);
    for (key, comparisons) in &idle {
        if key == "fold" || key == "seed" {
            out.push(format!(
                "the results are identical across every {key} in all {comparisons} \
                 comparison(s) ({} to {REL_TOL:e} relative): another {key} changed nothing; check \
                 that the data differ between them and that the model is not a constant",
                compared()
            ));
            continue;
        }
        out.push(format!(
            "{key} had no effect on any run: the runs that differ only in {key} have identical \
             test results ({} to {REL_TOL:e} relative) in all {comparisons} comparison(s); drop \
             it from the sweep, or check that the model reads it (a flag the preset or model \
             ignores, a phase that never starts)",
            compared()
        ));
    }
    let mut grouped = vec![false; done.len()];
    for i in 0..done.len() {
        if grouped[i] {
            continue;
        }
        let same: Vec<usize> = (i..done.len())
            .filter(|&j| !grouped[j] && same_result(&done[i].1, &done[j].1))
            .collect();
        if same.len() < 2 {
            continue;
        }
        for &j in &same {
            grouped[j] = true;
        }
        let names: Vec<&str> = same.iter().map(|&j| done[j].0.name.as_str()).collect();
        let keys: Vec<&String> = done[i]
            .0
            .varied
            .keys()
            .filter(|k| {
                same.iter()
                    .any(|&j| done[j].0.varied.get(*k) != done[i].0.varied.get(*k))
            })
            .collect();
        if !keys.is_empty() && keys.iter().all(|k| idle.contains_key(k.as_str())) {
            continue; // said once above, for the whole axis
        }
        let what = if keys.is_empty() {
            "whatever differs between them".to_string()
        } else {
            keys.iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let fallen: Vec<&str> = same
            .iter()
            .filter(|&&j| fell_back(done[j].0))
            .map(|&j| done[j].0.name.as_str())
            .collect();
        let why = if fallen.is_empty() {
            format!("{what} had no effect on the result")
        } else {
            format!(
                "{} wrote eb-drift's forecasts (--eb-fallback), which is why",
                fallen.join(", ")
            )
        };
        out.push(format!(
            "{} runs have identical test results ({} to {REL_TOL:e} relative): {}; {why}",
            same.len(),
            compared(),
            names.join(", ")
        ));
    }
    out
}

/// The varied settings with no effect on any run: for each key, the runs are grouped by every
/// other varied setting; a key is idle when at least one group holds two or more of its values
/// and every such group's results are identical. Returns key → the number of such groups.
fn no_effect_axes(items: &[(&BTreeMap<String, String>, &[f64])]) -> BTreeMap<String, usize> {
    let keys: std::collections::BTreeSet<&String> =
        items.iter().flat_map(|(v, _)| v.keys()).collect();
    let mut out = BTreeMap::new();
    for key in keys {
        let mut groups: BTreeMap<Vec<(&String, &String)>, Vec<usize>> = BTreeMap::new();
        for (i, (varied, _)) in items.iter().enumerate() {
            let context: Vec<(&String, &String)> =
                varied.iter().filter(|(k, _)| *k != key).collect();
            groups.entry(context).or_default().push(i);
        }
        let mut compared = 0;
        let mut idle = true;
        for members in groups.values() {
            let values: std::collections::BTreeSet<Option<&String>> =
                members.iter().map(|&i| items[i].0.get(key)).collect();
            if values.len() < 2 {
                continue;
            }
            compared += 1;
            let first = items[members[0]].1;
            let same = members.iter().all(|&i| same_result(items[i].1, first));
            if !same {
                idle = false;
                break;
            }
        }
        if idle && compared > 0 {
            out.insert(key.clone(), compared);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_result_needs_every_metric_both_runs_have() {
        let nan = f64::NAN;
        // The same dense log-MSE and skill, another graph for topology: two results.
        let dense = [0.0117, 0.378, 32.0, 7.5, 16.2];
        let graph = [0.0117, 0.378, 30.5, 8.4, 8.5];
        assert!(!same_result(&dense, &graph));
        assert!(same_result(&dense, &dense.map(|v| v * (1.0 + 1e-8))));
        // Runs without the topology columns (older files) compare on what they have.
        assert!(same_result(
            &[0.1, 0.2, nan, nan, nan],
            &[0.1, 0.2, nan, nan, nan]
        ));
        // One run has a value the other lacks: not shown to be one result.
        assert!(!same_result(
            &[0.1, 0.2, 3.0, nan, nan],
            &[0.1, 0.2, nan, nan, nan]
        ));
    }

    fn varied(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn an_axis_is_idle_only_when_every_comparison_along_it_is_identical() {
        // pw × lr × fold: pw changes nothing anywhere; lr changes fold 1's result.
        let mut runs = Vec::new();
        for pw in ["1", "3"] {
            for lr in ["0.001", "0.01"] {
                for fold in ["0", "1"] {
                    let score = match (lr, fold) {
                        ("0.01", "1") => vec![0.5, 0.2],
                        (_, "1") => vec![0.4, 0.3],
                        _ => vec![0.3, 0.1],
                    };
                    runs.push((varied(&[("pw", pw), ("lr", lr), ("fold", fold)]), score));
                }
            }
        }
        let items: Vec<(&BTreeMap<String, String>, &[f64])> =
            runs.iter().map(|(v, s)| (v, s.as_slice())).collect();
        let idle = no_effect_axes(&items);
        assert_eq!(idle.get("pw"), Some(&4), "{idle:?}");
        assert!(!idle.contains_key("lr"), "lr matters on fold 1: {idle:?}");
        assert!(!idle.contains_key("fold"), "{idle:?}");
        // One run with another pw score: pw is no longer idle.
        runs[0].1 = vec![0.31, 0.1];
        let items: Vec<(&BTreeMap<String, String>, &[f64])> =
            runs.iter().map(|(v, s)| (v, s.as_slice())).collect();
        assert!(!no_effect_axes(&items).contains_key("pw"));
        // Nothing to compare along an axis with one value: not idle.
        let one = [
            varied(&[("pw", "1"), ("fold", "0")]),
            varied(&[("pw", "1"), ("fold", "1")]),
        ];
        let items: Vec<(&BTreeMap<String, String>, &[f64])> =
            one.iter().map(|v| (v, [0.1, 0.2].as_slice())).collect();
        assert!(!no_effect_axes(&items).contains_key("pw"));
    }
}
