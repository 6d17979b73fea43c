//! What a run leaves behind: the run directory (every file of it named by [`RunDir`]), its
//! metrics files and its plots, and the comparison of several runs.

pub mod compare;
pub mod curves;
pub mod figure;
pub mod frontier;
pub mod group_table;
pub mod heatmap;
pub(crate) mod legend;
pub(crate) mod metrics;
pub(crate) mod metrics_row;
pub mod pr_chart;
pub(crate) mod result_files;
pub(crate) mod run_files;
pub(crate) mod run_label;
pub(crate) mod run_meta;
pub(crate) mod rundir;
pub mod strata;
pub(crate) mod tensorboard;
pub mod text;
pub mod trajectory;

pub(crate) use run_files::RunDir;
