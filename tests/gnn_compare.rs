//! Forecasts against the identity: the exact topology in the test report, `trainer compare`
//! over two runs, the `residual` preset, and the second (Python) cohort generator.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn train(dir: &Path, cohort: &str, run: &str, extra: &[&str]) -> std::path::PathBuf {
    let sc = format!("{cohort}/sc");
    let morph = format!("{cohort}/morph");
    let table = format!("{cohort}/subject_info_sc.csv");
    let mut args = vec![
        "train-gnn",
        "--sc_dir",
        &sc,
        "--morph_root",
        &morph,
        "--subject_info_csv",
        &table,
        "--results_dir",
        "results",
        "--run_name",
        run,
        "--cv_fold",
        "0",
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
        "--solver_steps",
        "3",
    ];
    args.extend_from_slice(extra);
    let o = run_in(dir, &args);
    assert!(o.status.success(), "{run}: {}", stderr(&o));
    dir.join("results/runs").join(run)
}

#[test]
fn compare_two_runs_with_exact_topology() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &[
            "synth-connectome",
            "--subjects",
            "16",
            "--nodes",
            "20",
            "--out",
            "cohort",
            "--seed",
            "3",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let a = train(
        t.path(),
        "cohort",
        "residual",
        &["--preset", "residual", "--max_epochs", "3"],
    );
    let b = train(
        t.path(),
        "cohort",
        "original",
        &[
            "--max_epochs",
            "2",
            "--lambda_topo",
            "0",
            "--gradnorm_scope",
            "none",
        ],
    );

    // The test report has the exact topology of the model and of the identity.
    let test = json(&a.join("test_metrics.json"));
    let exact = &test["exact_topology"];
    assert_eq!(exact["thresholds"], 8);
    for side in ["model", "identity_baseline"] {
        for key in [
            "betti0_l1",
            "betti1_l1",
            "degree_pearson",
            "strength_pearson",
        ] {
            let v = exact[side][key].as_f64().unwrap();
            assert!(v.is_finite(), "{side}.{key} = {v}");
        }
    }
    // The preset's fixed support keeps the start visit's edges: its degrees follow the truth.
    assert!(
        exact["model"]["degree_pearson"].as_f64().unwrap() > 0.5,
        "{exact}"
    );

    // The table names both runs and shows each model figure beside its identity figure.
    let o = run_in(
        t.path(),
        &[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--plot",
            "skill.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(
        table.contains("identity") && table.contains("skill"),
        "{table}"
    );
    assert!(
        table.contains("runs/residual") && table.contains("runs/original"),
        "{table}"
    );
    let svg = std::fs::read_to_string(t.path().join("skill.svg")).unwrap();
    assert!(
        svg.contains("val_skill"),
        "the plot is of the validation skill"
    );

    let o = run_in(
        t.path(),
        &[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, dir, epochs) in [(&rows[0], &a, 3), (&rows[1], &b, 2)] {
        let results = json(&dir.join("clg_ode_results.json"));
        assert_eq!(row["epochs"], epochs);
        assert_eq!(
            row["test_sc_log_mse"],
            results["test_sc_metrics"]["sc_log_mse"]
        );
        assert_eq!(
            row["identity_sc_log_mse"],
            results["test_identity_baseline_sc_metrics"]["sc_log_mse"]
        );
        let (m, i) = (
            row["test_sc_log_mse"].as_f64().unwrap(),
            row["identity_sc_log_mse"].as_f64().unwrap(),
        );
        assert!((row["skill"].as_f64().unwrap() - (1.0 - m / i)).abs() < 1e-12);
        assert_eq!(
            row["betti0_l1"],
            results["test_exact_topology"]["model"]["betti0_l1"]
        );
        assert!(row["cpu_seconds"].as_f64().unwrap() > 0.0);
        assert!(row["wall_seconds"].as_f64().unwrap() > 0.0);
    }

    // A directory that is not a finished run is an error naming the file.
    let o = run_in(t.path(), &["compare", "cohort"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("clg_ode_results.json"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn the_preset_resolves_and_flags_override_it() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &[
            "train-gnn",
            "--sc_dir",
            "sc",
            "--morph_root",
            "morph",
            "--subject_info_csv",
            "s.csv",
            "--results_dir",
            "results",
            "--preset",
            "residual",
            "--learning_rate",
            "0.01",
            "--print-config",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg: toml::Table = stdout(&o).parse().expect("--print-config prints TOML");
    let flat: toml::Table = cfg
        .values()
        .filter_map(|v| v.as_table())
        .flat_map(|t| t.clone())
        .chain(cfg.clone())
        .collect();
    assert_eq!(flat["fixed_support"].as_bool(), Some(true));
    assert_eq!(flat["residual_skip"].as_bool(), Some(true));
    assert_eq!(flat["residual_scale_init"].as_float(), Some(0.0));
    assert_eq!(
        flat["learning_rate"].as_float(),
        Some(0.01),
        "the flag wins"
    );
}

#[test]
fn the_python_generator_writes_a_cohort_the_trainer_reads() {
    let t = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/synth_cohort.py");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .args([
            "--out",
            "py",
            "--subjects",
            "14",
            "--nodes",
            "24",
            "--seed",
            "2",
        ])
        .current_dir(t.path())
        .output()
        .expect("python3 (with numpy: scripts/setup.sh installs it)");
    assert!(o.status.success(), "{}", stderr(&o));
    let summary = json(&t.path().join("py/summary.json"));
    assert_eq!(summary["subjects"], 14);
    assert!(summary["oracle_skill"].as_f64().unwrap() > 0.0, "{summary}");
    let run = train(
        t.path(),
        "py",
        "py",
        &["--preset", "residual", "--max_epochs", "2"],
    );
    let results = json(&run.join("clg_ode_results.json"));
    assert_eq!(results["n_subjects"], 14);
    assert!(
        results["test_skill"]["skill"].as_f64().unwrap().is_finite(),
        "{results}"
    );
}
