//! Data-parallel `train-gnn` with real processes under `mpirun` (feature `mpi`): 2 ranks with
//! per-rank batch b/2 follow 1 rank with batch b (every subject draws its visits and
//! augmentation from its own generator, so both score the same inputs), every rank ends with
//! the same weights, only rank 0 writes, and a 2-rank checkpoint resumes on 1 rank.
#![cfg(feature = "mpi")]

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use serde_json::Value;

fn synth(dir: &Path) {
    synth_cohort(dir, 16, 20, 7);
}

fn args(run: &str, batch: usize, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "train-gnn",
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "results",
        "--run_name",
        run,
        "--cv_fold",
        "0",
        "--max_epochs",
        "4",
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
        "--solver_steps",
        "2",
        "--learning_rate",
        "1e-3",
        "--log-every-secs",
        "1000",
        "--batch-size",
        &batch.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn mpirun(dir: &Path, args: &[String]) -> Output {
    mpirun_two(dir)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn losses(dir: &Path, run: &str) -> Vec<(f64, f64)> {
    std::fs::read_to_string(dir.join("results/runs").join(run).join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            (
                r["train_loss"].as_f64().unwrap(),
                r["val_loss"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Relative bound on the per-epoch losses of 2 ranks × batch 2 against 1 rank × batch 4.
///
/// The two runs see the same subjects with the same draws; what differs is f32 reassociation:
/// each rank sums its 2 subjects' gradients and the all-reduce adds the ranks' sums, where one
/// rank sums all 4, and the GEMM shapes (batch 2 vs 4) differ, so gemm tiles and Flex's SIMD
/// sums (whose lane count is the CPU's: 8 on AVX2, 16 on AVX-512) associate differently. Bound:
/// a reassociated sum of n ≤ 64 terms moves a gradient by ≤ n·u ≈ 4e-6 relative per step
/// (u = 2^-24), ≈ 32 f32 ulps; carried through Adam (lr 1e-3, 4 epochs here) such perturbations
/// move the losses smoothly: with every Adam step perturbed by k ulps (the learning rate
/// 1e-3·(1 ± k·1.2e-7), k ≤ 7, this configuration) the losses moved by ≈ 1e-7·k, so 32 ulps
/// per step give ≈ 3e-6. Measured here (AMD EPYC, AVX2): 5.7e-8 with RAYON_NUM_THREADS=1 and
/// 4 (the resumed run too). The old bound, 1e-5, was only 3× that worst case (the MNIST
/// analogue in tests/engine/ddp.rs, the same kind of gap, failed its 1e-5 on an AVX-512 CPU); 1e-4
/// is 30× it, while a real sharding error is far outside: a batch of 2 or 3 subjects instead
/// of 4 moves the losses by 4e-2 to 5e-1.
const REASSOCIATION_BOUND: f64 = 1e-4;

/// Per epoch, train and validation loss within [`REASSOCIATION_BOUND`] relative.
fn compare(reference: &[(f64, f64)], other: &[(f64, f64)]) {
    assert_eq!(reference.len(), other.len(), "different epoch counts");
    let worst = reference
        .iter()
        .zip(other)
        .flat_map(|(a, b)| [(a.0, b.0), (a.1, b.1)])
        .map(|(x, y)| (x - y).abs() / x.abs().max(1e-12))
        .fold(0.0f64, f64::max);
    eprintln!("1 rank vs 2 ranks: worst relative gap {worst:.1e}\n{reference:?}\n{other:?}");
    for (e, (a, b)) in reference.iter().zip(other).enumerate() {
        for (x, y) in [(a.0, b.0), (a.1, b.1)] {
            let rel = (x - y).abs() / x.abs().max(1e-12);
            assert!(
                rel <= REASSOCIATION_BOUND,
                "epoch {}: {reference:?} vs {other:?} (relative {rel:e})",
                e + 1
            );
        }
    }
}

#[test]
fn clg_ode_two_ranks_under_mpirun_match_one_rank_and_resume_on_one() {
    let t = tempfile::tempdir().unwrap();
    synth(t.path());
    let o = run_in(t.path(), &args_ref(&args("one", 4, &[])));
    assert!(o.status.success(), "{}", stderr(&o));
    let reference = losses(t.path(), "one");

    let o = mpirun(t.path(), &args("two", 2, &[]));
    let log = stderr(&o);
    assert!(o.status.success(), "{log}");
    let digests: Vec<&str> = log
        .lines()
        .filter_map(|l| l.split("parameter digest ").nth(1))
        .collect();
    assert_eq!(digests.len(), 2, "{log}");
    // Exact across the two rank processes: both apply the same all-reduced gradient to the
    // same weights with the same binary on the same machine.
    assert_eq!(
        digests[0], digests[1],
        "ranks hold different weights:\n{log}"
    );
    compare(&reference, &losses(t.path(), "two"));
    let runs: Vec<_> = std::fs::read_dir(t.path().join("results/runs"))
        .unwrap()
        .collect();
    assert_eq!(runs.len(), 2, "only rank 0 creates a run directory");
    let run = t.path().join("results/runs/two");
    let meta: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run_meta.json")).unwrap()).unwrap();
    assert_eq!(meta["world_size"], 2);
    assert_eq!(meta["extra"]["effective_batch_size"], 4);
    assert!(run.join("test_metrics.json").exists());

    // Stopped after 5 steps on 2 ranks (mid epoch 2), resumed on 1 rank with the same
    // effective batch: the same trajectory as the uninterrupted runs.
    let o = mpirun(t.path(), &args("moved", 2, &["--stop-after-steps", "5"]));
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let o = run_in(
        t.path(),
        &args_ref(&args("moved", 4, &["--resume", "auto"])),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    compare(&reference, &losses(t.path(), "moved"));
}

fn args_ref(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}
