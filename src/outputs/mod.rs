//! What a run leaves behind: the run directory, its metrics files and its plots, and the
//! comparison of several runs.

pub mod compare;
pub mod curves;
pub mod figure;
pub mod heatmap;
pub mod metrics;
pub mod rundir;
