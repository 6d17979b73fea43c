//! `trainer eval-gnn RUN_DIR`: a finished run re-scored from its `args.json` and a checkpoint
//! reproduces the run's own test metrics, for CLG-ODE and the baselines; a run
//! directory without what it needs is one clear error, nothing written.

use crate::common;

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
///
/// Two processes of one binary on one machine with the same thread count, scoring the same
/// weights on the same subjects in the same batches: the same kernels in the same order, so
/// the values are the same bits in practice (measured: equal, with RAYON_NUM_THREADS=1 and 4;
/// `per_subject.csv` is even compared byte for byte below). 1e-6 is headroom should eval-gnn
/// ever batch differently (other GEMM shapes: f32 reassociation, ≈ 1e-7 relative on these
/// means). Nothing here compares across machines: both sides run on the same CPU.
fn same_metrics(run: &Value, eval: &Value, what: &str) {
    for key in ["model", "identity_baseline"] {
        for (name, want) in run[key].as_object().unwrap() {
            if want.is_null() {
                // Undefined (new-edge scores without the innovation module): undefined again.
                assert!(
                    eval[key][name].is_null(),
                    "{what} {key}.{name}: {}",
                    eval[key][name]
                );
                continue;
            }
            let (want, got) = (want.as_f64().unwrap(), eval[key][name].as_f64().unwrap());
            if want != got {
                eprintln!("{what} {key}.{name}: run {want}, eval-gnn {got}");
            }
            assert!(
                (want - got).abs() <= 1e-6 * want.abs().max(1e-9),
                "{what} {key}.{name}: run {want}, eval-gnn {got}"
            );
        }
    }
    assert_eq!(run["n_subjects"], eval["n_subjects"], "{what}");
}

/// eval-gnn's paired statistics against the identity (issue 34, item 1): n is the forecast
/// subjects of `per_subject.csv`, the mean their mean model − identity difference. The CSV holds
/// each f64 in its shortest round-trip form (the same bits), summed here in the same order: equal
/// to 1e-12 relative (a few ulps of headroom, nothing machine-dependent). The interval holds the
/// mean; the p-value is a probability (its computation is checked against scipy in
/// tests/sweep/compare_paired.rs).
fn paired_matches_the_rows(eval: &Path, what: &str) {
    let mut reader = csv::Reader::from_path(eval.join("per_subject.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let col = |n: &str| header.iter().position(|h| h == n).unwrap();
    let (f, m, i) = (
        col("forecast"),
        col("model_sc_log_mse"),
        col("identity_sc_log_mse"),
    );
    let d: Vec<f64> = reader
        .records()
        .map(|r| r.unwrap())
        .filter(|r| &r[f] == "1")
        .map(|r| r[m].parse::<f64>().unwrap() - r[i].parse::<f64>().unwrap())
        .collect();
    let p = &json(&eval.join("metrics.json"))["paired_vs_identity"]["sc_log_mse"];
    assert_eq!(p["n"].as_u64().unwrap() as usize, d.len(), "{what}: {p}");
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let got = p["mean"].as_f64().unwrap();
    assert!(
        (got - mean).abs() <= 1e-12 * mean.abs().max(1e-300),
        "{what}: {got} vs {mean}"
    );
    let (lo, hi) = (
        p["ci_low"].as_f64().unwrap(),
        p["ci_high"].as_f64().unwrap(),
    );
    assert!(lo <= got && got <= hi, "{what}: {p}");
    let pw = p["p_wilcoxon"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&pw), "{what}: {p}");
}

#[test]
fn eval_gnn_reproduces_the_runs_test_metrics() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 12, 9);
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
        paired_matches_the_rows(&eval, name);
        // The strata too, the baseline → 4-year forecasts of three-visit subjects included
        // (null for the models without a time input).
        let far = |p: &Path| json(p)["horizons"]["baseline_to_4year_skipping_2year"].clone();
        let (a, b) = (
            far(&run.join("strata.json")),
            far(&eval.join("strata.json")),
        );
        match name {
            "gcn" | "lstm" => assert!(a["model"].is_null() && b["model"].is_null(), "{name}"),
            _ => {
                let (x, y) = (
                    a["model"]["sc_log_mse"].as_f64().unwrap(),
                    b["model"]["sc_log_mse"].as_f64().unwrap(),
                );
                // As in `same_metrics`: equal in practice (measured), 1e-6 is headroom.
                if x != y {
                    eprintln!("{name}: strata {x} vs {y}");
                }
                assert!(
                    (x - y).abs() <= 1e-6 * x.abs().max(1e-9),
                    "{name}: {x} vs {y}"
                );
                assert!(a["n"].as_u64().unwrap() > 0, "{name}: {a}");
            }
        }
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

/// The innovation module's new-edge scores (precision and recall at K_new, AUPRC; the ported
/// function is checked against the reference's `_innovation_step` in the goldens) reach the test
/// JSON, `per_subject.csv` and eval-gnn on a cohort where edges appear between scans; the
/// identity and a run without the module leave them undefined (null, empty cells).
#[test]
fn new_edge_scores_with_the_innovation_module_and_null_without() {
    let t = tempfile::tempdir().unwrap();
    let o = std::process::Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/synth_drift_cohort.py"))
        .args([
            "--out",
            "cohort",
            "--subjects",
            "20",
            "--nodes",
            "30",
            "--seed",
            "0",
        ])
        .current_dir(t.path())
        .output()
        .expect("python3 (scripts/setup.sh installs numpy)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let base = ["--max_epochs", "2", "--fixed_support", "--residual_skip"];
    let mut with = base.to_vec();
    with.extend(["--innovation_enabled", "--new_sparse_warmup_epochs", "0"]);
    train(t.path(), "innovation", &with);
    train(t.path(), "plain", &base);
    let keys = [
        "new_edge_precision_at_knew",
        "new_edge_recall_at_knew",
        "new_edge_auprc",
    ];
    let run = t.path().join("res/runs/innovation");
    let test = json(&run.join("test_metrics.json"));
    for k in keys {
        let v = test["model"][k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k}: {test}"));
        assert!((0.0..=1.0).contains(&v), "{k} = {v}");
        assert!(test["identity_baseline"][k].is_null(), "identity {k}");
    }
    let mut csv = csv::Reader::from_path(run.join("per_subject.csv")).unwrap();
    let header: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    let col = header
        .iter()
        .position(|h| h == "model_new_edge_recall_at_knew")
        .unwrap();
    let cells: Vec<String> = csv.records().map(|r| r.unwrap()[col].to_string()).collect();
    let defined: Vec<f64> = cells
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| c.parse().unwrap())
        .collect();
    assert!(!defined.is_empty(), "{cells:?}");
    let mean = defined.iter().sum::<f64>() / defined.len() as f64;
    let want = test["model"]["new_edge_recall_at_knew"].as_f64().unwrap();
    // The cells are the run's f64 values (shortest round-trip, read back exactly), averaged
    // here as the run averages them: a few f64 ulps apart at most (≤ 1e-15 on values ≤ 1).
    assert!(
        (mean - want).abs() < 1e-12,
        "mean of rows {mean}, aggregate {want}"
    );
    let o = run_in(t.path(), &["eval-gnn", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    same_metrics(
        &test,
        &json(&run.join("eval-test-best/metrics.json")),
        "innovation",
    );
    let plain = json(&t.path().join("res/runs/plain/test_metrics.json"));
    for k in keys {
        assert!(
            plain["model"][k].is_null(),
            "without the module {k}: {plain}"
        );
    }
}
