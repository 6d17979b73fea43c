//! What a run leaves behind: the run directory (every file of it named by [`RunDir`]), its
//! metrics files and its plots, and the comparison of several runs.

pub mod compare;
pub mod curves;
pub mod figure;
pub mod group_table;
pub mod heatmap;
pub mod legend;
pub mod metrics;
pub mod metrics_row;
pub mod pr_chart;
pub mod result_files;
pub mod run_files;
pub mod run_label;
pub mod run_meta;
pub mod rundir;
pub mod strata;
pub mod tensorboard;
pub mod text;
pub mod trajectory;

pub use run_files::RunDir;
