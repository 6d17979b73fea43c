//! Element-wise arithmetic on large `f32` tensors, split over the rayon pool: Flex runs these on
//! one thread, and in a training step they are the activations' relu and dropout and every
//! operation of Adam over the 1.2 M weights of the MNIST CNN's first linear layer. The
//! arithmetic per value is Flex's own (`a + b`, `a · s`, `√a`, `max(a, 0)`, …), so results are
//! identical, except for [`unary_chunks`]' kernels (exp, ln_1p and sigmoid: see
//! `vector_math.rs`); like Flex, the result reuses an operand's buffer when nothing else holds
//! it.
//!
//! Only whole, contiguous `f32` buffers of equal shape and at least [`MIN_PARALLEL`] values
//! take this path; anything else goes to the `flex` fallback the caller passes.

use std::mem::MaybeUninit;

use burn_backend::DType;
use burn_flex::FlexTensor;
use rayon::prelude::*;

use super::fast;
use super::kernels::{assume_init, dims, f32_tensor, written_in};

/// Below this many values one thread is as fast.
const MIN_PARALLEL: usize = 1 << 16;
/// Values per rayon task.
const CHUNK: usize = 1 << 14;

/// Whether `t` is a whole, contiguous `f32` buffer large enough to split.
fn splittable(t: &FlexTensor) -> bool {
    let n = t.layout().num_elements();
    fast()
        && n >= MIN_PARALLEL
        && t.dtype() == DType::F32
        && t.layout().contiguous_offsets() == Some((0, n))
        && t.bytes().len() == 4 * n
}

/// `f` applied to every value of `t` (or `flex(t)`).
pub(super) fn unary(
    mut t: FlexTensor,
    f: impl Fn(f32) -> f32 + Sync,
    flex: impl FnOnce(FlexTensor) -> FlexTensor,
) -> FlexTensor {
    if !splittable(&t) {
        return flex(t);
    }
    if let Some(values) = t.try_storage_mut::<f32>() {
        values
            .par_chunks_mut(CHUNK)
            .for_each(|c| c.iter_mut().for_each(|v| *v = f(*v)));
        return t;
    }
    let src: &[f32] = t.storage();
    // SAFETY: `src` has a value for each of the `src.len()` outputs, so the zip writes all.
    let out = unsafe {
        written_in(src.len(), CHUNK, |start, o| {
            for (o, s) in o.iter_mut().zip(&src[start..]) {
                o.write(f(*s));
            }
        })
    };
    f32_tensor(out, &dims(&t))
}

/// `f` applied to `t`'s values a chunk at a time, in place (or `flex(t)`): for kernels that
/// work on several values at once. When `t`'s buffer is shared, each chunk is copied to the
/// result first.
pub(super) fn unary_chunks(
    mut t: FlexTensor,
    f: impl Fn(&mut [f32]) + Sync,
    flex: impl FnOnce(FlexTensor) -> FlexTensor,
) -> FlexTensor {
    if !splittable(&t) {
        return flex(t);
    }
    if let Some(values) = t.try_storage_mut::<f32>() {
        values.par_chunks_mut(CHUNK).for_each(&f);
        return t;
    }
    let src: &[f32] = t.storage();
    let write = |start: usize, o: &mut [MaybeUninit<f32>]| {
        for (o, s) in o.iter_mut().zip(&src[start..]) {
            o.write(*s);
        }
        // SAFETY: every value of `o` was written just above.
        f(unsafe { assume_init(o) });
    };
    // SAFETY: `write` initialises every value of its chunk.
    let out = unsafe { written_in(src.len(), CHUNK, write) };
    f32_tensor(out, &dims(&t))
}

/// `f(a, b)` for every pair of values of `lhs` and `rhs` of the same shape (or
/// `flex(lhs, rhs)`, which also broadcasts).
pub(super) fn binary(
    mut lhs: FlexTensor,
    mut rhs: FlexTensor,
    f: impl Fn(f32, f32) -> f32 + Sync,
    flex: impl FnOnce(FlexTensor, FlexTensor) -> FlexTensor,
) -> FlexTensor {
    if !splittable(&lhs) || !splittable(&rhs) || lhs.layout().shape() != rhs.layout().shape() {
        return flex(lhs, rhs);
    }
    if let Some(l) = lhs.try_storage_mut::<f32>() {
        let r: &[f32] = rhs.storage();
        l.par_chunks_mut(CHUNK)
            .zip(r.par_chunks(CHUNK))
            .for_each(|(l, r)| l.iter_mut().zip(r).for_each(|(a, b)| *a = f(*a, *b)));
        return lhs;
    }
    if let Some(r) = rhs.try_storage_mut::<f32>() {
        let l: &[f32] = lhs.storage();
        r.par_chunks_mut(CHUNK)
            .zip(l.par_chunks(CHUNK))
            .for_each(|(r, l)| r.iter_mut().zip(l).for_each(|(b, a)| *b = f(*a, *b)));
        return rhs;
    }
    let (l, r): (&[f32], &[f32]) = (lhs.storage(), rhs.storage());
    // SAFETY: `l` and `r` (the same shape, both whole buffers) have a value for each output.
    let out = unsafe {
        written_in(l.len(), CHUNK, |start, o| {
            for ((o, a), b) in o.iter_mut().zip(&l[start..]).zip(&r[start..]) {
                o.write(f(*a, *b));
            }
        })
    };
    f32_tensor(out, &dims(&lhs))
}
