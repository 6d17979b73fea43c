//! `compare`'s degeneracy warnings (on standard error, after the table): each run's own (its
//! `finished.json`), a run whose forecast scores exactly as the identity forecast, and runs
//! whose test results are identical, with the settings that differ between them, which
//! therefore had no effect on the result.

use serde_json::Value;

use super::Run;
use crate::engine::degeneracy::{REL_TOL, identical};

/// The test metrics two runs must share to count as the same result.
const SAME: [&str; 2] = ["sc_log_mse", "skill"];

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
            let v: Option<Vec<f64>> = SAME.iter().map(|m| r.metric(m)).collect();
            Some((r, v?))
        })
        .collect();
    let mut grouped = vec![false; done.len()];
    for i in 0..done.len() {
        if grouped[i] {
            continue;
        }
        let same: Vec<usize> = (i..done.len())
            .filter(|&j| {
                !grouped[j] && (0..SAME.len()).all(|k| identical(&[done[i].1[k], done[j].1[k]]))
            })
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
        let what = if keys.is_empty() {
            "whatever differs between them".to_string()
        } else {
            keys.iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push(format!(
            "{} runs have identical test results ({} to {REL_TOL:e} relative): {}; {what} had no \
             effect on the result",
            same.len(),
            SAME.join(", "),
            names.join(", ")
        ));
    }
    out
}
