//! Evaluation metrics, one file per family.
//!
//! * [`sc`]: the CLG-ODE test metrics on structural-connectivity predictions (spec §5.2).

pub mod sc;

pub use sc::{ScMetrics, ks_statistic, pearson, sc_metrics, sparsify_topk};
