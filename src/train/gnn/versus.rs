//! A set of predictions scored beside the identity forecast ([`Versus`]): what evaluation
//! (`protocol/evaluate.rs`) produces and the metrics row's columns (`protocol/columns.rs`) show.

use serde::Serialize;

use crate::metrics::Skill;
use crate::metrics::sc::ScMetrics;

/// A set of predictions scored against the truth, beside the identity forecast.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Versus {
    pub n_subjects: usize,
    pub model: ScMetrics,
    pub identity: ScMetrics,
    pub skill: Skill,
}
