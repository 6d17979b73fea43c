//! Every code the `trainer` binary exits with, in one table: [`Exit`].
//!
//! Each variant has its number ([`Exit::code`]), a kebab-case name ([`Exit::name`]) and a
//! one-line meaning ([`Exit::meaning`]); [`Exit::ALL`] lists them in order for docs (the table
//! of docs/reference/exit-codes.md is checked against it by `tests/engine/exit_codes.rs`). Every path
//! that ends the process turns an [`Exit`] into a [`std::process::ExitCode`] (or, for the
//! watchdog thread, passes [`Exit::code`] to `std::process::exit`): no other file spells a code.
//!
//! Job scripts branch on these numbers (`case $? in 11) ...`), so a number never changes
//! meaning. 1 is "any other error", 2 is clap's usage error, 10–17 are the GPU/cluster checks
//! (`trainer doctor`, the CUDA preflight of train commands), 20–21 are `trainer mig-pick`, 75
//! (EX_TEMPFAIL) asks the scheduler to requeue, and 128 + n is a stop by signal n.
//! This is the lowest import layer: it imports nothing from the crate.

use std::fmt;

/// A process exit code of `trainer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Exit {
    /// 0: the command did what it was asked; `doctor`: all checks passed.
    Ok,
    /// 1: any error without a code of its own (bad input, I/O, a failed sweep task).
    General,
    /// 2: command-line usage error (clap), a value out of range, contradictory flags.
    Usage,
    /// 3: the requested backend or device cannot be used (not compiled in, wrong device).
    BackendUnavailable,
    /// 10: no NVIDIA driver (libnvidia-ml not loadable or NVML init failed) while a GPU was
    /// required. Fix: run on a GPU node, or use `--device cpu`.
    NoDriver,
    /// 11: inside a Singularity/Apptainer container with GPUs allocated but no driver visible,
    /// while the host's `/dev/nvidia*` are there and no driver library is bound: `--nv` is
    /// missing. Fix: `singularity exec --nv IMAGE trainer ...`.
    ContainerMissingNv,
    /// 12: the scheduler allocated GPUs (Slurm/LSF/gflow variables) but no driver is visible:
    /// outside a container, or inside one where `--nv` cannot help (no `/dev/nvidia*`) or was
    /// given and the bound driver does not load. Fix: check the node's driver (`nvidia-smi`).
    AllocatedGpuNotVisible,
    /// 13: the driver works but no GPU is visible to this process (`CUDA_VISIBLE_DEVICES` hides
    /// all, or names devices that do not exist). Fix: unset it or list existing devices.
    NoVisibleGpu,
    /// 14: the driver cannot run the backend's CUDA runtime by CUDA's compatibility rules
    /// (`cluster::compat`): a driver of an older major version, or PTX newer than the driver for
    /// a backend that JIT-compiles it. Fix: the CPU queue, `--backend tch`, or a driver R525+.
    RuntimeNewerThanDriver,
    /// 15: a visible GPU's compute capability has no kernels in the backend (e.g. P100 under
    /// `tch`; V100 under a CUDA 13 NVRTC, which dropped Volta). Fix: `--backend tch`, another
    /// partition or the CPU queue.
    UnsupportedComputeCapability,
    /// 16: the scheduler variables are missing, malformed or contradict each other, in any
    /// command. Fix: named in the message.
    BadClusterEnv,
    /// 17: data-parallel: a collective did not complete within `TRAINER_DIST_TIMEOUT` (a peer
    /// rank died); the watchdog ends the rank. The last checkpoint is intact.
    PeerLost,
    /// 20: `mig-pick`: MIG is off on every visible GPU (or no GPU supports it).
    MigDisabled,
    /// 21: `mig-pick`: every MIG instance on the visible GPUs runs a compute process.
    MigNoneFree,
    /// 75 (EX_TEMPFAIL): stopped early (a requeue signal or the step budget) after writing a
    /// checkpoint: requeue me. Batch scripts requeue on it.
    Requeue,
    /// 101: the program panicked (a bug; Rust's own code for a panic, which a sweep task passes
    /// on from its trainer).
    Panic,
    /// 128 + n: stopped by signal n that is not a requeue signal, after writing a checkpoint
    /// (143 for SIGTERM, 130 for SIGINT); a sweep task passes on a trainer killed by signal n.
    Signal(i32),
}

impl Exit {
    /// Every code in increasing order, for docs and `--help` texts. The signal variant stands
    /// once for all `128 + n` (as [`Exit::Signal`] of SIGTERM; its [`Exit::code_label`] is
    /// `128+n`).
    pub const ALL: [Exit; 17] = [
        Exit::Ok,
        Exit::General,
        Exit::Usage,
        Exit::BackendUnavailable,
        Exit::NoDriver,
        Exit::ContainerMissingNv,
        Exit::AllocatedGpuNotVisible,
        Exit::NoVisibleGpu,
        Exit::RuntimeNewerThanDriver,
        Exit::UnsupportedComputeCapability,
        Exit::BadClusterEnv,
        Exit::PeerLost,
        Exit::MigDisabled,
        Exit::MigNoneFree,
        Exit::Requeue,
        Exit::Panic,
        Exit::Signal(SIGTERM),
    ];

    /// The signal codes start above this number: `128 + n` for signal n.
    pub const SIGNAL_BASE: u8 = 128;

    /// The process exit code.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::General => 1,
            Exit::Usage => 2,
            Exit::BackendUnavailable => 3,
            Exit::NoDriver => 10,
            Exit::ContainerMissingNv => 11,
            Exit::AllocatedGpuNotVisible => 12,
            Exit::NoVisibleGpu => 13,
            Exit::RuntimeNewerThanDriver => 14,
            Exit::UnsupportedComputeCapability => 15,
            Exit::BadClusterEnv => 16,
            Exit::PeerLost => 17,
            Exit::MigDisabled => 20,
            Exit::MigNoneFree => 21,
            Exit::Requeue => 75,
            Exit::Panic => 101,
            Exit::Signal(n) => (Self::SIGNAL_BASE as i32 + n) as u8,
        }
    }

    /// The kebab-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::General => "error",
            Exit::Usage => "usage",
            Exit::BackendUnavailable => "backend-unavailable",
            Exit::NoDriver => "no-driver",
            Exit::ContainerMissingNv => "container-missing-nv",
            Exit::AllocatedGpuNotVisible => "allocated-gpu-not-visible",
            Exit::NoVisibleGpu => "no-visible-gpu",
            Exit::RuntimeNewerThanDriver => "runtime-newer-than-driver",
            Exit::UnsupportedComputeCapability => "unsupported-compute-capability",
            Exit::BadClusterEnv => "bad-cluster-env",
            Exit::PeerLost => "peer-lost",
            Exit::MigDisabled => "mig-disabled",
            Exit::MigNoneFree => "mig-none-free",
            Exit::Requeue => "requeue",
            Exit::Panic => "panic",
            Exit::Signal(_) => "signal",
        }
    }

    /// What the code means, in one line.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Ok => "success (doctor: all checks passed)",
            Exit::General => "error without a code of its own (bad input, I/O, a failed task)",
            Exit::Usage => "command-line usage error, a value out of range, contradictory flags",
            Exit::BackendUnavailable => "backend not compiled in, or unusable on this device",
            Exit::NoDriver => "no NVIDIA driver while a GPU was required",
            Exit::ContainerMissingNv => "in a container without --nv while GPUs were allocated",
            Exit::AllocatedGpuNotVisible => "GPUs allocated but no driver visible",
            Exit::NoVisibleGpu => "driver present but no GPU visible to this process",
            Exit::RuntimeNewerThanDriver => {
                "the driver cannot run the backend's CUDA runtime (CUDA's compatibility rules)"
            }
            Exit::UnsupportedComputeCapability => {
                "GPU compute capability without kernels in the backend"
            }
            Exit::BadClusterEnv => "scheduler variables missing or contradictory",
            Exit::PeerLost => "a collective did not complete: a peer rank died",
            Exit::MigDisabled => "MIG is off on every visible GPU",
            Exit::MigNoneFree => "every MIG instance is busy",
            Exit::Requeue => "stopped early after writing a checkpoint: requeue me",
            Exit::Panic => "the program panicked (a bug)",
            Exit::Signal(_) => "stopped by signal n after writing a checkpoint",
        }
    }

    /// The code as docs write it: the number, or `128+n` for the signal variant.
    pub fn code_label(self) -> String {
        match self {
            Exit::Signal(_) => format!("{}+n", Self::SIGNAL_BASE),
            e => e.code().to_string(),
        }
    }

    /// The variant with this code: one of [`Exit::ALL`], or [`Exit::Signal`] above 128.
    pub fn from_code(code: u8) -> Option<Exit> {
        if code > Self::SIGNAL_BASE {
            return Some(Exit::Signal(i32::from(code - Self::SIGNAL_BASE)));
        }
        Self::ALL.into_iter().find(|e| e.code() == code)
    }

    /// The variant for a status kept as a number (a child trainer's, clap's, a doctor report's,
    /// an [`crate::error::ExitError`]'s): [`Exit::from_code`], or [`Exit::General`] for a
    /// number that is no code of this table.
    pub fn from_status(status: i32) -> Exit {
        u8::try_from(status)
            .ok()
            .and_then(Self::from_code)
            .unwrap_or(Exit::General)
    }

    /// Ends the process now with this code (for threads that cannot return to `main`).
    pub fn exit_process(self) -> ! {
        std::process::exit(i32::from(self.code()))
    }
}

/// SIGTERM's number (the same on every Unix), for [`Exit::ALL`]'s signal entry.
const SIGTERM: i32 = 15;

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e.code())
    }
}

impl From<Exit> for u8 {
    fn from(e: Exit) -> Self {
        e.code()
    }
}

impl fmt::Display for Exit {
    /// `75 (requeue)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.code(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_distinct_and_increasing() {
        let codes: Vec<u8> = Exit::ALL.iter().map(|e| e.code()).collect();
        assert!(codes.windows(2).all(|w| w[0] < w[1]), "{codes:?}");
        let mut names: Vec<&str> = Exit::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Exit::ALL.len());
        for e in Exit::ALL {
            let kebab = e.name().chars().all(|c| c.is_ascii_lowercase() || c == '-');
            assert!(kebab, "{}", e.name());
            assert!(!e.meaning().is_empty() && !e.meaning().contains('\n'));
        }
    }

    #[test]
    fn exit_from_code_round_trips() {
        for e in Exit::ALL {
            assert_eq!(Exit::from_code(e.code()), Some(e));
        }
        assert_eq!(Exit::from_code(130), Some(Exit::Signal(2)));
        assert_eq!(Exit::Signal(2).code(), 130);
        assert_eq!(Exit::Signal(10).code(), 138);
        assert_eq!(Exit::from_code(4), None);
        assert_eq!(Exit::from_status(75), Exit::Requeue);
        assert_eq!(Exit::from_status(137), Exit::Signal(9));
        assert_eq!(Exit::from_status(-1), Exit::General);
        assert_eq!(Exit::Signal(15).code_label(), "128+n");
        assert_eq!(Exit::Requeue.to_string(), "75 (requeue)");
    }

    #[test]
    fn exit_usage_is_clap_usage_code() {
        let err = clap::Error::new(clap::error::ErrorKind::InvalidValue);
        assert_eq!(Exit::from_status(err.exit_code()), Exit::Usage);
        let help = clap::Error::new(clap::error::ErrorKind::DisplayHelp);
        assert_eq!(Exit::from_status(help.exit_code()), Exit::Ok);
    }
}
