//! Training machinery shared by every model: optimiser, checkpoints, metrics files, progress,
//! run directory, stop requests; plus one training loop per model.

pub mod bench;
pub mod bench_gnn;
pub mod checkpoint;
pub mod ddp;
pub mod eval;
pub mod gnn;
pub mod metrics;
pub mod mnist;
pub mod optim;
pub mod params;
pub mod progress;
pub mod rundir;
pub mod stop;
pub mod usage;
