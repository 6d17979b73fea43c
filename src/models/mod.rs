//! Models, one file each, generic over the Burn backend.

pub mod cnn;
