//! Models, one file each, generic over the Burn backend.

pub mod clg_ode;
pub mod cnn;
pub mod eb_drift;
pub mod gcn_baseline;
pub mod linear_drift;
pub mod vector_lstm;
