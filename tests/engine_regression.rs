//! Behaviour kept across refactors: fixed-seed CPU runs of both jobs write the same metrics rows
//! (every column but the timings) as the binary before the settings/engine/launcher rework
//! (commit e90522e), recorded in tests/fixtures/regression/ with the same command lines.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

const TIMING: [&str; 7] = [
    "img_per_s",
    "subjects_per_s",
    "seconds",
    "allreduce_seconds",
    "train_cpu_seconds",
    "train_cpu_seconds_per_item",
    "eval_seconds",
];

fn rows(text: &str) -> Vec<Vec<(String, Value)>> {
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v.as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| !TIMING.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect()
}

/// The run's rows equal the recorded ones, columns in the same order.
fn same_as_recorded(run: &Path, fixture: &str) {
    let recorded = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/regression")
            .join(fixture),
    )
    .unwrap();
    let now = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let (want, got) = (rows(&recorded), rows(&now));
    assert_eq!(want.len(), got.len(), "{fixture}: number of rows");
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let wk: Vec<&String> = w.iter().map(|(k, _)| k).collect();
        let gk: Vec<&String> = g.iter().map(|(k, _)| k).collect();
        assert_eq!(wk, gk, "{fixture} row {i}: columns");
        for ((k, a), (_, b)) in w.iter().zip(g) {
            assert_eq!(a, b, "{fixture} row {i} column {k}");
        }
    }
}

#[test]
fn mnist_rows_are_unchanged() {
    let t = tempfile::tempdir().unwrap();
    let data = fashion_dir();
    let o = run_in(
        t.path(),
        &[
            "train-mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--limit-train",
            "640",
            "--limit-test",
            "200",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--seed",
            "3",
            "--out",
            "run",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    same_as_recorded(&t.path().join("run"), "mnist.metrics.jsonl");
}

#[test]
fn gnn_rows_are_unchanged() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 12, 5);
    let data = [
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "res",
        "--batch_size",
        "4",
        "--max_epochs",
        "3",
    ];
    // The reference's default objective (topology loss, GradNorm) with small dimensions.
    let mut args = vec!["train-gnn"];
    args.extend(data);
    args.extend([
        "--cv_fold",
        "0",
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
        "--solver_steps",
        "2",
        "--val_sc_eval_every",
        "1",
        "--run-name",
        "default",
    ]);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    same_as_recorded(&t.path().join("res/runs/default"), "gnn.metrics.jsonl");

    // The shipped preset.
    let mut args = vec!["train-gnn"];
    args.extend(data);
    args.extend([
        "--cv_fold",
        "1",
        "--preset",
        "residual",
        "--run-name",
        "residual",
    ]);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    same_as_recorded(
        &t.path().join("res/runs/residual"),
        "gnn-residual.metrics.jsonl",
    );
}
