//! The optional backends (`tch`, `cuda`, `wgpu`) against flex and PyTorch, their errors without a driver, and reading PyTorch checkpoints (CI runs these in its features build).
//!
//! One test binary for the area (each file a module), so Burn links once, not once per file.
//! A file runs alone with `cargo test --test backends -- FILE::`.

#[cfg(any(feature = "cuda", feature = "wgpu"))]
#[path = "../common/agreement.rs"]
mod agreement;
#[path = "../common/mod.rs"]
mod common;

mod backend_cuda;
mod backend_errors;
mod backend_tch;
mod backend_wgpu;
mod cuda_cubin;
mod fast_cube;
mod fast_tch;
mod pt_checkpoint;
mod tch_fused;
