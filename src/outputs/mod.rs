//! What a run leaves behind: the run directory, its metrics files and its plots.

pub mod curves;
pub mod metrics;
pub mod rundir;
