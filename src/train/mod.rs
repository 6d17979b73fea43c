//! The training jobs: each brings its model, its step and its evaluation; the loop itself is
//! the engine's ([`crate::engine`]).

pub(crate) mod gnn;
pub(crate) mod mnist;
