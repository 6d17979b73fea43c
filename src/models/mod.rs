//! Models, one file each, generic over the Burn backend.

pub mod clg_ode;
pub mod cnn;
pub(crate) mod eb_drift;
pub(crate) mod gcn_baseline;
pub(crate) mod linear_drift;
pub(crate) mod vector_lstm;
