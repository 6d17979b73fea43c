//! Device → host reads, counted. On a GPU backend every read waits for the queued kernels (a
//! sync), so a step that reads a scalar after each op runs at the speed of the round trips.
//! Every read of this crate's own code goes through [`data`] (or its shorthands), and
//! `trainer bench` prints [`count`] per training step: what a step asks of the device, on every
//! backend alike. (A backend may add reads of its own inside an op; Burn's CubeCL ops used by
//! our models do not read back.)

use std::cell::Cell;

use burn::prelude::*;
use burn::tensor::BasicOps;
use burn::tensor::TensorData;
use burn::tensor::TensorKind;

static TRACE: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| std::env::var("TRAINER_TRACE_READS").is_ok_and(|v| v == "1"));

thread_local! {
    // Per thread: a job's reads happen on the thread that runs it, and tests running side by
    // side in one process do not see each other's.
    static READS: Cell<u64> = const { Cell::new(0) };
}

/// Reads issued so far by this thread.
pub fn count() -> u64 {
    READS.get()
}

/// Counts `n` reads that helper threads made on this thread's behalf (work it shared out over
/// rayon's pool, e.g. [`crate::toolbox::host_parallel`]).
pub fn add(n: u64) {
    READS.set(READS.get() + n);
}

/// The tensor's values on the host (one read). With `TRAINER_TRACE_READS=1` every read prints
/// its caller on stderr (to find the reads of a step).
#[track_caller]
pub fn data<B: Backend, const D: usize, K: TensorKind<B> + BasicOps<B>>(
    t: Tensor<B, D, K>,
) -> TensorData {
    READS.set(READS.get() + 1);
    if *TRACE {
        eprintln!("host read at {}", std::panic::Location::caller());
    }
    t.into_data()
}

#[track_caller]
/// The values as f32 (one read; empty if the tensor cannot be converted).
pub fn f32s<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    data(t).convert::<f32>().to_vec().unwrap_or_default()
}

#[track_caller]
/// A one-element tensor's value as f64 (one read).
pub fn scalar<B: Backend, const D: usize>(t: Tensor<B, D>) -> f64 {
    data(t)
        .convert::<f64>()
        .to_vec::<f64>()
        .ok()
        .and_then(|v| v.first().copied())
        .unwrap_or(f64::NAN)
}
