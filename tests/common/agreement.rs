//! Step-by-step agreement of a backend with `flex` (tests/backends/backend_wgpu.rs on Mesa's software
//! Vulkan, tests/backends/backend_cuda.rs on an NVIDIA GPU): the cases, the gaps and their bounds.
//!
//! Same initial weights: every case first trains one step on `flex` and stops (checkpoint);
//! then `flex` and each backend compared resume from that one checkpoint file into their own run
//! directory and take [`STEPS`] more steps on the same batches (the data order and the
//! augmentation are drawn on the host, from the seed). Compared: every step's loss
//! (`steps.csv`) and every model weight of the final checkpoints.
//!
//! Tolerances. What differs is only how each backend sums in f32: reductions and matmuls in
//! other orders and tile shapes (lavapipe runs CubeCL's shaders through LLVM with its own SIMD
//! width; NVRTC's code runs warps and shared-memory tiles), `exp`/`log` approximations of another
//! math library (a few ulps). Each op is then within ~1e-6 relative of the other (on a GPU
//! with tensor cores, matmuls stage f32 operands as TF32: ~5e-4 per operand, measured loss gaps
//! up to 4.1e-4 on an H100, docs/burn-fusion-report.md); over a few
//! Adam steps that stays ~1e-5 in the losses (Adam divides by √v, so a relative gradient error
//! becomes the same relative step error, it is not amplified), except where a gradient is ~0:
//! there the sign of m/√v can flip and that weight moves by up to 2·lr per step on one side
//! only. Hence:
//! - losses within [`LOSS_BOUND`] = 1e-3 relative (a wrong op, a wrong gradient or a batch
//!   read differently moves a loss by percents within a step or two);
//! - weights within `2·lr·steps` absolute ([`weight_bound`]), the sign-flip case, which no
//!   correct run exceeds, while a wrong gradient that Adam follows for a few steps does not
//!   stay inside it for most weights, and the losses catch the rest.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use crate::common::*;
use trainer::toolbox::checkpoint::Checkpoint;

/// Steps compared after the common first step.
pub const STEPS: usize = 4;
/// See the module doc.
pub const LOSS_BOUND: f64 = 1e-3;

/// `2·lr·STEPS`: the most a weight with a near-zero gradient can drift apart under Adam.
pub fn weight_bound(lr: f64) -> f64 {
    2.0 * lr * STEPS as f64
}

/// One comparison: a command line without its output and backend flags.
pub struct Case {
    pub name: &'static str,
    pub args: Vec<String>,
    pub lr: f64,
    /// Where `steps.csv` and the checkpoint of a run named `run` are.
    pub run_dir: fn(&Path, &str) -> PathBuf,
    /// The flags that name a run `run`.
    pub out_flags: fn(&str) -> Vec<String>,
}

pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The MNIST CNN on `limit` training images, batch 8.
pub fn mnist_case(limit: usize) -> Case {
    let data = fashion_dir();
    let mut args = strings(&[
        "train-mnist",
        "--data-dir",
        data.to_str().unwrap(),
        "--limit-train",
        &limit.to_string(),
        "--limit-test",
        "50",
        "--batch-size",
        "8",
        "--seed",
        "5",
        // Dropout draws its masks from the backend's RNG: off, so both see one network.
        "--no-dropout",
    ]);
    args.extend(strings(&["--epochs", "1"]));
    Case {
        name: "mnist-cnn",
        args,
        // train-mnist's default --lr.
        lr: 1e-3,
        run_dir: |root, run| root.join(run),
        out_flags: |run| strings(&["--out", run]),
    }
}

pub fn gnn_case(name: &'static str, extra: &[&str]) -> Case {
    let mut args = strings(&[
        "train-gnn",
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "results",
        "--cv_fold",
        "0",
        "--max_epochs",
        "3",
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
        "--solver_steps",
        "2",
        "--learning_rate",
        "1e-3",
        "--batch-size",
        "4",
        "--log-every-secs",
        "1000",
    ]);
    args.extend(strings(extra));
    Case {
        name,
        args,
        lr: 1e-3,
        run_dir: |root, run| root.join("results/runs").join(run),
        out_flags: |run| strings(&["--run_name", run]),
    }
}

/// The gap between two runs of one case.
#[derive(Debug)]
pub struct Gap {
    pub loss_rel: f64,
    pub weight_abs: f64,
    pub weight_scale: f64,
}

pub fn run(root: &Path, case: &Case, run: &str, extra: &[String]) -> std::process::Output {
    let mut args = case.args.clone();
    args.extend((case.out_flags)(run));
    args.extend(extra.iter().cloned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run_in(root, &refs)
}

pub fn step_losses(dir: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(dir.join("steps.csv"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    text.lines()
        .skip(1)
        .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
        .collect()
}

pub fn model_weights(dir: &Path) -> Vec<(String, Vec<f32>)> {
    let c = Checkpoint::load(&dir.join("checkpoints/last.safetensors")).unwrap();
    c.floats
        .into_iter()
        .filter(|(k, _)| k.starts_with("model."))
        .map(|(k, t)| (k, t.data))
        .collect()
}

pub fn gap(a: &Path, b: &Path) -> Gap {
    let (la, lb) = (step_losses(a), step_losses(b));
    assert_eq!(la.len(), lb.len(), "{} vs {}", a.display(), b.display());
    let loss_rel = la
        .iter()
        .zip(&lb)
        .map(|(x, y)| (x - y).abs() / x.abs().max(1e-12))
        .fold(0.0, f64::max);
    let (wa, wb) = (model_weights(a), model_weights(b));
    assert_eq!(wa.len(), wb.len());
    let (mut weight_abs, mut weight_scale) = (0.0f64, 0.0f64);
    for ((ka, va), (kb, vb)) in wa.iter().zip(&wb) {
        assert_eq!(ka, kb);
        for (x, y) in va.iter().zip(vb) {
            weight_abs = weight_abs.max((x - y).abs() as f64);
            weight_scale = weight_scale.max(x.abs() as f64);
        }
    }
    Gap {
        loss_rel,
        weight_abs,
        weight_scale,
    }
}

/// Trains the common first step on flex, then [`STEPS`] steps on flex and on each of `backends`
/// (a name and its extra flags, e.g. `("cuda", &["--device", "cuda"])`); returns each
/// backend's gap to `flex`.
pub fn compare(
    root: &Path,
    case: &Case,
    backends: &[(&str, &[&str])],
) -> Vec<(String, Result<Gap, String>)> {
    let base = format!("{}-base", case.name);
    let o = run(root, case, &base, &strings(&["--stop-after-steps", "1"]));
    assert_eq!(o.status.code(), Some(75), "{}: {}", case.name, stderr(&o));
    let ckpt = (case.run_dir)(root, &base).join("checkpoints/last.safetensors");
    let cont = |backend: &str, flags: &[&str]| {
        let name = format!("{}-{backend}", case.name);
        let mut extra = strings(&[
            "--resume",
            ckpt.to_str().unwrap(),
            "--backend",
            backend,
            "--stop-after-steps",
            &STEPS.to_string(),
            "--log-steps",
        ]);
        extra.extend(strings(flags));
        let o = run(root, case, &name, &extra);
        match o.status.code() {
            Some(75) => Ok((case.run_dir)(root, &name)),
            _ => Err(format!("{backend} exited {:?}: {}", o.status, stderr(&o))),
        }
    };
    let flex = cont("flex", &[]).unwrap_or_else(|e| panic!("{}: {e}", case.name));
    backends
        .iter()
        .map(|(backend, flags)| {
            let gap = cont(backend, flags).map(|dir| gap(&flex, &dir));
            (backend.to_string(), gap)
        })
        .collect()
}

/// Runs every case against `backends` and returns the table (markdown) and, per backend, the
/// cases outside the bounds.
pub fn agreement_table(
    root: &Path,
    cases: &[Case],
    backends: &[(&str, &[&str])],
) -> (String, Vec<(String, String)>) {
    let mut table = String::from(
        "| case | backend | max rel. loss gap | max weight gap | largest weight |\n|---|---|---|---|---|\n",
    );
    let mut failures = Vec::new();
    for case in cases {
        for (backend, gap) in compare(root, case, backends) {
            match gap {
                Ok(g) => {
                    let row = format!(
                        "| {} | {backend} | {:.1e} | {:.1e} | {:.2} |\n",
                        case.name, g.loss_rel, g.weight_abs, g.weight_scale
                    );
                    eprint!("{row}");
                    table.push_str(&row);
                    if let Some(why) = outside(case, &backend, &g) {
                        failures.push((backend, why));
                    }
                }
                Err(e) => {
                    table.push_str(&format!("| {} | {backend} | failed | | |\n", case.name));
                    failures.push((backend, format!("{}: {e}", case.name)));
                }
            }
        }
    }
    eprintln!("{table}");
    (table, failures)
}

/// Why `gap` is outside the bounds, if it is.
pub fn outside(case: &Case, backend: &str, gap: &Gap) -> Option<String> {
    (gap.loss_rel > LOSS_BOUND || gap.weight_abs > weight_bound(case.lr)).then(|| {
        format!(
            "{} on {backend}: {gap:?} (bounds: loss {LOSS_BOUND:e} relative, weights {:e})",
            case.name,
            weight_bound(case.lr)
        )
    })
}

/// Every float of `got.model` within [`LOSS_BOUND`] relative of `want.model` (`test_metrics.json`
/// / eval-gnn's `metrics.json`); returns how many were compared.
pub fn same_model_metrics(want: &serde_json::Value, got: &serde_json::Value, what: &str) -> usize {
    let mut compared = 0;
    for (key, a) in want["model"].as_object().expect("model metrics") {
        let (Some(a), Some(b)) = (a.as_f64(), got["model"][key].as_f64()) else {
            continue;
        };
        compared += 1;
        let rel = (a - b).abs() / a.abs().max(1e-6);
        assert!(rel <= LOSS_BOUND, "{what}: {key}: {a} vs {b} ({rel:e})");
    }
    assert!(compared >= 3, "{what}: no metrics compared: {want}");
    compared
}

pub fn json(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}
