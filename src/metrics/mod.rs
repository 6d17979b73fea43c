//! Evaluation metrics, one file per family.
//!
//! * [`sc`]: the CLG-ODE test metrics on structural-connectivity predictions (docs/clg-ode-model.md §5.2).
//! * [`pr`]: precision–recall of a ranking (new edges scored by a forecast).
//! * [`skill`]: a forecast against the identity forecast.
//! * [`topology`]: exact Betti curves, degree and strength correlations.

pub mod absent;
pub mod paired;
pub mod pr;
pub mod sc;
pub mod skill;
pub mod topology;

pub use sc::{ScKey, ScMetrics, ks_statistic, pearson, sc_metrics, sparsify_topk};
pub use skill::Skill;
