//! `trainer train-gnn` end to end through the binary, on a small synthetic cohort.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

fn synth(dir: &Path, subjects: usize, nodes: usize, seed: u64) {
    let o = run_in(
        dir,
        &[
            "synth-connectome",
            "--subjects",
            &subjects.to_string(),
            "--nodes",
            &nodes.to_string(),
            "--out",
            "cohort",
            "--seed",
            &seed.to_string(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let summary: Value = serde_json::from_str(&stdout(&o)).expect("summary is JSON");
    assert_eq!(summary["subjects"], subjects);
}

/// Reference-style underscore flags, small model, fast learning rate.
fn train_args<'a>(run_name: &'a str, epochs: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train-gnn",
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "results",
        "--run_name",
        run_name,
        "--cv_fold",
        "0",
        "--max_epochs",
        epochs,
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
        "--solver_steps",
        "3",
        "--learning_rate",
        "3e-3",
        "--log-every-secs",
        "0.2",
    ];
    v.extend_from_slice(extra);
    v
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn rows(run: &Path) -> Vec<Value> {
    std::fs::read_to_string(run.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn train_gnn_learns_and_writes_every_output() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path(), 16, 20, 7);
    let o = run_in(t.path(), &train_args("r", "12", &["--patience", "50"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let run = t.path().join("results/runs/r");

    for f in [
        "args.json",
        "run_meta.json",
        "test_metrics.json",
        "test_sc_metrics.json",
        "clg_ode_results.json",
    ] {
        json(&run.join(f));
    }
    let csv = std::fs::read_to_string(run.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 13, "header + 12 epochs");
    assert!(csv.starts_with("fold,epoch,train_loss,val_loss,"));
    let rows = rows(&run);
    assert_eq!(rows.len(), 12);
    let val: Vec<f64> = rows
        .iter()
        .map(|r| r["val_loss"].as_f64().unwrap())
        .collect();
    let first = val[0];
    let best_late = val[1..].iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(best_late < first, "validation loss did not fall: {val:?}");
    // Velocity from epoch index 10 on (1-based epoch 11).
    assert_eq!(rows[9]["enable_vel"], 0);
    assert_eq!(rows[10]["enable_vel"], 1);

    let args = json(&run.join("args.json"));
    assert_eq!(args["max_epochs"], 12);
    assert_eq!(args["model"]["latent_dim"], 8);
    // The reference's default objective: topology loss and GradNorm on.
    assert_eq!(args["objective"]["topology"]["lambda_topo"], 1e-3);
    assert_eq!(args["objective"]["topology"]["gradnorm"], "manifold_topo");

    let test = json(&run.join("test_metrics.json"));
    for side in ["model", "identity_baseline"] {
        let m = test[side].as_object().unwrap();
        assert_eq!(m.len(), 22, "{side}");
        for (k, v) in m {
            if k.starts_with("new_edge_") {
                // Undefined without the innovation module.
                assert!(v.is_null(), "{side}.{k} = {v}");
                continue;
            }
            assert!(v.as_f64().unwrap().is_finite(), "{side}.{k} = {v}");
        }
    }
    assert!(test["test_loss"].as_f64().unwrap().is_finite());
    assert_eq!(test["n_subjects"], 4); // ceil(0.2 · 16)

    let results = json(&run.join("clg_ode_results.json"));
    assert_eq!(results["n_subjects"], 16);
    assert_eq!(results["n_test"], 4);
    assert_eq!(results["cv_folds"].as_array().unwrap().len(), 1);
    let best_epoch = results["cv_folds"][0]["best_epoch"].as_u64().unwrap();
    let best_val = results["best_cv_score"].as_f64().unwrap();
    assert_eq!(best_val, val.iter().cloned().fold(f64::INFINITY, f64::min));

    for which in ["best", "last"] {
        let p = run.join(format!("checkpoints/clg_ode_fold0_{which}.safetensors"));
        let tensors = checkpoint_tensors(&p);
        assert!(tensors.contains_key("model.conn_decoder.alpha"), "{which}");
        assert!(tensors.contains_key("model.ode_func.morph_net.fc1.weight"));
    }
    // The best checkpoint holds the best epoch's weights, not the last ones.
    if best_epoch < 12 {
        let best = checkpoint_tensors(&run.join("checkpoints/clg_ode_fold0_best.safetensors"));
        let last = checkpoint_tensors(&run.join("checkpoints/clg_ode_fold0_last.safetensors"));
        assert_ne!(
            best["model.morph_encoder.fc1.weight"],
            last["model.morph_encoder.fc1.weight"]
        );
    }
}

#[test]
fn train_gnn_resume_continues_exactly() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path(), 12, 16, 3);
    let o = run_in(t.path(), &train_args("full", "3", &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    // 12 subjects → 9 trainval → fold 0 trains 7 → 4 steps per epoch; stop mid-epoch 2.
    let o = run_in(
        t.path(),
        &train_args("split", "3", &["--stop-after-steps", "6"]),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(
        !t.path()
            .join("results/runs/split/test_metrics.json")
            .exists()
    );
    let o = run_in(t.path(), &train_args("split", "3", &["--resume", "auto"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let strip = |run: &str| -> Vec<Value> {
        rows(&t.path().join("results/runs").join(run))
            .into_iter()
            .map(|mut r| {
                let m = r.as_object_mut().unwrap();
                m.retain(|k, _| !k.contains("seconds") && !k.contains("per_s"));
                r
            })
            .collect()
    };
    // Bit-equality across processes is sound here: one binary on one machine (the same CPU
    // kernels), the checkpoint holds every float exactly, and the kernels cut work by shape,
    // never by thread count, so the resumed process follows the uninterrupted one exactly.
    assert_eq!(strip("full"), strip("split"));
    let a = json(&t.path().join("results/runs/full/test_sc_metrics.json"));
    let b = json(&t.path().join("results/runs/split/test_sc_metrics.json"));
    assert_eq!(a, b);
}

#[test]
fn the_batch_is_settled_by_the_run_and_written_down() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path(), 12, 16, 3);
    let optim_batch = |run: &str| -> (i64, u64) {
        let dir = t.path().join("results/runs").join(run);
        let config: toml::Table = std::fs::read_to_string(dir.join("config.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let args = json(&dir.join("args.json"));
        (
            config["optimisation"]["batch_size"].as_integer().unwrap(),
            args["batch_size"].as_u64().unwrap(),
        )
    };
    // No --batch-size on a CPU: the reference's 2, said, and written where a rerun reads it.
    let o = run_in(t.path(), &train_args("cpu", "1", &[]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("batch 2 subjects a step and rank: the reference's, on a CPU"),
        "{}",
        stderr(&o)
    );
    assert_eq!(optim_batch("cpu"), (2, 2));
    // A run stopped with --batch-size 3 and resumed without it takes the checkpoint's batch
    // (a requeued job repeats its command line; a GPU's free memory may have changed).
    let o = run_in(
        t.path(),
        &train_args(
            "three",
            "2",
            &["--batch-size", "3", "--stop-after-steps", "2"],
        ),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let o = run_in(t.path(), &train_args("three", "2", &["--resume", "auto"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("batch 3 subjects a step and rank: the checkpoint's"),
        "{}",
        stderr(&o)
    );
    assert_eq!(optim_batch("three"), (3, 3));
}

#[test]
fn train_gnn_bad_sc_file_fails_cleanly() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path(), 8, 10, 1);
    let sc = t.path().join("cohort/sc");
    let mut files: Vec<_> = std::fs::read_dir(&sc)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let bad = &files[3];
    let text = std::fs::read_to_string(bad).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let mut cells: Vec<&str> = lines[2].split(',').collect();
    cells[4] = "abc";
    lines[2] = cells.join(",");
    std::fs::write(bad, lines.join("\n")).unwrap();

    let o = run_in(t.path(), &train_args("bad", "2", &[]));
    assert!(!o.status.success());
    let err = stderr(&o);
    let name = bad.file_name().unwrap().to_str().unwrap();
    assert!(err.contains(name), "message should name {name}: {err}");
    assert!(err.contains("abc"), "{err}");
    assert!(
        !t.path().join("results").exists(),
        "no run directory may be created"
    );

    // A missing subject table is reported too, before any run directory exists.
    std::fs::write(bad, text).unwrap();
    let mut args = train_args("bad", "2", &[]);
    args[6] = "cohort/missing.csv";
    let o = run_in(t.path(), &args);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("missing.csv"), "{}", stderr(&o));
    assert!(!t.path().join("results").exists());
}

#[test]
fn train_gnn_rejects_bad_flags() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &[
            "train-gnn",
            "--sc-dir",
            "a",
            "--morph-root",
            "b",
            "--subject-info-csv",
            "c",
            "--results-dir",
            "r",
            "--cv-fold",
            "7",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--cv-fold"), "{}", stderr(&o));
}

#[test]
fn every_variant_trains_two_epochs_with_finite_metrics() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path(), 12, 16, 5);
    let variants: [(&str, &[&str]); 4] = [
        ("default", &["--porcelain"]),
        (
            "fixed_residual",
            &["--fixed_support", "--residual_skip", "--lambda_topo", "0"],
        ),
        (
            "innovation",
            &[
                "--fixed_support",
                "--residual_skip",
                "--innovation_enabled",
                "--innovation_topm",
                "20",
                "--innovation_k_new",
                "5",
                "--new_sparse_warmup_epochs",
                "0",
                "--lambda_new_reg",
                "0.1",
            ],
        ),
        (
            "focal_density",
            &[
                "--edge_loss",
                "focal",
                "--focal_alpha",
                "0.25",
                "--lambda_density",
                "0.05",
                "--lambda_full_log_mse",
                "0.05",
                "--lambda_zero_log",
                "0.02",
                "--val_sc_eval_every",
                "1",
                "--compute_mask_auprc",
            ],
        ),
    ];
    for (name, extra) in variants {
        let o = run_in(t.path(), &train_args(name, "2", extra));
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        if name == "default" {
            // The reference's console lines, for scripts that parse them.
            let out = stdout(&o);
            assert!(out.contains("Starting fold 1/5 with"), "{out}");
            assert!(out.contains("Fold 1/5, epoch 2/2, train_loss="), "{out}");
            assert!(out.contains("monitor(val_loss)="), "{out}");
        }
        let run = t.path().join("results/runs").join(name);
        let rows = rows(&run);
        assert_eq!(rows.len(), 2, "{name}");
        for r in &rows {
            for (k, v) in r.as_object().unwrap() {
                if let Some(x) = v.as_f64() {
                    assert!(x.is_finite(), "{name}: {k} = {x}");
                }
            }
        }
        let test = json(&run.join("test_metrics.json"));
        for side in ["model", "identity_baseline"] {
            for (k, v) in test[side].as_object().unwrap() {
                // New-edge scores: null where undefined (no innovation module, no true new
                // edge, the identity), else finite.
                if k.starts_with("new_edge_") && v.is_null() {
                    continue;
                }
                assert!(v.as_f64().unwrap().is_finite(), "{name}: {side}.{k}");
            }
        }
        assert!(
            test["skill"]["skill"].as_f64().unwrap().is_finite(),
            "{name}"
        );
        // The variant's own terms ran.
        let last = rows.last().unwrap();
        match name {
            "default" => assert!(last["train_topo"].as_f64().unwrap() > 0.0),
            "innovation" => assert!(last["train_new_edge_count"].as_f64().unwrap() > 0.0),
            "focal_density" => {
                assert!(last["train_density_count"].as_f64().unwrap() > 0.0);
                assert!(last["val_sc_log_mse"].as_f64().unwrap() > 0.0);
                assert!(last["train_mask_auprc"].as_f64().unwrap() > 0.0);
            }
            _ => assert_eq!(last["train_l_e"].as_f64().unwrap(), 0.0, "no edge loss"),
        }
    }
}

/// A fold whose validation subjects have no follow-up scan (40 % of the authors' subjects have
/// one session; small cohorts hit it): `val_skill` is undefined there, so the fold says so in
/// one line, early-stops on `val_loss`, records the fallback in `run_meta.json`, and the run
/// finishes — for CLG-ODE and for a closed-form model alike.
#[test]
fn a_fold_without_validation_pairs_monitors_val_loss() {
    let t = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/synth_noisy_cohort.py");
    let o = std::process::Command::new("python3")
        .arg(&script)
        .args(["--subjects", "15", "--nodes", "12", "--seed", "2"])
        .args(["--visit-probs", "1,0,0", "--out", "single"])
        .current_dir(t.path())
        .output()
        .expect("python3 (scripts/setup.sh installs numpy)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for model in ["clg-ode", "eb-drift"] {
        let o = run_in(
            t.path(),
            &[
                "train-gnn",
                "--model",
                model,
                "--sc_dir",
                "single/sc",
                "--morph_root",
                "single/morph",
                "--subject_info_csv",
                "single/subject_info_sc.csv",
                "--results_dir",
                "res",
                "--run_name",
                model,
                "--cv_fold",
                "0",
                "--max_epochs",
                "2",
                "--latent_dim",
                "8",
                "--hidden_dim",
                "16",
                "--early_stop_metric",
                "val_skill",
            ],
        );
        let err = stderr(&o);
        assert!(o.status.success(), "{model}: {err}");
        assert_eq!(
            err.matches("early stopping on `val_loss` instead").count(),
            1,
            "{model}: {err}"
        );
        let meta: Value = serde_json::from_str(
            &std::fs::read_to_string(t.path().join("res/runs").join(model).join("run_meta.json"))
                .unwrap(),
        )
        .unwrap();
        let fallback = &meta["extra"]["monitor_fallback"][0];
        assert_eq!(fallback["fold"], 0, "{meta}");
        assert_eq!(fallback["metric"], "val_loss");
        assert_eq!(fallback["instead_of"], "val_skill");
        assert!(
            t.path()
                .join("res/runs")
                .join(model)
                .join("test_metrics.json")
                .is_file()
        );
    }
}
