//! `train-gnn --model linear-drift`: the closed-form baseline through the same engine, loader,
//! split, test protocol and result files as CLG-ODE, with skill > 0 on each of the three
//! generators (Rust `synth-connectome`, `scripts/synth_cohort.py`,
//! `scripts/synth_drift_cohort.py`: small change under large scan noise and flickering edges).

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn python_cohort(dir: &Path, script: &str, out: &str) {
    let o = std::process::Command::new("python3")
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("scripts")
                .join(script),
        )
        .args([
            "--out",
            out,
            "--subjects",
            "60",
            "--nodes",
            "40",
            "--seed",
            "0",
        ])
        .current_dir(dir)
        .output()
        .expect("python3 (scripts/setup.sh installs numpy)");
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn drift_run(dir: &Path, cohort: &str) -> Value {
    let sc = format!("{cohort}/sc");
    let morph = format!("{cohort}/morph");
    let table = format!("{cohort}/subject_info_sc.csv");
    let o = run_in(
        dir,
        &[
            "train-gnn",
            "--sc_dir",
            &sc,
            "--morph_root",
            &morph,
            "--subject_info_csv",
            &table,
            "--results_dir",
            "res",
            "--cv_fold",
            "0",
            "--model",
            "linear-drift",
            "--run-name",
            cohort,
        ],
    );
    assert!(o.status.success(), "{cohort}: {}", stderr(&o));
    let run = dir.join("res/runs").join(cohort);
    assert!(
        run.join("checkpoints/linear_drift_fold0_best.safetensors")
            .is_file()
    );
    let rows = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let row: Value = serde_json::from_str(rows.lines().next().unwrap()).unwrap();
    assert_eq!(row["model"], "linear-drift");
    assert!(row["val_skill"].as_f64().unwrap().is_finite(), "{row}");
    let results = json(&run.join("clg_ode_results.json"));
    assert_eq!(results["model"], "linear-drift");
    json(&run.join("test_metrics.json"))
}

#[test]
fn linear_drift_beats_the_identity_on_every_generator() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &[
            "synth-connectome",
            "--subjects",
            "60",
            "--nodes",
            "40",
            "--out",
            "rust",
            "--seed",
            "42",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    python_cohort(t.path(), "synth_cohort.py", "python");
    python_cohort(t.path(), "synth_drift_cohort.py", "drift");
    for cohort in ["rust", "python", "drift"] {
        let test = drift_run(t.path(), cohort);
        let skill = test["skill"]["skill"].as_f64().unwrap();
        let (model, identity) = (
            test["model"]["sc_log_mse"].as_f64().unwrap(),
            test["identity_baseline"]["sc_log_mse"].as_f64().unwrap(),
        );
        assert!(
            skill > 0.0 && model < identity,
            "{cohort}: skill {skill} (model {model}, identity {identity})"
        );
        assert!(
            (skill - (1.0 - model / identity)).abs() < 1e-9,
            "{cohort}: skill is 1 - model/identity"
        );
    }
    // The baseline's runs sit in the same comparison table as CLG-ODE's.
    let o = run_in(t.path(), &["compare", "res/runs/rust", "res/runs/drift"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o)
            .lines()
            .filter(|l| l.contains("res/runs/"))
            .count(),
        2
    );
}
