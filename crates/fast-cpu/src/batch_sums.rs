//! The weight passes' sums over the batch, shared by im2col ([`conv`](super::conv)), the
//! direct tiles and Winograd: the batch cut into a fixed partition whose parts are summed
//! into buffers of their own and then added in order ([`batch_parts`], [`add_parts`]), and
//! the bias gradient, either alone ([`bias_backward`]) or from the plane sums a weight pass
//! collects on the way ([`plane_sums`], [`bias_of_plane_sums`]), bit for bit the same.

use std::ops::Range;

use rayon::prelude::*;

use super::kernels::{add_into, sum, sums};

/// Upper bound on the memory of the per-part weight gradients (bytes).
const PARTIALS_BYTES: usize = 64 << 20;
/// Upper bound on the number of parts the batch is cut into for the weight gradient.
const MAX_PARTS: usize = 16;

/// Appends the sums of one image's `o` output-gradient planes of `l` values to `out`, each as
/// [`bias_backward`] sums it (four planes side by side, [`sums`]).
pub(super) fn plane_sums(dyi: &[f32], o: usize, l: usize, out: &mut Vec<f32>) {
    let plane = |c: usize| &dyi[c * l..][..l];
    for c in (0..o / 4 * 4).step_by(4) {
        out.extend(sums([plane(c), plane(c + 1), plane(c + 2), plane(c + 3)]));
    }
    out.extend((o / 4 * 4..o).map(|c| sum(plane(c))));
}

/// The bias gradient from the plane sums of every image (`[n][o]`), added in image order as
/// [`bias_backward`] adds them.
pub(super) fn bias_of_plane_sums(plane_sums: &[f32], n: usize, o: usize) -> Vec<f32> {
    (0..o)
        .map(|c| (0..n).map(|i| plane_sums[i * o + c]).sum())
        .collect()
}

/// The batch of `n` images cut into parts for a weight gradient of `size` values per part:
/// each part is summed into its own buffer, and the parts are added in order
/// ([`add_parts`]). The cut depends on the shapes only, never on the thread count, so the
/// result is the same at every thread count and in every run on one machine (the
/// micro-kernels, chosen per CPU, may round differently on another). At most [`MAX_PARTS`]
/// parts, whose buffers take at most [`PARTIALS_BYTES`] together.
pub(super) fn batch_parts(n: usize, size: usize) -> Vec<Range<usize>> {
    let parts = n
        .min(MAX_PARTS)
        .min((PARTIALS_BYTES / (4 * size).max(1)).max(1));
    let per = n.div_ceil(parts.max(1)).max(1);
    (0..n).step_by(per).map(|s| s..(s + per).min(n)).collect()
}

/// The parts' weight gradients (`size` values each) added in order.
pub(super) fn add_parts(partials: Vec<Vec<f32>>, size: usize) -> Vec<f32> {
    let mut parts = partials.into_iter();
    let mut total = parts.next().unwrap_or_else(|| vec![0.0; size]);
    for part in parts {
        add_into(&mut total, &part);
    }
    total
}

/// The gradient with respect to the bias `[o]`: the sum of `dy` `[n, o, l]` over `n` and `l`.
pub fn bias_backward(dy: &[f32], n: usize, o: usize, l: usize) -> Vec<f32> {
    (0..o)
        .into_par_iter()
        .map(|c| (0..n).map(|i| sum(&dy[(i * o + c) * l..][..l])).sum())
        .collect()
}
