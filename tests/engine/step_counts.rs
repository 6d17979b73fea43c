//! What a training step asks of the device, counted on the CPU (issue 72's counters: on a GPU
//! every operation is a launch, every upload a staging copy and a wait, every read a sync).
//! Counts are deterministic, so they are held by fixed thresholds here; the times live in
//! `trainer bench`.

use crate::common;

use common::step_counts::bench_mnist_counts;
use common::*;

/// `flex`: the bench's training step (data on the device) makes no upload and no read, in 71
/// operations: 63 for the CNN's forward and backward, 8 for Adam (one fused update per
/// parameter tensor). Inference: one read per batch (the predicted classes), no upload.
#[test]
fn the_flex_bench_step_makes_no_upload_no_read_and_at_most_90_ops() {
    let t = tempfile::tempdir().unwrap();
    let ((ops, uploads, reads), (i_ops, i_uploads, i_reads)) = bench_mnist_counts(t.path(), "flex");
    assert_eq!((uploads, reads), (0.0, 0.0), "training step");
    assert!(ops > 8.0 && ops <= 90.0, "training step: {ops} ops");
    assert_eq!((i_uploads, i_reads), (0.0, 1.0), "inference step");
    assert!(i_ops > 0.0 && i_ops <= 20.0, "inference step: {i_ops} ops");
}

/// `train-mnist`'s epoch line reports the step's counts; with the training split on the device
/// the steps make no upload (the epoch's order, one upload at its first step, is 1/63 of one per
/// step), and the same operations as the bench's step. Its one read per step is the loss (the
/// progress line and the divergence check read it).
#[test]
fn train_mnist_reports_its_counts_and_keeps_its_split_on_the_device() {
    let t = tempfile::tempdir().unwrap();
    let data = fashion_dir();
    let out = t.path().join("run");
    let o = run_in(
        t.path(),
        &[
            "train-mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--limit-train",
            "1000",
            "--limit-test",
            "100",
            "--batch-size",
            "16",
            "--epochs",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("epoch 1/1:"))
        .unwrap_or_else(|| panic!("no epoch line in {err}"));
    let count = |what: &str| -> f64 {
        let at = line
            .find(&format!(" {what}"))
            .unwrap_or_else(|| panic!("no {what} in {line}"));
        let head = &line[..at];
        head[head.rfind(' ').unwrap() + 1..].parse().unwrap()
    };
    assert_eq!(count("uploads"), 0.0, "{line}");
    assert_eq!(count("host reads/step"), 1.0, "{line}");
    let (bench_ops, _, _) = bench_mnist_counts(t.path(), "flex").0;
    assert_eq!(count("ops,"), bench_ops, "{line}");
}
