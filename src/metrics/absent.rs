//! A metric that is undefined (NaN) is written `null` in JSON (serde_json writes no NaN): read
//! back, `null` and a missing key are NaN again, so every result file written reads.

use serde::{Deserialize, Deserializer};

/// NaN: the value of a metric a file leaves out.
pub(crate) fn nan() -> f64 {
    f64::NAN
}

/// A number, or NaN for `null`.
pub(crate) fn null_as_nan<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}
