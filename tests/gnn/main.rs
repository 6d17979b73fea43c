//! `train-gnn` through the real binary: CLG-ODE and its baselines, flags, re-scoring, predictions, compare, degenerate data, safety of inputs, MPI ranks (`ddp_gnn`).
//!
//! One test binary for the area (each file a module), so Burn links once, not once per file.
//! A file runs alone with `cargo test --test gnn -- FILE::`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/sweep.rs"]
mod sweep_helpers;

mod ceiling_topology;
mod cohort;
mod ddp_gnn;
mod degenerate_data;
mod eb_fallback;
mod gnn_baselines;
mod gnn_compare;
mod gnn_eb_drift;
mod gnn_flags;
mod gnn_paths_yaml;
mod gnn_predict;
mod gnn_rescore;
mod gnn_safety;
mod gnn_train;
mod new_edges;
mod result_files;
