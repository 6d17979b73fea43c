//! Datasets, one file per on-disk format.

pub mod fetch;
pub mod idx;
pub mod mnist;
