//! The validation columns of a metrics row: the validation SC metrics with the identity
//! baseline and the skill (null in epochs that do not compute them, so that every row has the
//! same columns).

use serde_json::{Value, json};

use super::super::metric::{GnnMetric, ScSource};
use super::super::versus::Versus;
use crate::engine::{JobMetric, Row};

/// The validation SC columns (every [`GnnMetric`] with an [`ScSource`], in its order: the
/// reference's eight, ours beside the identity's, the skill, and `monitor_mse_plus_density`);
/// null when `sc` was not computed this epoch.
pub(crate) fn val_sc_columns(
    sc: Option<&Versus>,
    val_density: f64,
    density_weight: f64,
    row: &mut Row,
) {
    for m in GnnMetric::ALL {
        let Some(source) = m.sc_source() else {
            continue;
        };
        let value = sc.map_or(Value::Null, |v| match source {
            ScSource::Model(k) => json!(v.model.get(k)),
            ScSource::Identity(k) => json!(v.identity.get(k)),
            ScSource::Skill => json!(v.skill.skill),
            ScSource::PearsonGain => json!(v.skill.pearson_gain),
            ScSource::MsePlusDensity => json!(v.model.sc_log_mse + density_weight * val_density),
        });
        row.insert(m.name().into(), value);
    }
}
