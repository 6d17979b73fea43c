//! `trainer compare` over every kind of input.

use super::*;
use crate::metrics::{ScMetrics, Skill};
use crate::outputs::RunDir;
use crate::outputs::result_files::examples;
use crate::sweep::state;
use serde_json::json;
use std::path::Path;

#[test]
fn a_best_epoch_column_is_of_the_best_folds_best_epoch() {
    let t = tempfile::tempdir().unwrap();
    let d = &RunDir::new(t.path());
    let sc = ScMetrics {
        sc_log_mse: 1.5,
        ..ScMetrics::undefined()
    };
    let none = ScMetrics::undefined();
    let test = examples::test_metrics(sc, none, examples::no_skill());
    crate::files::write_json(&d.test_metrics_json(), &test).unwrap();
    let results = examples::results(
        "clg-ode",
        &[(0, 1), (1, 2)],
        1,
        (sc, none, test.metrics.skill),
    );
    crate::files::write_json(&d.results_json(), &results).unwrap();
    let rows = [(0, 1, 10.0), (0, 2, 20.0), (1, 1, 30.0), (1, 2, 40.0)]
        .map(|(fold, epoch, v)| json!({"fold": fold, "epoch": epoch, "val_loss": v}).to_string());
    std::fs::write(d.metrics_jsonl(), rows.join("\n")).unwrap();
    assert_eq!(runs::metric(d, "sc_log_mse"), Some(1.5));
    assert_eq!(runs::metric(d, "val_loss"), Some(40.0));
    assert_eq!(runs::metric(d, "skill"), None);
}

/// A finished run of ours with test figures `mse` (identity 2 × mse) in `dir`.
fn finished(dir: &RunDir, mse: f64) {
    std::fs::create_dir_all(dir.path()).unwrap();
    dir.write_args(&json!({"settings": {"lr": 1}})).unwrap();
    let sc = |m: f64| ScMetrics {
        sc_log_mse: m,
        sc_log_pearson_sparse: 0.5,
        ..ScMetrics::undefined()
    };
    let skill = Skill {
        skill: 0.5,
        pearson_sparse_gain: 0.0,
        ..examples::no_skill()
    };
    let test = examples::test_metrics(sc(mse), sc(2.0 * mse), skill);
    crate::files::write_json(&dir.test_metrics_json(), &test).unwrap();
    let results = examples::results("clg-ode", &[(0, 1)], 0, (sc(mse), sc(2.0 * mse), skill));
    crate::files::write_json(&dir.results_json(), &results).unwrap();
}

#[test]
fn the_view_follows_the_flags_not_the_inputs() {
    let mut s = CompareSettings {
        runs: vec!["SWEEP".into()],
        json: true,
        plot: Some("p.svg".into()),
        ..Default::default()
    };
    assert!(!s.grouped());
    s.format = Some(Format::Md);
    assert!(s.grouped());
    s.format = None;
    s.metrics = vec!["skill".into()];
    assert!(s.grouped());
    s.metrics.clear();
    s.group_by = vec!["fold".into()];
    assert!(s.grouped());
}

#[test]
fn one_expansion_gives_a_sweeps_tasks_our_runs_and_the_references_folds() {
    let t = tempfile::tempdir().unwrap();
    let sweep = t.path().join("S");
    std::fs::create_dir(&sweep).unwrap();
    let task = |i: usize, name: &str| json!({"index": i, "name": name, "varied": {"lr": i.to_string()}, "flags": {}});
    crate::files::write_json(
        &state::manifest_path(&sweep),
        &json!({"command": "train-gnn", "spec": "s.toml", "scheduler": "local",
                "throttle": 0, "tasks": [task(0, "a"), task(1, "b")]}),
    )
    .unwrap();
    finished(&RunDir::new(sweep.join("runs/a")), 1e-3);
    let ours = RunDir::new(t.path().join("ours"));
    finished(&ours, 2e-3);
    let reference =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference-run/runs/clg_ode_ref");
    let runs = runs::read(&[sweep.clone(), ours.path().into(), reference], &[]).unwrap();
    assert_eq!(
        runs.len(),
        5,
        "two tasks, one run of ours, two reference folds"
    );

    // Per run: a task without results is missing; the reference's folds have no identity.
    let (lines, missing) = per_run_lines(&runs).unwrap();
    assert_eq!(missing, ["b"]);
    assert_eq!(lines.len(), 4);
    assert_eq!(lines[0].test_sc_log_mse, Some(1e-3));
    assert_eq!(lines[1].identity_sc_log_mse, Some(4e-3));
    assert!(lines[2].identity_sc_log_mse.is_none() && lines[2].skill.is_none());
    assert!(lines[2].epochs > 0 && lines[2].best_epoch.is_some());
    assert_eq!(
        lines.iter().filter(|l| l.test_sc_log_mse.is_some()).count(),
        4,
        "each reference fold dir tested its own fold"
    );

    // Grouped: the same runs, `source` keeps the two implementations apart.
    assert_eq!(group_value(&runs[0], "lr"), "0");
    assert_eq!(group_value(&runs[2], "lr"), "1");
    assert_eq!(group_value(&runs[2], "source"), "trainer");
    assert_eq!(group_value(&runs[3], "source"), "reference");

    // A run named on the command line must have finished; a non-run names what it lacks.
    std::fs::remove_file(ours.results_json()).unwrap();
    let e = per_run_lines(&runs).unwrap_err().to_string();
    assert!(e.contains("clg_ode_results.json"), "{e}");
    let e = runs::read(&[t.path().join("nothing")], &[])
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("clg_ode_results.json") && e.contains("sweep.json"),
        "{e}"
    );
}
