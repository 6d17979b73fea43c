//! `trainer bench`: throughput and cost benchmarks, every compiled backend side by side.

pub mod gnn;
pub mod mnist;
pub mod profile;
