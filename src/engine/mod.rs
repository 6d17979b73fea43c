//! The training engine: the one loop every job runs through, and its machinery (optimiser,
//! checkpoints, data-parallel glue, stop requests, progress, resource usage).

pub mod checkpoint;
pub mod ddp;
pub mod optim;
pub mod params;
pub mod progress;
pub mod stop;
pub mod usage;
