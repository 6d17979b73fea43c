//! The settings that tell runs of ours apart besides their model, preset and a sweep's varied
//! keys: every setting of `args.json` whose value differs between runs given by their
//! directories that those keys would pool (`--forecast sparse` beside the default, another
//! `--learning_rate`), so that runs trained by hand with other flags are never pooled as folds
//! of one configuration.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::{Run, find, group_value, read_json, text};

/// Settings that never tell configurations apart: where the run and its data are, which fold
/// and seed it is (the repeats of one configuration), how it ran (backend, device, ranks,
/// resumption, checkpoints, output), and what the trainer derived from the others.
const NOT_CONFIGURATION: &[&str] = &[
    "model_kind",
    "run_name",
    "run_dir",
    "results_dir",
    "sc_dir",
    "morph_root",
    "subject_info_csv",
    "cohort_fingerprint",
    "cv_fold",
    "folds",
    "seed",
    "resume_from",
    "resume",
    "porcelain",
    "backend",
    "device",
    "checkpoint_every",
    "world_size",
    "effective_batch_size",
    "deviations",
    "keep_checkpoints",
];

/// The leaf names of a settings object, in order, each once.
fn leaves(v: &Value, out: &mut Vec<String>) {
    if let Value::Object(m) = v {
        for (k, x) in m {
            if x.is_object() {
                leaves(x, out);
            } else if !out.contains(k) {
                out.push(k.clone());
            }
        }
    }
}

/// The settings (leaf names of `args.json`, read as `compare --group-by` reads them) whose
/// values differ between runs of ours, given by their directories, that `keys` (model, preset,
/// a sweep's varied keys) would put in one group, in the settings' order; [`NOT_CONFIGURATION`]
/// left out, and a setting some of them lack. What a preset or a sweep's variant sets follows
/// from the key that names it, so it is no key of its own.
pub(super) fn differing_settings(runs: &[Run], keys: &[String]) -> Vec<String> {
    let mut groups: BTreeMap<Vec<String>, Vec<Value>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.reference.is_none() && !r.task) {
        if let Some(settings) = read_json(&r.dir.args_json()) {
            let key = keys.iter().map(|k| group_value(r, k)).collect();
            groups.entry(key).or_default().push(settings);
        }
    }
    let mut names = Vec::new();
    for settings in groups.values() {
        leaves(&settings[0], &mut names);
    }
    names
        .into_iter()
        .filter(|n| !NOT_CONFIGURATION.contains(&n.as_str()))
        .filter(|n| {
            groups.values().any(|settings| {
                let values: Option<BTreeSet<String>> = settings
                    .iter()
                    .map(|s| find(s, n).map(|v| text(&v)))
                    .collect();
                values.is_some_and(|v| v.len() > 1)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_leaves_in_order_each_once() {
        let mut out = Vec::new();
        let v = json!({"a": 1, "drift": {"forecast": "dense", "a": 2}, "b": {"c": {"d": 3}}});
        leaves(&v, &mut out);
        assert_eq!(out, ["a", "forecast", "d"]);
    }
}
