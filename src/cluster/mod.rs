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
pub mod cuda;
mod detect;
pub mod doctor;
pub mod error;
pub mod exit_codes;
pub mod gpu;
pub mod hostlist;
pub mod mig;
pub mod nvrtc;
pub mod preflight;
pub mod run_record;
pub mod scheduler;
pub mod vars;
pub mod visible_devices;

pub use detect::{detect_env, render_env};
pub use doctor::{DoctorReport, diagnose, diagnose_with};
pub use error::EnvError;
pub use preflight::{PreflightError, preflight_cuda, preflight_cuda_with};
pub use run_record::RunCluster;
pub use scheduler::{ClusterEnv, Scheduler, SchedulerKind};
pub use vars::Vars;
