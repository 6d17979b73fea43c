//! Where the trainer runs: the scheduler environment (Slurm, torchrun-style, LSF, gflow, local),
//! the NVIDIA driver and GPUs, containers, and the CUDA preflight.
//!
//! Everything is computed from a [`vars::Vars`] map and plain probe structs, so it is
//! unit-testable without a scheduler or a GPU; only the `cmd_*` entry points, [`detect_env`],
//! [`preflight_cuda`] and the probes touch the process environment or the machine.
//!
//! The commands `trainer env`, `doctor` and `mig-pick` are in `src/commands.rs`; for training:
//! [`detect_env`], [`preflight_cuda`] and [`RunCluster`] for `run_meta.json`.

pub mod compat;
pub mod container;
pub(crate) mod cuda;
mod detect;
pub(crate) mod doctor;
pub(crate) mod error;
pub mod exit_codes;
pub mod gpu;
pub(crate) mod gpu_memory;
pub mod hostlist;
pub(crate) mod mig;
pub(crate) mod nvrtc;
pub(crate) mod preflight;
pub(crate) mod run_record;
pub mod scheduler;
pub(crate) mod vars;
pub(crate) mod visible_devices;

pub(crate) use detect::detect_env;
pub use detect::render_env;
pub use doctor::{DoctorReport, diagnose, diagnose_with};
pub(crate) use preflight::preflight_cuda;
pub use preflight::preflight_cuda_with;
pub(crate) use run_record::RunCluster;
pub(crate) use scheduler::ClusterEnv;
pub use vars::Vars;
