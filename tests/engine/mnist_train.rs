//! Training on real Fashion-MNIST (Debian's dataset-fashion-mnist): accuracy, reproducibility,
//! exact resume, checkpoint round trip and Python readability.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

fn train(cwd: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let data = fashion_dir();
    let mut args = vec![
        "train-mnist",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run_in(cwd, &args)
}

fn ok(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "trainer failed ({:?}):\n{}",
        o.status.code(),
        stderr(o)
    );
}

#[test]
fn short_run_beats_chance_clearly_and_writes_its_run_directory() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("run");
    let o = train(
        t.path(),
        &out,
        &["--limit-train", "5000", "--limit-test", "1000"],
    );
    ok(&o);
    let rows = metrics_without_timing(&out);
    assert_eq!(rows.len(), 1);
    let acc = rows[0]["test_accuracy"].as_f64().unwrap();
    assert!(acc >= 0.70, "test accuracy {acc} below 70%");
    for f in [
        "args.json",
        "run_meta.json",
        "metrics.csv",
        "checkpoints/last.safetensors",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    // Without `--keep-checkpoints all`, no file per epoch.
    assert!(!out.join("checkpoints/epoch_001.safetensors").exists());
    let args: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("args.json")).unwrap()).unwrap();
    assert_eq!(args["limit_train"], 5000);
    assert_eq!(args["backend"], "flex");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("run_meta.json")).unwrap()).unwrap();
    assert_eq!(meta["device"], "cpu");
    let csv = std::fs::read_to_string(out.join("metrics.csv")).unwrap();
    assert!(
        csv.starts_with("epoch,train_loss,test_loss,test_accuracy,lr,steps,img_per_s,seconds,allreduce_seconds\n"),
        "{csv}"
    );
}

#[test]
fn same_seed_same_metrics_and_weights() {
    let t = tempfile::tempdir().unwrap();
    let args = ["--limit-train", "640", "--limit-test", "300", "--seed", "7"];
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    ok(&train(t.path(), &a, &args));
    ok(&train(t.path(), &b, &args));
    // Exact: the same binary, machine, seed and thread count (and the kernels do not depend
    // on the thread count anyway). Not a cross-machine claim.
    assert_eq!(metrics_without_timing(&a), metrics_without_timing(&b));
    assert_eq!(
        checkpoint_tensors(&a.join("checkpoints/last.safetensors")),
        checkpoint_tensors(&b.join("checkpoints/last.safetensors"))
    );
    // A different seed gives different weights (the comparison above can fail).
    let c = t.path().join("c");
    ok(&train(
        t.path(),
        &c,
        &["--limit-train", "640", "--limit-test", "300", "--seed", "8"],
    ));
    assert_ne!(
        checkpoint_tensors(&a.join("checkpoints/last.safetensors")),
        checkpoint_tensors(&c.join("checkpoints/last.safetensors"))
    );
}

#[test]
fn interrupted_then_resumed_equals_uninterrupted() {
    let t = tempfile::tempdir().unwrap();
    let common = [
        "--limit-train",
        "640",
        "--limit-test",
        "300",
        "--epochs",
        "2",
        "--batch-size",
        "64",
        // The finished runs' optimiser state compared too (else dropped at the end).
        "--keep-checkpoints",
        "resume",
    ];
    let whole = t.path().join("whole");
    ok(&train(t.path(), &whole, &common));

    let parts = t.path().join("parts");
    let mut first = common.to_vec();
    first.extend(["--stop-after-steps", "13"]);
    let o = train(t.path(), &parts, &first);
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(stderr(&o).contains("epoch 2 step 3"), "{}", stderr(&o));
    assert_eq!(
        metrics_without_timing(&parts).len(),
        1,
        "epoch 1 row written before the stop"
    );

    let mut second = common.to_vec();
    second.extend(["--resume", "auto"]);
    let o = train(t.path(), &parts, &second);
    ok(&o);
    assert!(stderr(&o).contains("resuming from"), "{}", stderr(&o));

    assert_eq!(
        metrics_without_timing(&whole),
        metrics_without_timing(&parts)
    );
    assert_eq!(
        checkpoint_tensors(&whole.join("checkpoints/last.safetensors")),
        checkpoint_tensors(&parts.join("checkpoints/last.safetensors"))
    );
}

#[test]
fn checkpoint_round_trip_gives_identical_predictions_and_reads_in_python() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("run");
    ok(&train(
        t.path(),
        &out,
        // The whole resume checkpoint (optimiser state, counters) read in Python.
        &[
            "--limit-train",
            "640",
            "--limit-test",
            "500",
            "--keep-checkpoints",
            "resume",
        ],
    ));
    let ckpt = out.join("checkpoints/last.safetensors");
    let data = fashion_dir();
    let eval = |_: ()| {
        let o = run_in(
            t.path(),
            &[
                "eval",
                "--checkpoint",
                ckpt.to_str().unwrap(),
                "--data-dir",
                data.to_str().unwrap(),
                "--limit-test",
                "500",
                "--json",
            ],
        );
        ok(&o);
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()
    };
    let (e1, e2) = (eval(()), eval(()));
    assert_eq!(e1, e2, "two evaluations of one checkpoint differ");
    let rows = metrics_without_timing(&out);
    assert_eq!(
        e1["accuracy"], rows[0]["test_accuracy"],
        "eval differs from the in-training evaluation"
    );
    let total: u64 = e1["confusion"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap())
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(total, 500);

    let script = r#"
import sys
from safetensors import safe_open
with safe_open(sys.argv[1], framework="numpy") as f:
    meta = f.metadata()
    assert meta["format"] == "trainer-checkpoint/1", meta
    assert meta["model"] == "mnist_cnn", meta
    shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
expected = {
    "model.conv1.weight": (32, 1, 3, 3), "model.conv1.bias": (32,),
    "model.conv2.weight": (64, 32, 3, 3), "model.conv2.bias": (64,),
    "model.fc1.weight": (9216, 128), "model.fc1.bias": (128,),
    "model.fc2.weight": (128, 10), "model.fc2.bias": (10,),
    "optim.adam.moment_1.conv1.weight": (288,), "optim.adam.moment_2.fc2.bias": (10,),
    "optim.adam.time.fc2.bias": (), "train.epoch": (), "train.global_step": (), "rng.seed": (),
}
for k, s in expected.items():
    assert shapes.get(k) == s, (k, shapes.get(k), s)
with safe_open(sys.argv[1], framework="numpy") as f:
    assert int(f.get_tensor("train.epoch")) == 1
    assert int(f.get_tensor("train.global_step")) == 10
print("ok", len(shapes))
"#;
    let o = Command::new(std::env::var("TRAINER_PYTHON").unwrap_or("python3".into()))
        .args(["-c", script, ckpt.to_str().unwrap()])
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "python safetensors check failed: {}{}",
        stdout(&o),
        stderr(&o)
    );
    assert!(stdout(&o).starts_with("ok "));
}

/// The job chooses its optimiser: `--optimizer sgd --momentum 0.9` trains (its loss falls),
/// records itself in `args.json`, resumes bit for bit, and a checkpoint is not resumed by
/// another optimiser; `--momentum` without SGD is refused before training.
#[test]
fn sgd_with_momentum_trains_resumes_exactly_and_refuses_adams_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let common = [
        "--limit-train",
        "640",
        "--limit-test",
        "300",
        "--epochs",
        "2",
        "--optimizer",
        "sgd",
        "--momentum",
        "0.9",
        "--lr",
        "0.02",
        // The finished runs' optimiser state compared too (else dropped at the end).
        "--keep-checkpoints",
        "resume",
    ];
    let whole = t.path().join("whole");
    ok(&train(t.path(), &whole, &common));
    let rows = metrics_without_timing(&whole);
    let loss = |r: &serde_json::Value| r["train_loss"].as_f64().unwrap();
    assert!(loss(&rows[1]) < loss(&rows[0]), "{rows:?}");
    let args: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(whole.join("args.json")).unwrap()).unwrap();
    assert!(
        args.to_string()
            .contains("sgd(momentum=0.9), lr x lr_gamma per epoch"),
        "{args}"
    );

    let parts = t.path().join("parts");
    let mut first = common.to_vec();
    first.extend(["--stop-after-steps", "13"]);
    assert_eq!(train(t.path(), &parts, &first).status.code(), Some(75));
    let mut second = common.to_vec();
    second.extend(["--resume", "auto"]);
    ok(&train(t.path(), &parts, &second));
    assert_eq!(
        metrics_without_timing(&whole),
        metrics_without_timing(&parts)
    );
    assert_eq!(
        checkpoint_tensors(&whole.join("checkpoints/last.safetensors")),
        checkpoint_tensors(&parts.join("checkpoints/last.safetensors"))
    );

    // Adam's checkpoint, resumed with SGD: refused, naming both.
    let adam = t.path().join("adam");
    let o = train(
        t.path(),
        &adam,
        &[
            "--limit-train",
            "640",
            "--limit-test",
            "300",
            "--epochs",
            "2",
            "--stop-after-steps",
            "3",
        ],
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let o = train(
        t.path(),
        &adam,
        &[
            "--limit-train",
            "640",
            "--limit-test",
            "300",
            "--epochs",
            "2",
            "--optimizer",
            "sgd",
            "--resume",
            "auto",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(
            "checkpoint adam(beta1=0.9, beta2=0.999, eps=1e-8), this run sgd(momentum=0)"
        ),
        "{}",
        stderr(&o)
    );

    let o = train(t.path(), &t.path().join("x"), &["--momentum", "0.9"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--momentum applies to --optimizer sgd only"),
        "{}",
        stderr(&o)
    );
}
