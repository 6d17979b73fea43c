//! Backends and devices that cannot be used give a clear error with exit code 3, never a panic.

use crate::common;

use common::*;

fn train_args<'a>(data: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "train-mnist",
        "--data-dir",
        data,
        "--limit-train",
        "20",
        "--limit-test",
        "20",
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
#[cfg(not(feature = "tch"))]
fn backend_not_compiled_names_the_feature() {
    let t = tempfile::tempdir().unwrap();
    write_tiny_mnist(&t.path().join("d"), 20);
    let d = t.path().join("d");
    let o = run_in(
        t.path(),
        &train_args(d.to_str().unwrap(), &["--backend", "tch"]),
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("--features tch"), "{}", stderr(&o));
    assert!(!t.path().join("runs").exists(), "nothing may be written");
}

#[test]
fn cuda_device_without_driver_is_a_clear_error() {
    // The test machines have no NVIDIA driver; on a GPU machine this test is meaningless.
    if unsafe { libloading::Library::new("libcuda.so.1") }.is_ok() {
        eprintln!("skipped: an NVIDIA driver is present");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    write_tiny_mnist(&t.path().join("d"), 20);
    let d = t.path().join("d");
    for extra in [
        &["--device", "cuda"][..],
        &["--device", "cuda:1", "--backend", "tch"][..],
    ] {
        let o = run_in(t.path(), &train_args(d.to_str().unwrap(), extra));
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "{err}");
        // Without a GPU backend compiled in: exit 3 naming the feature. With one: the
        // preflight's documented NO_DRIVER code (10), before any data is read.
        match o.status.code() {
            Some(3) => assert!(err.contains("--features"), "{extra:?}: {err}"),
            Some(10) => assert!(err.contains("no NVIDIA driver"), "{extra:?}: {err}"),
            other => panic!("{extra:?}: unexpected exit {other:?}: {err}"),
        }
        assert!(!t.path().join("runs").exists(), "nothing may be written");
    }
}

#[test]
fn flex_on_a_gpu_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let o = run_in(
        t.path(),
        &train_args("/nonexistent", &["--backend", "flex", "--device", "cuda"]),
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("CPU only"), "{}", stderr(&o));
}

/// GPU or fail: inside a job the scheduler gave GPUs to (Slurm's `SLURM_JOB_GPUS`, or
/// `CUDA_VISIBLE_DEVICES` inside a Slurm/LSF/gflow job) a run without `--device` takes the GPU
/// — here, with no NVIDIA driver, it fails with the doctor's code (10–17), or 3 when this binary
/// has no GPU backend — and never trains on the CPU unasked; `--device cpu` and `--backend
/// flex` opt out.
#[test]
fn allocated_gpus_are_used_or_the_run_fails() {
    if unsafe { libloading::Library::new("libcuda.so.1") }.is_ok() {
        eprintln!("skipped: an NVIDIA driver is present");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    write_tiny_mnist(&t.path().join("d"), 20);
    let d = t.path().join("d");
    let d = d.to_str().unwrap();
    let allocations: [&[(&str, &str)]; 3] = [
        &[("SLURM_JOB_ID", "41"), ("SLURM_JOB_GPUS", "0")],
        &[("SLURM_JOB_ID", "42"), ("CUDA_VISIBLE_DEVICES", "0")],
        &[("LSB_JOBID", "43"), ("CUDA_VISIBLE_DEVICES", "GPU-0e2c-aa")],
    ];
    for vars in allocations {
        let run = |extra: &[&str], out: &str| {
            let mut cmd = trainer();
            cmd.current_dir(t.path())
                .args(train_args(d, extra))
                .args(["--out", out]);
            for (k, _) in std::env::vars() {
                if k.starts_with("SLURM_") || k.starts_with("LSB_") || k == "CUDA_VISIBLE_DEVICES" {
                    cmd.env_remove(k);
                }
            }
            cmd.envs(vars.iter().copied()).output().unwrap()
        };
        let o = run(&[], "gpu");
        let err = stderr(&o);
        assert!(
            err.contains("allocated GPUs") && err.contains("--device cpu"),
            "{vars:?}: {err}"
        );
        // Without a GPU backend: 3, naming the feature. With one: the preflight's doctor code
        // (10 no driver; 12 when the scheduler allocated GPUs and the driver is missing).
        match o.status.code() {
            Some(3) => assert!(err.contains("--features"), "{vars:?}: {err}"),
            Some(10..=17) => assert!(err.contains("trainer doctor"), "{vars:?}: {err}"),
            other => panic!("{vars:?}: unexpected exit {other:?}: {err}"),
        }
        assert!(
            !t.path().join("gpu").exists(),
            "{vars:?}: nothing may be written"
        );
        for opt_out in [&["--device", "cpu"][..], &["--backend", "flex"][..]] {
            let o = run(opt_out, "cpu");
            assert!(o.status.success(), "{vars:?} {opt_out:?}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("backend flex, device cpu"),
                "{}",
                stderr(&o)
            );
            std::fs::remove_dir_all(t.path().join("cpu")).unwrap();
        }
    }
}
