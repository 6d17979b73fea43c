//! The names and readers of [`super::RunDir`].

use super::*;

#[test]
fn the_names_are_the_ones_runs_have_always_had() {
    let r = RunDir::new("/r");
    let rel = |p: PathBuf| p.strip_prefix("/r").unwrap().display().to_string();
    assert_eq!(rel(r.args_json()), "args.json");
    assert_eq!(rel(r.config_toml()), "config.toml");
    assert_eq!(rel(r.run_meta_json()), "run_meta.json");
    assert_eq!(rel(r.metrics_jsonl()), "metrics.jsonl");
    assert_eq!(rel(r.metrics_csv()), "metrics.csv");
    assert_eq!(rel(r.steps_csv()), "steps.csv");
    assert_eq!(rel(r.curves_svg()), "curves.svg");
    assert_eq!(rel(r.lock_file()), ".lock");
    assert_eq!(
        rel(r.written_checkpoints_json()),
        "written_checkpoints.json"
    );
    assert_eq!(rel(r.last_checkpoint()), "checkpoints/last.safetensors");
    assert_eq!(
        rel(r.epoch_checkpoint(7)),
        "checkpoints/epoch_007.safetensors"
    );
    assert_eq!(
        rel(r.epoch_checkpoint(1234)),
        "checkpoints/epoch_1234.safetensors"
    );
    assert_eq!(rel(r.best_checkpoint()), "checkpoints/best.safetensors");
    assert_eq!(
        rel(r.epoch_model("gcn_fold1", 3)),
        "checkpoints/gcn_fold1_epoch_003.safetensors"
    );
    assert_eq!(
        rel(r.best_model("clg_ode_fold0")),
        "checkpoints/clg_ode_fold0_best.safetensors"
    );
    assert_eq!(
        rel(r.last_model("clg_ode_fold0")),
        "checkpoints/clg_ode_fold0_last.safetensors"
    );
    assert_eq!(rel(r.results_json()), "clg_ode_results.json");
    assert_eq!(rel(r.test_metrics_json()), "test_metrics.json");
    assert_eq!(rel(r.test_sc_metrics_json()), "test_sc_metrics.json");
    assert_eq!(rel(r.per_subject_csv()), "per_subject.csv");
    assert_eq!(rel(r.strata_json()), "strata.json");
    let e = r.eval_dir("test", "best");
    assert_eq!(rel(e.path().to_path_buf()), "eval-test-best");
    assert_eq!(rel(e.eval_metrics_json()), "eval-test-best/metrics.json");
    assert_eq!(rel(e.strata_json()), "eval-test-best/strata.json");
}

#[test]
fn best_models_lists_only_best_model_files() {
    let t = tempfile::tempdir().unwrap();
    let r = RunDir::new(t.path());
    assert!(r.best_models().is_err());
    assert!(!r.has_checkpoints());
    std::fs::create_dir(r.checkpoints()).unwrap();
    assert!(r.epoch_files().is_empty());
    for p in [
        r.best_model("b"),
        r.best_model("a"),
        r.last_model("a"),
        r.last_checkpoint(),
        r.epoch_checkpoint(2),
        r.epoch_model("a", 12),
        r.checkpoints().join("a_epoch_x.safetensors"),
    ] {
        std::fs::write(p, b"").unwrap();
    }
    assert_eq!(
        r.best_models().unwrap(),
        [r.best_model("a"), r.best_model("b")]
    );
    assert_eq!(
        r.epoch_files(),
        [r.epoch_model("a", 12), r.epoch_checkpoint(2)]
    );
    assert!(r.has_checkpoints());
}

#[test]
fn readers_name_the_file() {
    let t = tempfile::tempdir().unwrap();
    let r = RunDir::new(t.path());
    let e = r.read_results().unwrap_err().to_string();
    assert!(
        e.contains("clg_ode_results.json") && e.contains("cannot read"),
        "{e}"
    );
    std::fs::write(r.args_json(), "{").unwrap();
    let e = r.read_args::<serde_json::Value>().unwrap_err().to_string();
    assert!(e.contains("args.json: not JSON"), "{e}");
    r.write_args(&serde_json::json!({"a": 1})).unwrap();
    assert_eq!(r.read_args::<serde_json::Value>().unwrap()["a"], 1);
    assert!(r.read_metrics().unwrap().is_empty());
}
