//! Backends and devices that cannot be used give a clear error with exit code 3, never a panic.

mod common;

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
