//! A forecast against the identity forecast ("the next scan equals this one"): skill
//! = 1 − mse_model / mse_identity (> 0: better than copying the last scan) and the Pearson
//! gains, on the log-domain SC.

use serde::{Deserialize, Serialize};

use super::sc::ScMetrics;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Skill {
    /// 1 − sc_log_mse(model) / sc_log_mse(identity); NaN when the identity's error is 0.
    #[serde(
        default = "super::absent::nan",
        deserialize_with = "super::absent::null_as_nan"
    )]
    pub skill: f64,
    /// sc_log_pearson(model) − sc_log_pearson(identity).
    #[serde(
        default = "super::absent::nan",
        deserialize_with = "super::absent::null_as_nan"
    )]
    pub pearson_gain: f64,
    /// sc_log_pearson_sparse(model) − sc_log_pearson_sparse(identity).
    #[serde(
        default = "super::absent::nan",
        deserialize_with = "super::absent::null_as_nan"
    )]
    pub pearson_sparse_gain: f64,
}

impl Skill {
    pub(crate) fn of(model: &ScMetrics, identity: &ScMetrics) -> Self {
        Self {
            skill: if identity.sc_log_mse > 0.0 {
                1.0 - model.sc_log_mse / identity.sc_log_mse
            } else {
                f64::NAN
            },
            pearson_gain: model.sc_log_pearson - identity.sc_log_pearson,
            pearson_sparse_gain: model.sc_log_pearson_sparse - identity.sc_log_pearson_sparse,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_by_hand() {
        let m = ScMetrics {
            sc_log_mse: 0.03,
            sc_log_pearson: 0.9,
            sc_log_pearson_sparse: 0.5,
            ..Default::default()
        };
        let i = ScMetrics {
            sc_log_mse: 0.04,
            sc_log_pearson: 0.8,
            sc_log_pearson_sparse: 0.6,
            ..Default::default()
        };
        let s = Skill::of(&m, &i);
        assert!((s.skill - 0.25).abs() < 1e-12);
        assert!((s.pearson_gain - 0.1).abs() < 1e-12);
        assert!((s.pearson_sparse_gain + 0.1).abs() < 1e-12);
        assert!(Skill::of(&m, &ScMetrics::default()).skill.is_nan());
        // Worse than copying: negative skill.
        assert!(Skill::of(&i, &m).skill < 0.0);
    }
}
