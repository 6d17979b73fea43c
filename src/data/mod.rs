//! Datasets, one file per on-disk format.

pub mod connectome;
pub(crate) mod fetch;
pub mod idx;
pub(crate) mod mnist;
