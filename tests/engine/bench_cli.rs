//! `trainer bench mnist` runs every compiled backend and reports positive throughputs as a table
//! and as JSON (figures themselves are not asserted: they belong to benchmarks, not tests).

use crate::common;

use common::*;

#[test]
fn bench_mnist_reports_flex() {
    let t = tempfile::tempdir().unwrap();
    let json_path = t.path().join("bench.json");
    let o = run_in(
        t.path(),
        &[
            "bench",
            "mnist",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--batch-size",
            "8",
            "--json",
            json_path.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("backend"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let flex = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["backend"] == "flex")
        .expect("flex row");
    assert!(flex["train_img_per_s"].as_f64().unwrap() > 0.0);
    assert!(flex["error"].is_null());
}

#[test]
fn bench_mnist_compares_chosen_backends_with_spread_threads_and_floor() {
    let t = tempfile::tempdir().unwrap();
    let json_path = t.path().join("bench.json");
    let o = run_in(
        t.path(),
        &[
            "bench",
            "mnist",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--batch-size",
            "4",
            "--rounds",
            "2",
            "--backends",
            "flex-plain,flex",
            "--json",
            json_path.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("load average before"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["backend"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["flex-plain", "flex"]);
    for r in rows {
        assert_eq!(r["rounds"], 2);
        let train = &r["train"];
        let spread = &train["img_per_s"];
        assert!(spread["min"].as_f64().unwrap() <= spread["median"].as_f64().unwrap());
        assert!(spread["median"].as_f64().unwrap() <= spread["max"].as_f64().unwrap());
        assert!(train["threads_used"].as_f64().unwrap() > 0.0, "{r}");
        assert!(train["floor_fraction"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(json["floor"]["train_img_per_s"].as_f64().unwrap() > 0.0);
    // The floor: one core's sgemm measured before the rounds and before each, the best kept.
    let floor = &json["floor"];
    assert_eq!(floor["sgemm_measurements"], 3, "{floor}");
    let best = floor["sgemm_gflops_per_core"].as_f64().unwrap();
    assert_eq!(best, floor["sgemm_measured"]["max"].as_f64().unwrap());
    assert!(floor["sgemm_measured"]["min"].as_f64().unwrap() <= best);
    assert!(out.contains("best of 3 measurements"), "{out}");
    // Which GEMM kernels the floor ran on, as gemm chooses them on this CPU (issue 35):
    // AVX-512 where the CPU has it, else FMA, else scalar (NEON on aarch64).
    let kernels = json["floor"]["gemm_kernels"].as_str().unwrap();
    #[cfg(target_arch = "x86_64")]
    let (has_avx512, has_fma) = (
        std::arch::is_x86_feature_detected!("avx512f"),
        std::arch::is_x86_feature_detected!("fma"),
    );
    #[cfg(not(target_arch = "x86_64"))]
    let (has_avx512, has_fma) = (false, false);
    // TRAINER_CPU_AVX512=0 in the test's own environment (a run that emulates a CPU without
    // AVX-512) turns AVX-512 off for the floor as well.
    let avx512_off = std::env::var("TRAINER_CPU_AVX512").is_ok_and(|v| v.trim() == "0");
    let uses_avx512 = has_avx512 && !avx512_off;
    assert_eq!(kernels.starts_with("avx512f"), uses_avx512, "{kernels}");
    assert_eq!(
        kernels.starts_with("fma"),
        has_fma && !uses_avx512,
        "{kernels}"
    );
    if !has_avx512 {
        return;
    }
    // TRAINER_CPU_AVX512=0 runs the FMA kernels instead, and the floor says so.
    let o = trainer()
        .args([
            "bench",
            "mnist",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--batch-size",
            "2",
        ])
        .args(["--rounds", "1", "--backends", "flex", "--json"])
        .arg(&json_path)
        .env("TRAINER_CPU_AVX512", "0")
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let kernels = json["floor"]["gemm_kernels"].as_str().unwrap();
    assert!(
        kernels.starts_with("fma") && kernels.contains("TRAINER_CPU_AVX512=0"),
        "{kernels}"
    );
}

/// `trainer bench gnn --nodes 12 --backends flex` with `flags` in `dir`: it succeeds, and its
/// JSON result.
fn bench_gnn_json(dir: &std::path::Path, flags: &[&str]) -> serde_json::Value {
    let json_path = dir.join("gnn.json");
    let mut args = vec![
        "bench",
        "gnn",
        "--nodes",
        "12",
        "--backends",
        "flex",
        "--json",
    ];
    args.push(json_path.to_str().unwrap());
    args.extend_from_slice(flags);
    let o = run_in(dir, &args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap()
}

/// `trainer bench gnn` on two cohort sizes in one run: a row per size and objective, each epoch
/// timed on at most `--steps` steps after `--warmup` and extrapolated to the whole epoch.
#[test]
fn bench_gnn_times_several_cohort_sizes_on_a_few_steps() {
    let t = tempfile::tempdir().unwrap();
    let flags = ["--subjects", "16,30", "--steps", "2", "--warmup", "1"];
    let json = bench_gnn_json(t.path(), &flags);
    assert_eq!(json["subjects"], serde_json::json!([16, 30]));
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "2 sizes x 2 objectives: {rows:?}");
    for r in rows {
        assert!(r["error"].is_null(), "{r}");
        let (train, steps) = (
            r["training_subjects"].as_u64().unwrap(),
            r["steps_per_epoch"].as_u64().unwrap(),
        );
        assert_eq!(steps, train.div_ceil(2), "{r}");
        assert_eq!(r["timed_steps"], 2, "{r}");
        assert!(r["seconds_per_epoch"].as_f64().unwrap() > 0.0, "{r}");
    }
    let sizes: Vec<u64> = rows
        .iter()
        .map(|r| r["training_subjects"].as_u64().unwrap())
        .collect();
    assert!(
        sizes[0] < sizes[2],
        "the larger cohort trains on more subjects: {sizes:?}"
    );
    // --subjects 0 is refused (a cohort needs subjects).
    let o = run_in(t.path(), &["bench", "gnn", "--subjects", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// `trainer bench gnn --batch-size 2,3`: each batch side by side, its steps cut from the same
/// epoch (the rows say which batch); bench mnist takes one batch and refuses two.
#[test]
fn bench_gnn_times_several_batches_and_mnist_refuses_them() {
    let t = tempfile::tempdir().unwrap();
    let flags = [
        "--subjects",
        "16",
        "--batch-size",
        "2,3",
        "--steps",
        "1",
        "--warmup",
        "0",
    ];
    let json = bench_gnn_json(t.path(), &flags);
    assert_eq!(json["batch_sizes"], serde_json::json!([2, 3]));
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "2 batches x 2 objectives: {rows:?}");
    for r in rows {
        assert!(r["error"].is_null(), "{r}");
        let batch = r["batch_size"].as_u64().unwrap();
        let train = r["training_subjects"].as_u64().unwrap();
        assert_eq!(
            r["steps_per_epoch"].as_u64().unwrap(),
            train.div_ceil(batch),
            "{r}"
        );
    }
    let batches: Vec<u64> = rows
        .iter()
        .map(|r| r["batch_size"].as_u64().unwrap())
        .collect();
    assert_eq!(batches, [2, 2, 3, 3]);
    let o = run_in(t.path(), &["bench", "mnist", "--batch-size", "8,16"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("bench mnist takes one batch size"),
        "{}",
        stderr(&o)
    );
}
