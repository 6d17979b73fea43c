//! The autotune cache's handling: flags refused, model names, missing, unwritable and torn caches.

use super::*;

#[test]
fn the_flags_are_refused_where_they_cannot_apply() {
    use crate::backend::DeviceSpec;
    let flex = Placement {
        backend: BackendKind::Flex,
        device: DeviceSpec::Cpu,
    };
    assert!(Autotune::default().check(flex).is_ok());
    let warm_only = Autotune {
        cache: None,
        warm: true,
    };
    let err = warm_only.check(flex).unwrap_err().to_string();
    assert!(
        err.contains("--autotune-warm needs --autotune-cache"),
        "{err}"
    );
    let cache = Autotune {
        cache: Some("/tmp/tune".into()),
        warm: false,
    };
    let err = cache.check(flex).unwrap_err().to_string();
    let want = match COMPILED {
        true => "backend flex does not autotune",
        false => "rebuild with `--features autotune`",
    };
    assert!(err.contains(want), "{err}");
    assert!(autotunes(BackendKind::Cuda) && autotunes(BackendKind::WgpuFusion));
    assert!(!autotunes(BackendKind::Tch));
}

#[test]
fn model_names_become_file_names() {
    let wgpu = serde_json::json!({"wgpu_adapter": {"name": "llvmpipe (LLVM 15.0.6, 256 bits)"}});
    assert_eq!(
        model_dir_name(Some(&wgpu)),
        "llvmpipe__LLVM_15.0.6__256_bits"
    );
    let cuda = serde_json::json!({
        "visible_gpus": [{"index": 1}],
        "driver": {"gpus": [{"index": 0, "name": "A"}, {"index": 1, "name": "NVIDIA H100 80GB HBM3"}]}
    });
    assert_eq!(model_dir_name(Some(&cuda)), "NVIDIA_H100_80GB_HBM3");
    assert_eq!(model_dir_name(None), "unknown-device");
}

#[test]
fn a_torn_cache_is_counted_and_named() {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("m/autotune/0.10.0/wgpu/matmul.json.log");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(
        &f,
        "{\"key\":1,\"value\":2}\n{\"key\":3,\"value\":4}\n{\"key\":5,\"va",
    )
    .unwrap();
    let s = prepare(t.path(), "m", "[test]");
    assert_eq!(s.cached, 2);
    assert!(s.private_of.is_none());
    let (_, torn) = scan(&s.dir);
    assert_eq!(torn, vec![(f, 1)]);
}

#[test]
fn a_missing_cache_is_created_and_an_unwritable_one_read_from_a_copy() {
    let t = tempfile::tempdir().unwrap();
    let s = prepare(&t.path().join("new"), "m", "[test]");
    assert!(t.path().join("new/m").is_dir() && s.private_of.is_none());
    // A regular file where the directory should be: it cannot be created.
    std::fs::write(t.path().join("file"), "x").unwrap();
    let s = prepare(&t.path().join("file"), "m", "[test]");
    assert_eq!(
        s.private_of.as_deref(),
        Some(t.path().join("file/m").as_path())
    );
    assert!(s.dir.is_dir());
    let private = s.dir.clone();
    drop(s);
    assert!(
        !private.exists(),
        "the private copy is removed after the run"
    );
    // A cache that cannot be written: read from a private copy (without its locks).
    let ro = t.path().join("ro");
    std::fs::create_dir_all(ro.join("m/autotune")).unwrap();
    std::fs::write(ro.join("m/autotune/a.json.log"), "{\"k\":1}\n").unwrap();
    std::fs::write(ro.join("m/autotune/a.json.log.lock"), "held").unwrap();
    let s = prepare_with(&ro, "m", "[test]", |_| false);
    assert_eq!(s.private_of.as_deref(), Some(ro.join("m").as_path()));
    assert_eq!(s.cached, 1);
    assert!(s.dir.join("autotune/a.json.log").is_file());
    assert!(!s.dir.join("autotune/a.json.log.lock").exists());
    assert!(s.summary().contains(&ro.join("m").display().to_string()));
}
