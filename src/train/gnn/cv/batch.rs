//! The run's batch (subjects per optimiser step and rank), resolved once before the
//! configuration is written, so `args.json` and `config.toml` carry the number used:
//!
//! 1. `--batch-size N` when given;
//! 2. resuming, the batch of the checkpoint (its settings fingerprint), so a requeued job that
//!    repeats its command line resumes whatever the GPU's free memory is now;
//! 3. on a CPU, and for every forecaster that does not say what a subject costs on a GPU, 2
//!    (the reference's `--batch_size`);
//! 4. on a CUDA GPU (`tch`, `cuda`) for a forecaster that does ([`Forecaster::gpu_bytes_per_subject`]):
//!    `min(256, ⌊½ · free memory / bytes per subject⌋, ⌈training subjects / 8⌉)`, at least 2:
//!    half the memory NVML reports free on the rank's GPU (the rest for LibTorch's workspace,
//!    its cache's fragmentation and validation), no more than an epoch of 8 steps (a step's
//!    noise is what Adam's constant learning rate was tuned with: bigger batches take fewer
//!    steps an epoch), 256 at most. With several ranks, the smallest rank's. Unknown free
//!    memory (no NVML): 2, said.
//!
//! The line printed at the start says which rule gave the number and how to override it.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::super::settings::REFERENCE_BATCH;
use super::Forecaster;
use crate::backend::{BackendKind, DeviceSpec, Placement};
use crate::cluster::Vars;
use crate::cluster::gpu_memory::free_memory;
use crate::dist::Collective;
use crate::toolbox::checkpoint::Checkpoint;

/// The largest default batch on a GPU.
pub(crate) const GPU_BATCH_CAP: usize = 256;
/// The share of the GPU's free memory a default batch may take.
pub(crate) const MEMORY_SHARE: f64 = 0.5;
/// The fewest optimiser steps an epoch of a default GPU batch takes.
pub(crate) const MIN_STEPS_PER_EPOCH: usize = 8;

/// The batch and the sentence saying why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BatchChoice {
    pub batch: usize,
    pub why: String,
}

/// What the rule reads of the run.
pub(crate) struct BatchInputs<'a> {
    /// `--batch-size`, if given.
    pub given: Option<usize>,
    /// The checkpoint the run resumes from.
    pub resume: Option<&'a Path>,
    pub placement: Placement,
    /// Nodes per connectome.
    pub nodes: usize,
    /// The fewest training subjects of the folds trained.
    pub train_subjects: usize,
}

/// Resolves the batch of forecaster `F` (see the module's rule). Every rank calls it.
pub(crate) fn resolve<F: Forecaster>(
    inputs: &BatchInputs<'_>,
    comm: &dyn Collective,
) -> Result<BatchChoice> {
    if let Some(batch) = inputs.given {
        return Ok(BatchChoice {
            batch,
            why: "--batch-size".into(),
        });
    }
    if let Some(path) = inputs.resume {
        return from_checkpoint(path, comm.size());
    }
    let per_subject = F::gpu_bytes_per_subject(inputs.nodes);
    let ordinal = match inputs.placement.device {
        DeviceSpec::Cuda(i) if cuda_backend(inputs.placement.backend) => i,
        DeviceSpec::Cuda(_) => {
            return Ok(BatchChoice {
                batch: REFERENCE_BATCH,
                why: format!(
                    "the reference's (the {} backend's GPU memory is not read)",
                    inputs.placement.backend.name()
                ),
            });
        }
        DeviceSpec::Cpu => {
            return Ok(BatchChoice {
                batch: REFERENCE_BATCH,
                why: "the reference's, on a CPU".into(),
            });
        }
    };
    let Some(per_subject) = per_subject else {
        return Ok(BatchChoice {
            batch: REFERENCE_BATCH,
            why: format!(
                "the reference's (--model {} is not sized to the GPU)",
                F::KIND
            ),
        });
    };
    let ordinal = u32::try_from(ordinal).unwrap_or(u32::MAX);
    let local = match free_memory(&Vars::from_process(), ordinal) {
        Ok(m) => {
            let b = gpu_batch(m.free, per_subject, inputs.train_subjects);
            let why = format!(
                "sized to the GPU: min({GPU_BATCH_CAP}, ½ · {:.1} GB free on {} / {:.0} MB a \
                 subject at {} nodes = {}, {} training subjects / {MIN_STEPS_PER_EPOCH} steps = \
                 {})",
                m.free as f64 / 1e9,
                m.what,
                per_subject as f64 / 1e6,
                inputs.nodes,
                by_memory(m.free, per_subject),
                inputs.train_subjects,
                inputs.train_subjects.div_ceil(MIN_STEPS_PER_EPOCH),
            );
            BatchChoice { batch: b, why }
        }
        Err(reason) => BatchChoice {
            batch: REFERENCE_BATCH,
            why: format!("the reference's: the GPU's free memory is unknown ({reason})"),
        },
    };
    smallest_over_ranks(local, comm)
}

fn cuda_backend(b: BackendKind) -> bool {
    matches!(b, BackendKind::Tch | BackendKind::Cuda)
}

/// Subjects whose training step fits in [`MEMORY_SHARE`] of `free` bytes.
pub(crate) fn by_memory(free: u64, per_subject: u64) -> usize {
    (free as f64 * MEMORY_SHARE / per_subject.max(1) as f64).floor() as usize
}

/// The GPU rule: `min(cap, memory, ⌈train / 8⌉)`, at least the reference's 2.
pub(crate) fn gpu_batch(free: u64, per_subject: u64, train_subjects: usize) -> usize {
    by_memory(free, per_subject)
        .min(GPU_BATCH_CAP)
        .min(train_subjects.div_ceil(MIN_STEPS_PER_EPOCH))
        .max(REFERENCE_BATCH)
}

/// What `config.toml` gains: the batch, when the command line left it to the rule.
pub(crate) fn settled(given: bool, batch: usize) -> toml::Table {
    let mut t = toml::Table::new();
    if !given {
        let mut optim = toml::Table::new();
        optim.insert("batch_size".into(), toml::Value::Integer(batch as i64));
        t.insert(
            crate::settings::OPTIM.to_ascii_lowercase(),
            toml::Value::Table(optim),
        );
    }
    t
}

/// The per-rank batch of the run a resume checkpoint was written by.
fn from_checkpoint(path: &Path, world: usize) -> Result<BatchChoice> {
    let meta = Checkpoint::read_metadata(path)?;
    let name = path.display();
    let effective = meta
        .get("fingerprint")
        .and_then(|f| serde_json::from_str::<serde_json::Value>(f).ok())
        .and_then(|f| f.get("effective_batch_size")?.as_u64())
        .with_context(|| {
            format!(
                "{name}: the checkpoint does not say its batch (no effective_batch_size in its \
                 settings fingerprint): pass --batch-size"
            )
        })?;
    let effective = usize::try_from(effective).unwrap_or(usize::MAX);
    if world == 0 || !effective.is_multiple_of(world) || effective < world {
        bail!(
            "{name}: the checkpoint's run took {effective} subjects a step, which {world} \
             rank(s) cannot share evenly: resume with its number of ranks, or pass --batch-size"
        );
    }
    Ok(BatchChoice {
        batch: effective / world,
        why: format!("the checkpoint's ({name})"),
    })
}

/// The smallest of the ranks' batches, with its reason (every rank must take the same).
fn smallest_over_ranks(local: BatchChoice, comm: &dyn Collective) -> Result<BatchChoice> {
    let world = comm.size();
    if world <= 1 {
        return Ok(local);
    }
    let mut all = vec![0.0f64; world];
    all[comm.rank()] = local.batch as f64;
    comm.all_reduce_sum_f64(&mut all)?;
    let min = all.iter().copied().fold(f64::INFINITY, f64::min) as usize;
    if min == local.batch {
        return Ok(local);
    }
    Ok(BatchChoice {
        batch: min,
        why: format!(
            "the smallest of the {world} ranks' (this rank's: {})",
            local.why
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;
    const MB: u64 = 1_000_000;

    #[test]
    fn the_gpu_rule_takes_the_smallest_bound() {
        // Memory binds: a 16 GB V100 (15 GB free) at 292 MB a subject holds 25 in half.
        assert_eq!(gpu_batch(15 * GB, 292 * MB, 2_921), 25);
        assert_eq!(by_memory(15 * GB, 292 * MB), 25);
        // Steps bind: 640 training subjects keep 8 steps an epoch at 80.
        assert_eq!(gpu_batch(139 * GB, 292 * MB, 640), 80);
        // The cap binds on a large cohort and a large GPU.
        assert_eq!(gpu_batch(139 * GB, 100 * MB, 10_000), GPU_BATCH_CAP);
        // Never below the reference's batch, even when memory says so.
        assert_eq!(gpu_batch(GB / 10, 292 * MB, 640), REFERENCE_BATCH);
        assert_eq!(gpu_batch(139 * GB, 292 * MB, 3), REFERENCE_BATCH);
    }
}
