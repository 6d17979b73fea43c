//! The training loop's toolbox, below the engine: parameters as host tensors ([`params`]),
//! Adam ([`optim`]), the checkpoint file format ([`checkpoint`]), the data-parallel all-reduce
//! ([`ddp`]), a batch's items in parallel on the host's cores ([`host_parallel`]), seeds and
//! epoch orders ([`seed`]), stop requests and requeue ([`stop`]), and the process's CPU time
//! and memory ([`usage`]). Jobs, benchmarks and the engine call into it; it
//! calls nothing above it.

pub mod checkpoint;
pub(crate) mod ddp;
pub(crate) mod host_parallel;
pub mod optim;
pub mod params;
pub(crate) mod seed;
pub mod stop;
pub(crate) mod usage;
