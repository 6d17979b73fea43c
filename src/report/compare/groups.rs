//! The grouped view of `trainer compare`: which keys group by default (every configuration
//! apart), keys and metrics checked against what the runs have, the identity's row, runs that
//! cannot be read named under *missing*, a warning when a group pools configurations, and a
//! refusal when it pools cohorts (`--pool-cohorts` allows it: [`super::pooling`]).

use std::collections::{BTreeMap, BTreeSet};

use super::{CompareSettings, Run, RunStatus, group_value};
use crate::metrics::sc::ScMetrics;
use crate::outputs::group_table::{self, Format, Grouping};
use crate::outputs::result_files::is_error_metric;
use anyhow::{Result, bail};

/// Keys every run answers (besides a sweep's varied keys and any setting of `args.json`).
const NAMED_KEYS: &[&str] = &[
    "model", "preset", "variant", "fold", "seed", "source", "cohort",
];

/// Keys that repeat one configuration (another fold, another seed): never part of what tells
/// configurations apart.
const REPEATS: &[&str] = &["fold", "seed", "source"];

/// The metrics of the grouped view when `--metric` is not given.
const DEFAULT_METRICS: &[&str] = &["sc_log_mse", "skill", "sc_log_pearson"];
/// The exact Betti-curve distances of a run's test results (`test_metrics.json`).
const BETTI: &[&str] = &["betti0_l1", "betti1_l1"];

/// The grouped view: `group_by` (default: model, preset and what the sweeps varied besides
/// folds and seeds), `metrics` (default: [`DEFAULT_METRICS`]).
pub(super) fn grouped(runs: &[Run], s: &CompareSettings, f: Format) -> Result<()> {
    let (group_by, metrics) = (&s.group_by, &s.metrics);
    let metrics: Vec<String> = if metrics.is_empty() {
        DEFAULT_METRICS.iter().map(|m| m.to_string()).collect()
    } else {
        check_metrics(runs, metrics)?;
        metrics.to_vec()
    };
    let mut keys = if group_by.is_empty() {
        configuration_keys(runs)
    } else {
        check_keys(runs, group_by)?;
        group_by.to_vec()
    };
    let mixed =
        runs.iter().any(|r| r.reference.is_some()) && runs.iter().any(|r| r.reference.is_none());
    if mixed && !keys.iter().any(|k| k == "source") {
        keys.insert(0, "source".into());
    }
    warn_pooled(runs, &keys);
    let mut pools: BTreeMap<Vec<String>, Vec<&Run>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.done()) {
        let key = keys.iter().map(|k| group_value(r, k)).collect();
        pools.entry(key).or_default().push(r);
    }
    let apart = format!("keep them apart with --group-by {},cohort", keys.join(","));
    let pools: Vec<Vec<&Run>> = pools.into_values().collect();
    super::pooling::check_cohorts(&pools, s.pool_cohorts, &apart)?;
    let mut rows = Vec::new();
    let mut ungrouped = Vec::new();
    for r in runs {
        let key: Vec<String> = keys.iter().map(|k| group_value(r, k)).collect();
        let values = match r.status() {
            RunStatus::Done => Some(metrics.iter().map(|m| r.metric(m)).collect()),
            RunStatus::NoResults | RunStatus::Unreadable(_) if key.iter().any(|v| v == "?") => {
                ungrouped.push(r.label());
                continue;
            }
            _ => None,
        };
        rows.push(Grouping {
            name: r.label(),
            key,
            values,
        });
    }
    rows.extend(identity_rows(runs, &keys, &metrics));
    let table = group_table::grouped(&keys, &metrics, &rows);
    table.print(f)?;
    if let Some(out) = &s.frontier {
        super::frontier::draw(runs, &keys, &s.metrics, out)?;
    }
    let missing: usize = table.groups.iter().map(|g| g.missing.len()).sum();
    if missing > 0 {
        eprintln!(
            "[compare] {missing} run(s) without readable test results, named under `missing`"
        );
    }
    if !ungrouped.is_empty() {
        eprintln!(
            "[compare] missing, in no group (their group keys cannot be read): {}",
            ungrouped.join(" ")
        );
    }
    Ok(())
}

/// The keys that tell configurations apart: `model`, `preset`, then what the sweeps varied
/// besides folds and seeds (`variant`, grid keys), in order of first appearance, then any other
/// setting whose value differs between the runs ([`super::differing`]: `forecast` for runs of
/// `--forecast dense` and `sparse`).
pub(super) fn configuration_keys(runs: &[Run]) -> Vec<String> {
    let mut keys: Vec<String> = vec!["model".into(), "preset".into()];
    for r in runs {
        for k in r.varied.keys() {
            if !REPEATS.contains(&k.as_str()) && !keys.contains(k) {
                keys.push(k.clone());
            }
        }
    }
    for k in super::differing::differing_settings(runs, &keys) {
        // A sweep's varied key under its settings' name is there already.
        if !keys.contains(&k) && !runs.iter().any(|r| r.varied.contains_key(&k)) {
            keys.push(k);
        }
    }
    keys
}

/// Every key must have a value for at least one run; an unknown one is an error listing keys.
pub(super) fn check_keys(runs: &[Run], keys: &[String]) -> Result<()> {
    for key in keys {
        if runs.iter().all(|r| group_value(r, key) == "?") {
            let varied: BTreeSet<&str> = runs
                .iter()
                .flat_map(|r| r.varied.keys().map(String::as_str))
                .collect();
            let mut valid: Vec<&str> = NAMED_KEYS.to_vec();
            valid.extend(varied.into_iter().filter(|k| !NAMED_KEYS.contains(k)));
            bail!(
                "--group-by {key}: no run has a value for it; keys: {}, or any setting in a \
                 run's args.json (e.g. learning_rate)",
                valid.join(", ")
            );
        }
    }
    Ok(())
}

/// Every metric must be a name the runs can answer: one a finished run has a value for, or a
/// test metric's name (`sc_log_mse`, `skill`, their `identity_`, `forecast_only.` and `val_`
/// forms) that only some kinds of run carry. Anything else is an error listing the names.
fn check_metrics(runs: &[Run], metrics: &[String]) -> Result<()> {
    let done: Vec<&Run> = runs
        .iter()
        .filter(|r| r.status() == RunStatus::Done)
        .collect();
    let test_metric = |m: &str| {
        let m = m.strip_prefix("val_").unwrap_or(m);
        if let Some(base) = m.strip_prefix("skill_") {
            return is_error_metric(base)
                && (ScMetrics::NAMES.contains(&base) || BETTI.contains(&base));
        }
        let base = m
            .strip_prefix("identity_")
            .or_else(|| m.strip_prefix("forecast_only."))
            .unwrap_or(m);
        ScMetrics::NAMES.contains(&base)
            || ["skill", "pearson_gain"].contains(&base)
            || BETTI.contains(&base)
    };
    for m in metrics {
        if !test_metric(m) && done.iter().all(|r| r.metric(m).is_none()) {
            let mut known: BTreeSet<String> = done.iter().flat_map(|r| available(r)).collect();
            known.extend(ScMetrics::NAMES.iter().map(|n| n.to_string()));
            known.extend(["skill".into(), "pearson_gain".into()]);
            known.extend(BETTI.iter().map(|n| n.to_string()));
            bail!(
                "--metric {m}: no finished run has it; metrics: {}; identity_<metric> and \
                 forecast_only.<metric> of those; skill_<metric> of an error or distance \
                 (skill_ecc_l2, skill_betti0_l1: 1 − model / identity); or a column of \
                 metrics.jsonl at the best epoch (val_loss, val_skill, …)",
                known.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(())
}

/// The test metrics a finished run answers by name (`identity_<metric>`, `forecast_only.<metric>`
/// and the metrics.jsonl columns are named by the error message as patterns).
fn available(run: &Run) -> Vec<String> {
    run.dir
        .read_test_metrics()
        .map(|t| t.defined())
        .unwrap_or_default()
}

/// The identity forecast ("the next scan equals this one") as rows of its own: every finished
/// run's identity figures, keyed like the run but with `identity` for what names a
/// configuration (folds and sources stay apart). Runs of the same test subjects have the same
/// identity figures: duplicates count once.
fn identity_rows(runs: &[Run], keys: &[String], metrics: &[String]) -> Vec<Grouping> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for r in runs.iter().filter(|r| r.reference.is_none()) {
        if r.status() != RunStatus::Done {
            continue;
        }
        let values: Vec<Option<f64>> = metrics.iter().map(|m| identity_metric(r, m)).collect();
        if values.iter().all(Option::is_none) {
            continue;
        }
        let mut key: Vec<String> = keys
            .iter()
            .map(|k| {
                if REPEATS.contains(&k.as_str()) {
                    group_value(r, k)
                } else {
                    "identity".into()
                }
            })
            .collect();
        if !key.iter().any(|v| v == "identity") {
            key[0] = format!("{} (identity)", key[0]);
        }
        let bits: Vec<Option<u64>> = values.iter().map(|v| v.map(f64::to_bits)).collect();
        if seen.insert((key.clone(), bits)) {
            out.push(Grouping {
                name: format!("{} (identity)", r.label()),
                key,
                values: Some(values),
            });
        }
    }
    out
}

/// The identity's value of metric `m` in a run's test results: 0 for the skills (the identity
/// is their zero), `identity_<m>` otherwise.
fn identity_metric(run: &Run, m: &str) -> Option<f64> {
    match m {
        "skill" | "pearson_gain" => run.metric(m).map(|_| 0.0),
        m if m.starts_with("skill_") => run.metric(m).map(|_| 0.0),
        m if m.starts_with("identity_") => None,
        m => run.metric(&format!(
            "identity_{}",
            m.trim_start_matches("forecast_only.")
        )),
    }
}

/// Warns when a group pools runs of different configurations (a model with and without a
/// preset, two variants): its mean and sd then mix them.
fn warn_pooled(runs: &[Run], keys: &[String]) {
    let config_keys: Vec<String> = configuration_keys(runs)
        .into_iter()
        .filter(|k| !keys.contains(k))
        .collect();
    let mut groups: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status() == RunStatus::Done) {
        let key = keys.iter().map(|k| group_value(r, k)).collect();
        let config = config_keys
            .iter()
            .map(|k| format!("{k}={}", group_value(r, k)))
            .collect();
        groups.entry(key).or_default().insert(config);
    }
    for (key, configs) in groups.into_iter().filter(|(_, c)| c.len() > 1) {
        let differ: Vec<&str> = config_keys
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                configs
                    .iter()
                    .map(|c| &c[*i])
                    .collect::<BTreeSet<_>>()
                    .len()
                    > 1
            })
            .map(|(_, k)| k.as_str())
            .collect();
        eprintln!(
            "[compare] warning: the group {} pools {} configurations ({}): add --group-by {} to \
             keep them apart",
            key.join(" / "),
            configs.len(),
            configs
                .iter()
                .map(|c| c.join(" "))
                .collect::<Vec<_>>()
                .join("; "),
            differ.join(",")
        );
    }
}
