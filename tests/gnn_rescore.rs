//! `trainer eval-gnn RUN_DIR`: a finished run re-scored from its `args.json` and a checkpoint
//! reproduces the run's own test metrics, for CLG-ODE and the baselines; a run
//! directory without what it needs is one clear error, nothing written.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn train(dir: &Path, name: &str, extra: &[&str]) {
    let mut args = vec![
        "train-gnn",
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "res",
        "--cv_fold",
        "1",
        "--run-name",
        name,
    ];
    args.extend(extra);
    let o = run_in(dir, &args);
    assert!(o.status.success(), "{name}: {}", stderr(&o));
}

/// Every metric of `eval` equals the run's test metric within 1e-6 (relative).
fn same_metrics(run: &Value, eval: &Value, what: &str) {
    for key in ["model", "identity_baseline"] {
        for (name, want) in run[key].as_object().unwrap() {
            let (want, got) = (want.as_f64().unwrap(), eval[key][name].as_f64().unwrap());
            assert!(
                (want - got).abs() <= 1e-6 * want.abs().max(1e-9),
                "{what} {key}.{name}: run {want}, eval-gnn {got}"
            );
        }
    }
    assert_eq!(run["n_subjects"], eval["n_subjects"], "{what}");
}

#[test]
fn eval_gnn_reproduces_the_runs_test_metrics() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &[
            "synth-connectome",
            "--subjects",
            "16",
            "--nodes",
            "12",
            "--out",
            "cohort",
            "--seed",
            "9",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    train(
        t.path(),
        "clg",
        &[
            "--max_epochs",
            "2",
            "--latent_dim",
            "8",
            "--hidden_dim",
            "16",
            "--solver_steps",
            "2",
            "--batch_size",
            "4",
        ],
    );
    train(t.path(), "drift", &["--model", "linear-drift"]);
    train(
        t.path(),
        "gcn",
        &["--model", "gcn", "--hidden_dim", "8", "--max_epochs", "2"],
    );
    train(
        t.path(),
        "lstm",
        &[
            "--model",
            "vector-lstm",
            "--latent_dim",
            "8",
            "--max_epochs",
            "2",
            "--learning_rate",
            "1e-3",
        ],
    );
    for name in ["clg", "drift", "gcn", "lstm"] {
        let run = t.path().join("res/runs").join(name);
        let o = run_in(t.path(), &["eval-gnn", run.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        let eval = run.join("eval-test-best");
        same_metrics(
            &json(&run.join("test_metrics.json")),
            &json(&eval.join("metrics.json")),
            name,
        );
        assert_eq!(
            std::fs::read_to_string(eval.join("per_subject.csv")).unwrap(),
            std::fs::read_to_string(run.join("per_subject.csv")).unwrap(),
            "{name}: per-subject rows"
        );
        assert!(eval.join("strata.json").is_file());
    }
    // The validation split of the fold, into another directory.
    let run = t.path().join("res/runs/clg");
    let o = run_in(
        t.path(),
        &[
            "eval-gnn",
            run.to_str().unwrap(),
            "--split",
            "val",
            "--checkpoint",
            "last",
            "--out",
            "val",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        json(&t.path().join("val/metrics.json"))["n_subjects"]
            .as_u64()
            .unwrap()
            > 0
    );

    // A run directory without checkpoints: one clear line, exit 1, nothing written.
    let empty = t.path().join("res/runs/empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::copy(run.join("args.json"), empty.join("args.json")).unwrap();
    let o = run_in(t.path(), &["eval-gnn", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no test results"), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        1,
        "something was written"
    );
}
