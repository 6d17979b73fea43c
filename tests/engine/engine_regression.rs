//! Behaviour kept across refactors: fixed-seed CPU runs of both jobs write the same metrics rows
//! (every column but the timings) as the binary before the settings/engine/launcher rework
//! (commit e90522e), recorded in tests/fixtures/regression/ with the same command lines.
//!
//! "The same" is: the same rows and columns in the same order, every integer and string
//! equal, and every float within [`RTOL`] relative (test accuracy: within one image). Not bit
//! for bit, because the recording comes from one machine and the values depend on its CPU:
//! * Flex's sums (softmax denominators, losses, means) run on macerator, which picks the
//!   widest SIMD at run time: 8 lanes on AVX2, 16 on AVX-512, 4 on SSE, each a different
//!   summation order;
//! * gemm (Flex's and the fast kernels') picks AVX-512, FMA or SSE micro-kernels at run time
//!   (and dot-product kernels for small outputs on some of them), and for inner dimensions
//!   over 512 (the CNN's fc1, k = 9216; the conv weight gradients, k = 576–676 per image) cuts
//!   the depth into blocks sized from the L1 cache's geometry and the micro-kernel's height
//!   (512 here; 1024 for an FMA kernel on a 48 KiB 12-way L1), each block's partial sums added
//!   in turn.
//!
//! The thread count does not matter (measured: `RAYON_NUM_THREADS=1` and `4` reproduce the
//! recording bit for bit here): the fast kernels cut batches by shape, gemm splits rows and
//! columns, never the depth, and Flex's only thread-dependent order, its parallel sum of
//! ≥ 4 Mi values, is not reached at these sizes.
//!
//! How far another CPU moves the rows, measured on this machine (AMD EPYC, AVX2 + FMA,
//! 32 KiB 8-way L1; it reproduces the recording bit for bit):
//! * the GNN jobs under `qemu-x86_64 -cpu Nehalem` (SSE only: no FMA, 4-lane sums): worst
//!   2.8e-6 relative (val_sc_log_pearson) for the default objective, 9.3e-7 for the preset;
//!   under `-cpu Haswell` (this machine's kernels and cache geometry): bit for bit;
//! * the MNIST job (too slow to emulate) with every Adam step perturbed by 1 to 5 f32 ulps (the
//!   learning rate 1e-3·(1 ± k·1.2e-7), k = 1, 2, 3, 5, each sign): test_loss moves by 3e-6 to
//!   1.8e-4 relative, train_loss by 4e-7 to 3.5e-5, test_accuracy not at all. The spread is
//!   Adam's: a parameter whose gradient is ≈ 0 takes a ±lr step by its sign, so an ulp can
//!   flip a whole step; reassociation on another CPU perturbs every step in the same way;
//! * the GNN jobs with the same perturbation: ≤ 1.1e-5 relative.
//!
//! [`RTOL`] = 2e-3 is 11× the worst of these, and a real change of behaviour is far outside it:
//! the MNIST job with other dropout masks (`--backend flex-plain`, its own Bernoulli stream)
//! moves epoch 1's train_loss by 1.4e-2, test_loss by 1.0e-1 and 5.5e-2 (epochs 1, 2) and
//! test_accuracy by 7 images.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

const TIMING: [&str; 7] = [
    "img_per_s",
    "subjects_per_s",
    "seconds",
    "allreduce_seconds",
    "train_cpu_seconds",
    "train_cpu_seconds_per_item",
    "eval_seconds",
];

fn rows(text: &str) -> Vec<Vec<(String, Value)>> {
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v.as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| !TIMING.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .collect()
}

/// Relative tolerance on every float column: see the module documentation for the derivation.
const RTOL: f64 = 2e-3;

/// Test images of the MNIST run (`--limit-test 200`): its accuracy moves in steps of 1/200, and
/// an image whose two best logits are within the reassociation gap of each other (≈ 1e-4
/// relative, see above) may change class on another CPU; one such image is allowed.
const MNIST_TEST_IMAGES: f64 = 200.0;

/// `want` (recorded) and `got` (now) agree: equal, or, for floats, within [`RTOL`] (the
/// accuracy: within one test image). Returns the relative gap of floats (0 when equal).
fn agree(column: &str, want: &Value, got: &Value) -> Result<f64, String> {
    match (want, got) {
        (Value::Number(w), Value::Number(g)) if w.is_f64() || g.is_f64() => {
            let (w, g) = (w.as_f64().unwrap(), g.as_f64().unwrap());
            if w == g {
                return Ok(0.0);
            }
            let gap = (w - g).abs();
            let rel = gap / w.abs().max(g.abs());
            let allowed = if column == "test_accuracy" {
                1.0 / MNIST_TEST_IMAGES + 1e-12
            } else {
                RTOL * w.abs().max(g.abs()) + 1e-12
            };
            if gap <= allowed {
                Ok(rel)
            } else {
                Err(format!(
                    "recorded {w}, now {g} (gap {gap:e}, allowed {allowed:e})"
                ))
            }
        }
        _ if want == got => Ok(0.0),
        _ => Err(format!("recorded {want}, now {got}")),
    }
}

/// The run's rows agree with the recorded ones (see [`agree`]), columns in the same order.
fn same_as_recorded(run: &Path, fixture: &str) {
    let recorded = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/regression")
            .join(fixture),
    )
    .unwrap();
    let now = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let (want, got) = (rows(&recorded), rows(&now));
    assert_eq!(want.len(), got.len(), "{fixture}: number of rows");
    let mut worst = (0.0f64, String::new());
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let wk: Vec<&String> = w.iter().map(|(k, _)| k).collect();
        let gk: Vec<&String> = g.iter().map(|(k, _)| k).collect();
        assert_eq!(wk, gk, "{fixture} row {i}: columns");
        for ((k, a), (_, b)) in w.iter().zip(g) {
            match agree(k, a, b) {
                Ok(rel) if rel > worst.0 => worst = (rel, format!("row {i} {k}")),
                Ok(_) => {}
                Err(e) => panic!("{fixture} row {i} column {k}: {e}"),
            }
        }
    }
    if worst.0 == 0.0 {
        eprintln!("{fixture}: bit for bit");
    } else {
        eprintln!(
            "{fixture}: within tolerance, worst relative gap {:.1e} ({})",
            worst.0, worst.1
        );
    }
}

#[test]
fn mnist_rows_are_unchanged() {
    let t = tempfile::tempdir().unwrap();
    let data = fashion_dir();
    let o = run_in(
        t.path(),
        &[
            "train-mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--limit-train",
            "640",
            "--limit-test",
            "200",
            "--epochs",
            "2",
            "--batch-size",
            "32",
            "--seed",
            "3",
            "--out",
            "run",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    same_as_recorded(&t.path().join("run"), "mnist.metrics.jsonl");
}

#[test]
fn gnn_rows_are_unchanged() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 12, 5);
    let data = [
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "res",
        "--batch_size",
        "4",
        "--max_epochs",
        "3",
    ];
    // The reference's default objective (topology loss, GradNorm) with small dimensions.
    let mut args = vec!["train-gnn"];
    args.extend(data);
    args.extend([
        "--cv_fold",
        "0",
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
        "--solver_steps",
        "2",
        "--val_sc_eval_every",
        "1",
        "--run-name",
        "default",
    ]);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    same_as_recorded(&t.path().join("res/runs/default"), "gnn.metrics.jsonl");

    // The shipped preset.
    let mut args = vec!["train-gnn"];
    args.extend(data);
    args.extend([
        "--cv_fold",
        "1",
        "--preset",
        "residual",
        "--run-name",
        "residual",
    ]);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    same_as_recorded(
        &t.path().join("res/runs/residual"),
        "gnn-residual.metrics.jsonl",
    );
}
