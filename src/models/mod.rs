//! Models, one file each, generic over the Burn backend.

pub mod clg_ode;
pub mod cnn;
pub mod linear_drift;
