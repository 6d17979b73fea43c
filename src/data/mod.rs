//! Datasets, one file per on-disk format.

pub mod connectome;
pub mod fetch;
pub mod idx;
pub mod mnist;
