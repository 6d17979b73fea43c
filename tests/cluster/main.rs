//! The cluster runtime: `trainer doctor`, `--nv` evidence, scheduler environments and hostlists against the real Slurm, signals, checkpoint and requeue under Slurm, the one-shot GPU check script.
//!
//! One test binary for the area (each file a module), so Burn links once, not once per file.
//! A file runs alone with `cargo test --test cluster -- FILE::`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/hostlist_gen.rs"]
mod hostlist_gen;
#[path = "../common/scontrol.rs"]
mod scontrol;
#[path = "../common/slurm.rs"]
mod slurm;

mod cluster_doctor;
mod cluster_hostlist_slurm;
mod cluster_nv;
mod gpu_check_script;
mod signals;
mod slurm_requeue;
