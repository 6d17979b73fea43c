//! The job templates (jobs/) submitted to a real Slurm and gflow, the LSF template run locally, the sweep arrays on gflow, and the container definitions built with Apptainer (scripts/test-jobs.sh runs these).
//!
//! One test binary for the area (each file a module), so Burn links once, not once per file.
//! A file runs alone with `cargo test --test jobs -- FILE::`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/gflow.rs"]
mod gflow;
#[path = "../common/slurm.rs"]
mod slurm;
#[path = "../common/sweep.rs"]
mod sweep_helpers;

mod containers_apptainer;
mod containers_defs;
mod jobs_gflow;
mod jobs_lsf;
mod jobs_slurm;
mod sweep_gflow;
