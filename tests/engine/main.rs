//! The training engine through the real binary: MNIST training, resume and bad input, the run directory, MPI ranks (`ddp`), the fast CPU kernels, errors and exit codes, the architecture checks (the parsers under fuzzing: tests/fuzz_parsers.rs, a binary of its own).
//!
//! One test binary for the area (each file a module), so Burn links once, not once per file.
//! A file runs alone with `cargo test --test engine -- FILE::`.

#[path = "../common/mod.rs"]
mod common;
#[cfg(feature = "mpi")]
#[path = "../common/slurm.rs"]
mod slurm;
#[path = "../common/sweep.rs"]
mod sweep_helpers;

mod architecture;
mod bench_cli;
mod bench_limits;
mod cuda_graph;
mod data_fetch;
mod ddp;
mod engine_regression;
mod engine_runs;
mod errors_once;
mod exit_codes;
mod fast_cpu;
mod fs_faults;
mod mnist_bad_input;
mod mnist_train;
mod run_integrity;
mod run_safety;
mod step_counts;
mod tensorboard_events;
mod tile_registers;
