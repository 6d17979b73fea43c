//! Adam's update of one parameter in one pass over its values, split over the rayon pool.
//!
//! The optimiser written with tensor operations (`toolbox::optim`) makes about ten passes over
//! every parameter (moments, bias corrections, square root, quotient, the parameter's new value);
//! on the MNIST CNN's 1.2 M weights they were 10 % of a training step with AVX-512 GEMMs. Here
//! each value runs the same f32 operations in the same order, so the results are bit for bit
//! those of the tensor version (tested); the buffers are updated in place when nothing else
//! holds them.

use std::any::TypeId;

use burn::prelude::*;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::kernels::f32_tensor;
use super::{FastCpu, fast};

/// Values per rayon task.
const CHUNK: usize = 1 << 14;

/// The scalars of one Adam step, in f32 as the tensor version applies them.
#[derive(Clone, Copy, Debug)]
pub struct AdamScalars {
    pub beta1: f32,
    pub beta2: f32,
    /// √(1 − β₂ᵗ) / (1 − β₁ᵗ).
    pub factor: f32,
    /// ε · √(1 − β₂ᵗ).
    pub eps: f32,
    pub lr: f32,
}

impl AdamScalars {
    /// The new first and second moments and parameter value of one value; `m`, `v` are `None`
    /// at the first step.
    #[inline(always)]
    pub fn apply(&self, p: f32, g: f32, moments: Option<(f32, f32)>) -> (f32, f32, f32) {
        let (m, v) = match moments {
            Some((m, v)) => (
                m * self.beta1 + g * (1.0 - self.beta1),
                v * self.beta2 + (g * g) * (1.0 - self.beta2),
            ),
            None => (g * (1.0 - self.beta1), (g * g) * (1.0 - self.beta2)),
        };
        let step = ((m * self.factor) / (v.sqrt() + self.eps)) * self.lr;
        (m, v, p - step)
    }
}

/// Whether [`fused_step`] runs for backend `B`: the fast kernels of [`FastCpu`].
pub fn fused_adam_for<B: Backend>() -> bool {
    TypeId::of::<B>() == TypeId::of::<FastCpu>() && fast()
}

/// `(m, v, parameter)` after one step for flat tensors of `B` (which must pass
/// [`fused_adam_for`]); `moments` is `None` at the first step.
pub fn fused_step<B: Backend>(
    param: Tensor<B, 1>,
    grad: Tensor<B, 1>,
    moments: Option<(Tensor<B, 1>, Tensor<B, 1>)>,
    s: AdamScalars,
) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1>) {
    let (m, v) = match moments {
        Some((m, v)) => (Some(flex(m)), Some(flex(v))),
        None => (None, None),
    };
    // One operation of the backend (timed and counted as such), as a GPU's fused kernel is.
    let (m, v, p) = crate::profile::timed("fused_adam", || step(flex(param), &flex(grad), m, v, s));
    (back(m), back(v), back(p))
}

/// The Flex tensor inside a tensor of `B` = [`FastCpu`].
const WHAT: &str = "fused Adam runs on FastCpu only (fused_adam_for)";

fn flex<B: Backend>(t: Tensor<B, 1>) -> FlexTensor {
    super::cast::float_primitive(t, WHAT)
}

fn back<B: Backend>(t: FlexTensor) -> Tensor<B, 1> {
    super::cast::float_tensor(t, WHAT)
}

/// A whole, contiguous buffer (written in place if nothing else holds it: `storage_mut` copies
/// a shared one).
fn owned(t: FlexTensor) -> FlexTensor {
    t.to_contiguous()
}

fn step(
    param: FlexTensor,
    grad: &FlexTensor,
    m: Option<FlexTensor>,
    v: Option<FlexTensor>,
    s: AdamScalars,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let n = param.layout().num_elements();
    assert_eq!(
        grad.layout().num_elements(),
        n,
        "Adam: gradient and parameter sizes differ"
    );
    let mut p = owned(param);
    let first = m.is_none() || v.is_none();
    let zeros = || f32_tensor(vec![0.0; n], &[n]);
    let mut m = m.map_or_else(zeros, owned);
    let mut v = v.map_or_else(zeros, owned);
    let grad = grad.to_contiguous();
    let g: &[f32] = &grad.storage::<f32>()[..n];
    let (ps, ms, vs) = (
        p.storage_mut::<f32>(),
        m.storage_mut::<f32>(),
        v.storage_mut::<f32>(),
    );
    ps.par_chunks_mut(CHUNK)
        .zip(ms.par_chunks_mut(CHUNK))
        .zip(vs.par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|(((p, m), v), g)| update(s, first, p, m, v, g));
    (m, v, p)
}

/// One chunk's update, `first` decided once per chunk and the slices cut to one length, so
/// that the compiler turns the loop into vector instructions (the square root and the quotient
/// included, which round as the scalar ones do).
fn update(s: AdamScalars, first: bool, p: &mut [f32], m: &mut [f32], v: &mut [f32], g: &[f32]) {
    let n = p.len();
    let (m, v, g) = (&mut m[..n], &mut v[..n], &g[..n]);
    if first {
        for i in 0..n {
            (m[i], v[i], p[i]) = s.apply(p[i], g[i], None);
        }
    } else {
        for i in 0..n {
            (m[i], v[i], p[i]) = s.apply(p[i], g[i], Some((m[i], v[i])));
        }
    }
}
