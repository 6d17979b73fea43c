//! Device → host reads, counted. On a GPU backend every read waits for the queued kernels (a
//! sync), so a step that reads a scalar after each op runs at the speed of the round trips.
//! Every read of this crate's own code goes through [`data`] (or its shorthands), and
//! `trainer bench` prints [`count`] per training step: what a step asks of the device, on every
//! backend alike. (A backend may add reads of its own inside an op; Burn's CubeCL ops used by
//! our models do not read back.)
//!
//! [`Counts`] adds the backend operations and the uploads (host values made into tensors)
//! counted by the wrapping backends (`flex`, `tch`; see `fast_cpu::profile::counts`): what a
//! step costs a GPU in launches and copies, visible on a CPU.

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
pub(crate) fn count() -> u64 {
    READS.get()
}

/// Counts `n` reads that helper threads made on this thread's behalf (work it shared out over
/// rayon's pool, e.g. [`crate::toolbox::host_parallel`]).
pub(crate) fn add(n: u64) {
    READS.set(READS.get() + n);
}

/// The tensor's values on the host (one read). With `TRAINER_TRACE_READS=1` every read prints
/// its caller on stderr (to find the reads of a step).
#[track_caller]
pub(crate) fn data<B: Backend, const D: usize, K: TensorKind<B> + BasicOps<B>>(
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
pub(crate) fn f32s<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    data(t).convert::<f32>().to_vec().unwrap_or_default()
}

#[track_caller]
/// A one-element tensor's value as f64 (one read).
pub(crate) fn scalar<B: Backend, const D: usize>(t: Tensor<B, D>) -> f64 {
    data(t)
        .convert::<f64>()
        .to_vec::<f64>()
        .ok()
        .and_then(|v| v.first().copied())
        .unwrap_or(f64::NAN)
}

/// What a stretch of work asked of the device: backend operations, uploads and host reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub ops: u64,
    pub uploads: u64,
    pub reads: u64,
}

impl Counts {
    /// This thread's counts so far.
    pub fn now() -> Self {
        let (ops, uploads) = fast_cpu::profile::counts();
        Self {
            ops,
            uploads,
            reads: count(),
        }
    }

    /// What this thread counted since `self` was taken.
    pub fn elapsed(self) -> Self {
        let now = Self::now();
        Self {
            ops: now.ops - self.ops,
            uploads: now.uploads - self.uploads,
            reads: now.reads - self.reads,
        }
    }

    /// Runs `f` with this thread's counts set aside and returns what `f` counted (see
    /// `fast_cpu::profile::isolated`): for a task on a pool, credited to its caller with
    /// [`Counts::add_here`].
    pub fn isolated<R>(f: impl FnOnce() -> R) -> (R, Self) {
        struct Restore(u64);
        impl Drop for Restore {
            fn drop(&mut self) {
                READS.set(self.0);
            }
        }
        let saved = Restore(READS.replace(0));
        let (out, (ops, uploads)) = fast_cpu::profile::isolated(f);
        let reads = count();
        drop(saved);
        (
            out,
            Self {
                ops,
                uploads,
                reads,
            },
        )
    }

    /// Credits counts of helper threads to this thread.
    pub fn add_here(self) {
        fast_cpu::profile::add_counts(self.ops, self.uploads);
        add(self.reads);
    }

    /// The sum of two counts.
    pub fn plus(self, other: Self) -> Self {
        Self {
            ops: self.ops + other.ops,
            uploads: self.uploads + other.uploads,
            reads: self.reads + other.reads,
        }
    }

    /// Averages per step of `steps` steps, ops and uploads `None` where the backend does not
    /// count them (`counted` false).
    pub fn per_step(self, steps: u64, counted: bool) -> PerStep {
        let per = |v: u64| v as f64 / steps.max(1) as f64;
        PerStep {
            ops_per_step: counted.then(|| per(self.ops)),
            uploads_per_step: counted.then(|| per(self.uploads)),
            host_reads_per_step: per(self.reads),
        }
    }
}

/// [`Counts`] per step, as the benches' JSON and the run log report them.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PerStep {
    /// Backend operations per step (`null`: a backend that does not count them).
    pub ops_per_step: Option<f64>,
    /// Host values made into tensors per step (`null`: not counted).
    pub uploads_per_step: Option<f64>,
    pub host_reads_per_step: f64,
}

impl PerStep {
    /// "180 ops, 2 uploads, 1 read per step" (ops and uploads left out where not counted).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(o) = self.ops_per_step {
            parts.push(format!("{} ops", per_step(o)));
        }
        if let Some(u) = self.uploads_per_step {
            parts.push(format!("{} uploads", per_step(u)));
        }
        parts.push(format!("{} host reads", per_step(self.host_reads_per_step)));
        format!("{}/step", parts.join(", "))
    }
}

/// A count per step: whole when it is one (`71`), else three significant digits (`0.0159`:
/// one read every 63 steps), never rounded to a whole number that hides it.
fn per_step(v: f64) -> String {
    if v == v.round() || !v.is_finite() {
        return format!("{v:.0}");
    }
    let decimals = (2 - v.abs().log10().floor() as i64).clamp(0, 9) as usize;
    format!("{v:.decimals$}")
}
