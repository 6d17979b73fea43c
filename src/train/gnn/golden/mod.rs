//! Port-level golden tests of the objective's extras against values computed by the
//! reference's own code (`tests/golden/clg_ode_extras_golden.py` →
//! `tests/fixtures/clg-ode-extras-golden.json`). Each case's reference flags go through our
//! command line, so the flag → setting mapping is checked on the way.
//!
//! This file: loading the golden and our flags; [`terms`]: one test per term (topology,
//! GradNorm, decoder, edge losses, mask diagnostics, innovation); [`batch`]: the reference's
//! tiny model on its batch, the whole objective and GradNorm from our own gradients;
//! [`passes`]: passes that must equal one another bit for bit on that batch.

use burn::backend::Flex;
use burn::module::Param;
use burn::prelude::*;
use burn::tensor::TensorData;
use serde_json::Value;

use super::GnnSettings;
use crate::cli::Command;
use crate::models::clg_ode::objective::config::linear_factor;
use crate::models::clg_ode::objective::diagnostics::mask_diagnostics;
use crate::models::clg_ode::objective::stats::Origin;
use crate::models::clg_ode::objective::topology::{self, heat_trace};
use crate::models::clg_ode::objective::{
    GradNorm, Objective, ObjectiveConfig, Stat, Term, innovation,
};

use crate::models::clg_ode::{ConnDecoder, DecoderConfig, ModelSizes, Start};

type B = Flex;

mod batch;
mod decoder_terms;
mod passes;
mod terms;

fn golden() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/clg-ode-extras-golden.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn dev() -> burn::backend::flex::FlexDevice {
    burn::backend::flex::FlexDevice
}

/// A number of the golden (non-finite ones are strings).
fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => s.parse().unwrap(),
        v => v.as_f64().unwrap(),
    }
}

fn flat(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        v => vec![num(v)],
    }
}

fn flat32(v: &Value) -> Vec<f32> {
    flat(v).into_iter().map(|x| x as f32).collect()
}

/// `trainer train-gnn <paths> <flags>` parsed and resolved by our command line.
fn args(flags: &Value) -> GnnSettings {
    let mut argv: Vec<String> = [
        "trainer",
        "train-gnn",
        "--sc_dir",
        "s",
        "--morph_root",
        "m",
        "--subject_info_csv",
        "t",
        "--results_dir",
        "r",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Value::Array(f) = flags {
        argv.extend(f.iter().map(|v| v.as_str().unwrap().to_string()));
    }
    match crate::cli::config::parse_from(argv.into_iter().map(Into::into).collect())
        .unwrap()
        .command
    {
        Command::TrainGnn(a) => a.resolve().unwrap().settings,
        _ => unreachable!(),
    }
}

fn objective(flags: &Value) -> ObjectiveConfig {
    args(flags).objective
}

/// `a` (ours) within `rel` relative (plus 1e-12 absolute) of `b` (the reference's value,
/// computed once by its own code on another machine and stored in the golden). Prints the
/// error as a fraction of the allowed one, so that each caller's margin can be read off
/// `cargo test -- --nocapture`.
///
/// The tolerances the callers pass, by what differs between the two sides:
/// * 1e-12: f64 scalar arithmetic on recorded inputs (GradNorm's update, the warm-up factors,
///   the scale EMA, the innovation gate): the same formula in IEEE f64 on both sides, so the
///   results differ by a few ulps (≈ 1e-16 relative) at most, where an operation is ordered
///   differently; no sum of many terms, no SIMD, no threads, so it holds on every CPU.
/// * 1e-9: ratios of counts (precision/recall at k, AUPRC over a few dozen ranked pairs) and
///   GradNorm's manifold weight from our own gradient norms: exact but for f64 rounding.
/// * 1e-6 to 2e-4: an f32 computation (Flex on the CPU, or our f32 host code) against the
///   reference's f32 PyTorch or f64 numpy: the sums are reassociated (PyTorch's vectorised
///   reductions vs Flex's macerator sums, whose lane count is the CPU's: 8 on AVX2, 16 on
///   AVX-512; gemm's micro-kernels), which moves a sum of n terms by ≤ n·u·Σ|x|, u = 2^-24,
///   and by ≈ √n·u·‖x‖ typically. Each caller says which bound applies and what was measured.
fn close(a: f64, b: f64, rel: f64, what: &str) {
    let allowed = rel * b.abs().max(1e-12) + 1e-12;
    eprintln!(
        "{what}: error {:.1e}, {:.1e} of the tolerance {rel:e}",
        (a - b).abs() / b.abs().max(1e-12),
        (a - b).abs() / allowed
    );
    assert!((a - b).abs() <= allowed, "{what}: ours {a}, reference {b}");
}
