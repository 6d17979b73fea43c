//! `train-gnn --model linear-drift`: the closed-form baseline through the same engine, loader,
//! split, test protocol and result files as CLG-ODE, with skill > 0 on each of the three
//! generators (Rust `synth-connectome`, `scripts/synth_cohort.py`,
//! `scripts/synth_drift_cohort.py`: small change under large scan noise and flickering edges);
//! the reference's `gcn` and `vector-lstm` baselines train through it too, from the authors'
//! own submit-script command lines.

use crate::common;

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
        // The run computed the skill from these two f64 values with this formula: equal but
        // for an ulp or two (≈ 1e-16), on any CPU (no sums, correctly rounded f64 division).
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

#[test]
fn per_subject_rows_average_to_the_test_metrics_and_strata_name_thresholds() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &[
            "synth-connectome",
            "--subjects",
            "40",
            "--nodes",
            "16",
            "--out",
            "rust",
            "--seed",
            "7",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let test = drift_run(t.path(), "rust");
    let run = t.path().join("res/runs/rust");
    let mut csv = csv::Reader::from_path(run.join("per_subject.csv")).unwrap();
    let header: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    let rows: Vec<Vec<String>> = csv
        .records()
        .map(|r| r.unwrap().iter().map(String::from).collect())
        .collect();
    assert_eq!(rows.len() as u64, test["n_subjects"].as_u64().unwrap());
    let mut checked = 0;
    // The SC metrics (`model`, `identity_baseline`), then the exact Betti-curve distances
    // (`exact_topology`'s), whose rows `compare --against identity` pairs.
    let exact = &test["exact_topology"];
    let betti = |side: &Value| {
        let pick = ["betti0_l1", "betti1_l1"].map(|k| (k.to_string(), side[k].clone()));
        Value::Object(pick.into_iter().collect())
    };
    let sides = [
        ("model", test["model"].clone()),
        ("identity", test["identity_baseline"].clone()),
        ("model", betti(&exact["model"])),
        ("identity", betti(&exact["identity_baseline"])),
    ];
    for (side, values) in &sides {
        for (name, want) in values.as_object().unwrap() {
            let col = header
                .iter()
                .position(|h| *h == format!("{side}_{name}"))
                .unwrap_or_else(|| panic!("no column {side}_{name}"));
            // Undefined values (new-edge scores without the innovation module) are empty
            // cells, and null in the aggregate; means are over the defined ones.
            let defined: Vec<f64> = rows
                .iter()
                .filter(|r| !r[col].is_empty())
                .map(|r| r[col].parse::<f64>().unwrap())
                .collect();
            if defined.is_empty() {
                assert!(
                    want.is_null(),
                    "{side}_{name}: all cells empty, aggregate {want}"
                );
                checked += 1;
                continue;
            }
            // The cells are the run's f64 values written shortest-round-trip, so they parse
            // back exactly; the run's aggregate sums the same ≤ 40 values, perhaps in another
            // order: ≤ 40·2^-53·Σ|x| ≈ 5e-15 of the values' magnitude, far inside 1e-9 unless
            // a signed column's mean cancelled to 1e-6 of its terms. f64 host arithmetic, one
            // thread: the same on every machine.
            let mean = defined.iter().sum::<f64>() / defined.len() as f64;
            let want = want.as_f64().unwrap();
            assert!(
                (mean - want).abs() <= 1e-9 * want.abs().max(1e-12),
                "{side}_{name}: mean of rows {mean}, aggregate {want}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 48);
    let strata = json(&run.join("strata.json"));
    let terciles = &strata["dt_terciles"];
    let (p33, p67) = (
        terciles["p33_years"].as_f64().unwrap(),
        terciles["p67_years"].as_f64().unwrap(),
    );
    assert!(p33.is_finite() && p67 >= p33, "{terciles}");
    let n: u64 = ["short", "middle", "long"]
        .iter()
        .map(|s| terciles[s]["n"].as_u64().unwrap())
        .sum();
    assert!(
        n >= strata["n_forecasts"].as_u64().unwrap() && n > 0,
        "{strata}"
    );
    assert!(
        terciles["short"]["skill"]["skill"].as_f64().is_some(),
        "{terciles}"
    );
    // Subjects with all three visits are also forecast from baseline to the 4-year scan.
    let far = &strata["horizons"]["baseline_to_4year_skipping_2year"];
    assert!(far["n"].as_u64().unwrap() > 0, "{far}");
    let (m, i) = (
        far["model"]["sc_log_mse"].as_f64().unwrap(),
        far["identity"]["sc_log_mse"].as_f64().unwrap(),
    );
    assert!(m.is_finite() && i > 0.0, "{far}");
    // The 4-year change is larger than the 2-year one: so is the identity's error.
    let near = &strata["horizons"]["baseline_to_2year"]["identity"]["sc_log_mse"];
    assert!(i > near.as_f64().unwrap(), "{strata}");
}

/// `--model gcn`: the reference's GCN baseline trains 2 epochs on a tiny cohort through the
/// engine and writes the same files as the other models, with finite metrics.
#[test]
fn gcn_trains_and_writes_its_run_directory() {
    baseline_run("gcn", &["--hidden_dim", "8"], "gcn_baseline");
}

/// A temporary directory holding `tiny/`: 16 subjects, 12 nodes, seed 42.
fn tiny_cohort() -> tempfile::TempDir {
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
            "tiny",
            "--seed",
            "42",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    t
}

/// Trains `--model model` 2 epochs on a tiny cohort and checks its run directory.
fn baseline_run(model: &str, extra: &[&str], stem: &str) {
    let t = tiny_cohort();
    let mut args = vec![
        "train-gnn",
        "--sc_dir",
        "tiny/sc",
        "--morph_root",
        "tiny/morph",
        "--subject_info_csv",
        "tiny/subject_info_sc.csv",
        "--results_dir",
        "res",
        "--cv_fold",
        "0",
        "--model",
        model,
        "--max_epochs",
        "2",
        "--learning_rate",
        "1e-3",
        "--run-name",
        "run",
    ];
    args.extend_from_slice(extra);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = t.path().join("res/runs/run");
    for f in [
        &format!("checkpoints/{stem}_fold0_best.safetensors"),
        &format!("checkpoints/{stem}_fold0_last.safetensors"),
        "metrics.jsonl",
        "metrics.csv",
        "args.json",
        "clg_ode_results.json",
        "test_metrics.json",
    ]
    .map(String::from)
    {
        assert!(run.join(&f).is_file(), "{f} missing");
    }
    let rows = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let rows: Vec<Value> = rows
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2, "two epochs");
    for row in &rows {
        assert_eq!(row["model"], model);
        for k in ["train_loss", "val_loss", "val_sc_log_mse", "val_skill"] {
            assert!(row[k].as_f64().unwrap().is_finite(), "{k}: {row}");
        }
    }
    let results = json(&run.join("clg_ode_results.json"));
    assert_eq!(results["model"], model);
    let test = json(&run.join("test_metrics.json"));
    let model = test["model"]["sc_log_mse"].as_f64().unwrap();
    let identity = test["identity_baseline"]["sc_log_mse"].as_f64().unwrap();
    let skill = test["skill"]["skill"].as_f64().unwrap();
    assert!(
        model.is_finite() && identity.is_finite() && skill.is_finite(),
        "{test}"
    );
    // The same f64 formula on the same stored values: an ulp or two apart at most.
    assert!((skill - (1.0 - model / identity)).abs() < 1e-9, "{test}");
}

/// `--model vector-lstm`: the reference's VectorLSTM trains 2 epochs on a tiny cohort through
/// the engine and writes the same files as the other models, with finite metrics.
#[test]
fn vector_lstm_trains_and_writes_its_run_directory() {
    baseline_run(
        "vector-lstm",
        &["--latent_dim", "8", "--batch_size", "4"],
        "vector_lstm",
    );
}

/// The authors' baseline job scripts run with the program name changed: the command lines their
/// submit scripts build (recorded by the reference's own parser in the golden, with its path
/// registry `--config configs/paths.yaml` and no subject table), sizes and epochs made tiny.
#[test]
fn the_reference_submit_scripts_command_lines_run() {
    let golden =
        json(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/baselines-golden.json"));
    let scripts = &golden["cli"]["submit_scripts"];
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
            "tiny",
            "--seed",
            "1",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for (key, model) in [
        (
            "vector_lstm (scripts/submit_vector_lstm_baseline.sh)",
            "vector-lstm",
        ),
        ("gnn (scripts/submit_gnn_baseline.sh)", "gcn"),
    ] {
        let argv: Vec<String> = scripts[key]["argv"]
            .as_array()
            .unwrap_or_else(|| panic!("{key} in the golden"))
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        let mut args = vec!["train-gnn".to_string(), "--model".into(), model.into()];
        let mut it = argv.iter();
        let mut run_name = String::new();
        while let Some(flag) = it.next() {
            let value = it.next().unwrap().clone();
            let value = match (flag.as_str(), value.as_str()) {
                (_, "SC") => "tiny/sc".into(),
                (_, "MR") => "tiny/morph".into(),
                (_, "RD") => "RD".into(),
                ("--latent_dim" | "--hidden_dim", _) => "8".into(),
                ("--max_epochs", _) => "1".into(),
                ("--run_name", v) => {
                    run_name = v.to_string();
                    v.to_string()
                }
                _ => value,
            };
            args.extend([flag.clone(), value]);
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run_in(t.path(), &refs);
        assert!(o.status.success(), "{model}: {}", stderr(&o));
        let run = t.path().join("RD/runs").join(&run_name);
        let test = json(&run.join("test_metrics.json"));
        assert!(
            test["skill"]["skill"].as_f64().unwrap().is_finite(),
            "{test}"
        );
    }
    // Without the paths on the command line the registry is an error naming it.
    let o = run_in(
        t.path(),
        &[
            "train-gnn",
            "--model",
            "gcn",
            "--config",
            "configs/paths.yaml",
            "--sc_dir",
            "tiny/sc",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("configs/paths.yaml"), "{}", stderr(&o));
}

/// `--preset drift-residual`: CLG-ODE's residual starts from the linear-drift forecast and is
/// evaluated before training; when training never beats it (here: a min-delta no improvement
/// reaches) the run's test forecast is the linear drift's, metric for metric, and eval-gnn
/// (which refits the fold's drift) reproduces it.
#[test]
fn drift_residual_keeps_the_linear_drift_unless_training_beats_it() {
    let t = tempfile::tempdir().unwrap();
    python_cohort(t.path(), "synth_drift_cohort.py", "drift");
    let drift = drift_run(t.path(), "drift");
    let o = run_in(
        t.path(),
        &[
            "train-gnn",
            "--sc_dir",
            "drift/sc",
            "--morph_root",
            "drift/morph",
            "--subject_info_csv",
            "drift/subject_info_sc.csv",
            "--results_dir",
            "res",
            "--cv_fold",
            "0",
            "--preset",
            "drift-residual",
            // The network kept at rest: what this test checks (the preset's fallback to
            // eb-drift: eb_fallback.rs).
            "--eb-fallback",
            "false",
            "--max_epochs",
            "2",
            "--min_delta",
            "10",
            "--run-name",
            "dh",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("before training"), "{}", stderr(&o));
    let run = t.path().join("res/runs/dh");
    let results = json(&run.join("clg_ode_results.json"));
    assert_eq!(results["cv_folds"][0]["best_epoch"], 0, "{results}");
    let test = json(&run.join("test_metrics.json"));
    for key in [
        "sc_log_mse",
        "sc_log_pearson",
        "sc_log_pearson_sparse",
        "ecc_l2",
    ] {
        let (a, b) = (
            test["model"][key].as_f64().unwrap(),
            drift["model"][key].as_f64().unwrap(),
        );
        // Two runs (processes) of one binary on one machine: the drift-residual model's f32
        // forecast (Flex: exp(log1p(a0) + drift·Δt) − 1 through the decoder with the residual
        // at rest) against the linear-drift baseline's f64 forecast of the same drift. The
        // gap is the f32 rounding of the forecast carried into the metrics: ≈ u = 6e-8
        // relative per value, ≤ 1e-6 on these means of squares (their relative error is
        // about twice the inputs', more where forecast and truth nearly agree). Measured
        // ≤ 4.5e-9 (sc_log_mse); 1e-5 leaves > 1000×. Element-wise work (no long sums in f32),
        // so the same on every CPU and thread count.
        eprintln!(
            "{key}: drift-residual {a}, linear drift {b}, relative {:.1e}",
            (a - b).abs() / b.abs().max(1e-6)
        );
        assert!(
            (a - b).abs() <= 1e-5 * b.abs().max(1e-6),
            "{key}: drift-residual {a}, linear drift {b}"
        );
    }
    let o = run_in(t.path(), &["eval-gnn", run.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let eval = json(&run.join("eval-test-best/metrics.json"));
    let (a, b) = (
        eval["model"]["sc_log_mse"].as_f64().unwrap(),
        test["model"]["sc_log_mse"].as_f64().unwrap(),
    );
    // eval-gnn re-scores the run's checkpoint in another process of the same binary on the
    // same machine: the same computation, measured equal; 1e-6 is headroom only.
    eprintln!("eval-gnn {a}, run {b}, relative {:.1e}", (a - b).abs() / b);
    assert!((a - b).abs() <= 1e-6 * b, "eval-gnn {a}, run {b}");
}

/// `--optimizer sgd --momentum M` trains a gradient-trained forecaster with SGD (recorded in
/// `args.json`, its rows differ from Adam's), a run stopped mid-fold refuses to resume with
/// Adam, and a closed-form forecaster refuses the flags (it has no optimiser).
#[test]
fn gcn_trains_with_sgd_and_a_closed_form_fit_refuses_the_optimizer_flags() {
    let t = tiny_cohort();
    let train = |name: &str, extra: &[&str]| {
        let mut args = vec![
            "train-gnn",
            "--sc_dir",
            "tiny/sc",
            "--morph_root",
            "tiny/morph",
            "--subject_info_csv",
            "tiny/subject_info_sc.csv",
            "--results_dir",
            "res",
            "--cv_fold",
            "0",
            "--max_epochs",
            "2",
            "--learning_rate",
            "1e-2",
            "--hidden_dim",
            "8",
            "--run-name",
            name,
        ];
        args.extend_from_slice(extra);
        run_in(t.path(), &args)
    };
    let rows = |name: &str| metrics_without_timing(&t.path().join("res/runs").join(name));
    let sgd = ["--model", "gcn", "--optimizer", "sgd", "--momentum", "0.9"];
    let o = train("sgd", &sgd);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = train("adam", &["--model", "gcn"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let args = json(&t.path().join("res/runs/sgd/args.json"));
    assert_eq!(
        args["optimizer"].as_str(),
        Some("sgd(momentum=0.9), constant lr, no weight decay"),
        "{args}"
    );
    assert_eq!(args["optimizer_choice"]["optimizer"], "sgd", "{args}");
    let (s, a) = (rows("sgd"), rows("adam"));
    assert_eq!((s.len(), a.len()), (2, 2));
    for r in &s {
        assert!(r["train_loss"].as_f64().unwrap().is_finite(), "{r}");
    }
    assert_ne!(
        s[0]["train_loss"], a[0]["train_loss"],
        "--optimizer sgd had no effect"
    );

    // Stopped after a step with SGD, resumed with Adam: refused.
    let mut first = sgd.to_vec();
    first.extend(["--stop-after-steps", "1"]);
    assert_eq!(train("parts", &first).status.code(), Some(75));
    let o = train("parts", &["--model", "gcn", "--resume", "auto"]);
    assert!(!o.status.success(), "Adam resumed SGD's state");
    assert!(stderr(&o).contains("sgd"), "{}", stderr(&o));

    let o = train("drift", &["--model", "linear-drift", "--optimizer", "sgd"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("do not apply to --model linear-drift"),
        "{}",
        stderr(&o)
    );
}
