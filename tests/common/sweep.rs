//! What the sweep tests share: a tiny cohort with a spec over it, and `sweep status --json`.
#![allow(dead_code)]

use std::path::Path;

use serde_json::Value;

use crate::common::{run_in, stderr, stdout, synth_cohort};

/// A tiny cohort in `dir/cohort` and `dir/spec.toml`: train-gnn on it (1 epoch, small model),
/// `top` before the `[base]` table (`folds = [...]`), `tail` after it (`[grid]`, `[then]`, …).
pub fn setup_with(dir: &Path, top: &str, tail: &str) {
    synth_cohort(dir, 16, 12, 1);
    let c = dir.join("cohort");
    let spec = format!(
        "command = \"train-gnn\"\n{top}[base]\nsc_dir = \"{sc}\"\nmorph_root = \"{m}\"\n\
         subject_info_csv = \"{s}\"\nmax_epochs = 1\nlatent_dim = 8\nhidden_dim = 16\n\
         solver_steps = 2\n{tail}",
        sc = c.join("sc").display(),
        m = c.join("morph").display(),
        s = c.join("subject_info_sc.csv").display(),
    );
    std::fs::write(dir.join("spec.toml"), spec).unwrap();
}

/// `sweep status DIR --json` of the sweep `sweep` under `dir`.
pub fn status(dir: &Path, sweep: &str) -> Vec<Value> {
    let o = run_in(dir, &["sweep", "status", sweep, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str::<Value>(&stdout(&o))
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

pub fn states(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["state"].as_str().unwrap().to_string())
        .collect()
}

/// A test metric of a finished run directory.
pub fn test_metric(run: &Path, name: &str) -> f64 {
    let text = std::fs::read_to_string(run.join("test_metrics.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", run.display()));
    let v: Value = serde_json::from_str(&text).unwrap();
    v["model"][name].as_f64().unwrap()
}

/// `sweep plan spec.toml --out S --scheduler SCHEDULER [--throttle N]` in `dir`, which must
/// succeed; returns what it printed (the submit command).
pub fn plan(dir: &Path, scheduler: &str, throttle: Option<usize>) -> String {
    let throttle = throttle.map(|n| n.to_string());
    let mut args = vec![
        "sweep",
        "plan",
        "spec.toml",
        "--out",
        "S",
        "--scheduler",
        scheduler,
    ];
    if let Some(n) = &throttle {
        args.extend(["--throttle", n]);
    }
    let o = run_in(dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}
