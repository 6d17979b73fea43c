//! Malformed IDX data and unusable outputs: a clear error naming the file, a non-zero exit, and
//! no run directory or checkpoint left behind.

use crate::common;

use std::path::Path;

use common::*;

fn expect_failure(data: &Path, out: &Path, needles: &[&str]) {
    let o = run_in(
        data.parent().unwrap(),
        &[
            "train-mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--limit-train",
            "20",
        ],
    );
    let err = stderr(&o);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "panicked: {err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`:\n{err}");
    }
    assert!(
        !out.join("checkpoints/last.safetensors").exists(),
        "a checkpoint was written despite the error"
    );
}

#[test]
fn wrong_magic_is_named() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("data");
    write_tiny_mnist(&d, 20);
    let f = d.join("train-images-idx3-ubyte");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[0] = 0x12;
    std::fs::write(&f, bytes).unwrap();
    expect_failure(
        &d,
        &t.path().join("run"),
        &["train-images-idx3-ubyte", "wrong magic"],
    );
}

#[test]
fn truncated_file_is_named() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("data");
    write_tiny_mnist(&d, 20);
    let f = d.join("t10k-images-idx3-ubyte");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() - 100]).unwrap();
    expect_failure(
        &d,
        &t.path().join("run"),
        &["t10k-images-idx3-ubyte", "truncated"],
    );
}

#[test]
fn truncated_gzip_is_named() {
    use std::io::Write;
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("data");
    write_tiny_mnist(&d, 20);
    let f = d.join("train-labels-idx1-ubyte");
    let raw = std::fs::read(&f).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    let gz = gz.finish().unwrap();
    std::fs::remove_file(&f).unwrap();
    std::fs::write(d.join("train-labels-idx1-ubyte.gz"), &gz[..gz.len() / 2]).unwrap();
    expect_failure(
        &d,
        &t.path().join("run"),
        &["train-labels-idx1-ubyte.gz", "gzip"],
    );
}

#[test]
fn count_mismatch_is_named() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("data");
    write_tiny_mnist(&d, 20);
    std::fs::write(d.join("train-labels-idx1-ubyte"), idx(&[19], &[1; 19])).unwrap();
    expect_failure(
        &d,
        &t.path().join("run"),
        &["count mismatch", "20 images", "19 labels"],
    );
}

#[test]
fn label_out_of_range_is_named() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("data");
    write_tiny_mnist(&d, 20);
    let mut labels = vec![3u8; 20];
    labels[7] = 10;
    std::fs::write(d.join("train-labels-idx1-ubyte"), idx(&[20], &labels)).unwrap();
    expect_failure(
        &d,
        &t.path().join("run"),
        &["train-labels-idx1-ubyte", "label 10 at index 7"],
    );
}

#[test]
fn missing_file_is_named() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("data");
    write_tiny_mnist(&d, 20);
    std::fs::remove_file(d.join("t10k-labels-idx1-ubyte")).unwrap();
    expect_failure(
        &d,
        &t.path().join("run"),
        &["missing file", "t10k-labels-idx1-ubyte"],
    );
}

#[test]
fn unwritable_output_is_named() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path().join("data");
    write_tiny_mnist(&d, 20);
    // A run directory below a regular file can never be created, even by root.
    let blocker = t.path().join("not-a-dir");
    std::fs::write(&blocker, b"x").unwrap();
    let out = blocker.join("run");
    expect_failure(&d, &out, &["cannot create run directory", "not-a-dir"]);
}
