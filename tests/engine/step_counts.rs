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
/// the steps make three uploads in the run's first epoch (the split, once, and the epoch's
/// order, at its first step: 3/63 per step) and the same operations as the bench's step, and the loss is read only where the
/// engine shows or checks it: here (no progress line due within the epoch) once, at the
/// epoch's last step, for all 63 steps (1/63 of a read per step); never inside a step.
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
            "--log-every-secs",
            "100000",
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
    // 1000 items in steps of 16: 63 steps; the line shows three significant digits. Uploads:
    // the split's images and labels (once a run) and the epoch's order, at the first step.
    let per_step = |n: f64| n / 63.0;
    assert!((count("uploads") - per_step(3.0)).abs() < 5e-5, "{line}");
    assert!(
        (count("host reads/step") - per_step(1.0)).abs() < 5e-5,
        "{line}"
    );
    let (bench_ops, _, _) = bench_mnist_counts(t.path(), "flex").0;
    assert_eq!(count("ops,"), bench_ops, "{line}");
}

/// The loss read once per progress interval still stops a diverging run at the step where it
/// diverged: the same message, step included, as with the loss read every step (`--log-steps`
/// keeps each step's loss on the host for `steps.csv`), and no checkpoint of the diverged
/// weights.
#[test]
fn a_diverging_run_stops_at_the_same_step_with_the_loss_read_late() {
    let t = tempfile::tempdir().unwrap();
    let data = fashion_dir();
    let message = |extra: &[&str], name: &str| {
        let out = t.path().join(name);
        let mut args = vec![
            "train-mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--limit-train",
            "640",
            "--limit-test",
            "64",
            "--batch-size",
            "16",
            "--epochs",
            "1",
            "--lr",
            "1e12",
            "--log-every-secs",
            "100000",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = run_in(t.path(), &args);
        assert!(
            !o.status.success(),
            "a learning rate of 1e12 trained through"
        );
        let err = stderr(&o);
        let line = err
            .lines()
            .find(|l| l.contains("training diverged at"))
            .unwrap_or_else(|| panic!("no divergence message in {err}"))
            .to_string();
        assert!(
            !out.join("checkpoints/last.safetensors").exists(),
            "{name}: a checkpoint of diverged weights"
        );
        line[line.find("training diverged").unwrap()..].to_string()
    };
    let late = message(&[], "late");
    let every_step = message(&["--log-steps"], "every");
    assert_eq!(late, every_step);
    assert!(
        !late.contains("step 40:"),
        "diverged only at the end: {late}"
    );
}
