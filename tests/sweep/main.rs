//! `trainer sweep` and `trainer compare`: plans, stages, resources, stops, hostile specs, grouped and paired tables.
//!
//! One test binary for the area (each file a module), so Burn links once, not once per file.
//! A file runs alone with `cargo test --test sweep -- FILE::`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/slurm.rs"]
mod slurm;
#[path = "../common/sweep.rs"]
mod sweep_helpers;

mod compare_groups;
mod compare_hostile;
mod compare_paired;
mod compare_pairing;
mod run_labels;
mod sweep;
mod sweep_hostile;
mod sweep_plan_checks;
mod sweep_replan;
mod sweep_resources;
mod sweep_stages;
mod sweep_stop;
