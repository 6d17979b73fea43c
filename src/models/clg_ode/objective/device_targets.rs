//! The targets' side of the per-prediction terms computed where the predictions are (issue 74
//! item 2): the edge indicators `y`, the log targets and the top-k keep masks from the raw
//! targets and the detached predictions, as tensor operations, so that a GPU step neither reads
//! its predictions back to select on the host nor uploads three `[P,N,N]` tensors built there.
//!
//! Each is the host computation's value exactly ([`super::forward`]'s `keep_masks`,
//! `loss::topk_upper_mask`): the keep mask keeps the k largest upper-triangle values of each
//! prediction under `total_cmp` (NaN as −∞), ties broken by the lower flat index, k the
//! target's edge count (at most the triangle's size). On the device that is a threshold (the
//! k-th largest value, from a sort), the values above it, and of the values equal to it the first
//! `k − #above` in index order (a cumulative count), +0.0 before −0.0 as `total_cmp` orders
//! them (a device's `==` does not tell them apart).

use burn::prelude::*;

/// `[P,N,N]` edge indicators (1 where the raw target is > 0, upper triangle only) and
/// `log1p(max(target, 0))`, for raw targets as the loader gives them: finite and ≥ 0 (it refuses
/// other values), −0.0 included (made +0.0 by the `+ 0.0`, as `f32::max(−0.0, 0.0)` gives).
pub(crate) fn edge_targets<B: Backend>(
    target_raw: Tensor<B, 3>,
    upper: &Tensor<B, 2>,
) -> (Tensor<B, 3>, Tensor<B, 3>) {
    let [p, n, _] = target_raw.dims();
    let y = target_raw
        .clone()
        .greater_elem(0.0)
        .float()
        .reshape([p, n * n])
        * upper.clone();
    (y.reshape([p, n, n]), target_raw.add_scalar(0.0).log1p())
}

/// The symmetric top-k keep masks `[P,N,N]` (1 kept, 0 not; the diagonal 0) of predictions
/// `a` (`[P,N,N]`, detached), prediction `q` keeping `k[q]` values (`k`: `[P,1]`, at most the
/// triangle's size, as [`edge_counts`] gives), `triangle` the [`Triangle`] of N×N. No read
/// and no upload.
pub(crate) fn keep_masks<B: Backend>(
    a: Tensor<B, 3>,
    k: Tensor<B, 2, Int>,
    (upper, off): &Triangle<B>,
) -> Tensor<B, 3> {
    let [p, n, _] = a.dims();
    let nn = n * n;
    if p == 0 || n < 2 {
        return a.zeros_like();
    }
    let (upper, off) = (upper.clone(), off.clone());
    let a = a.reshape([p, nn]);
    // NaN as −∞; off the triangle −∞ too, never above a threshold and never among its equals
    // (the triangle's values come first in the order, so the k-th is one of them).
    let a = a
        .clone()
        .mask_fill(a.is_nan().bool_or(off), f32::NEG_INFINITY);
    // A sort, not `topk`: Burn's autodiff wrapper has no `topk`, even for a detached tensor.
    let at = k.clone().sub_scalar(1).clamp_min(0);
    let threshold = a.clone().sort_descending(1).gather(1, at).expand([p, nn]);
    let above = a.clone().greater(threshold.clone());
    let equal = a.clone().equal(threshold).bool_and(upper);
    // Equal values have the same bits but for ±0.0, which `==` ties and `total_cmp` does not:
    // +0.0 first. 1/x < 0 tells −0.0 from +0.0 and is the same for every member of any other
    // tie, so ranking the flagged members after the others changes only the zeros' order. Both
    // ranks in one cumulative count: the flagged members' half after the others'.
    let flagged = a.recip().lower_elem(0.0);
    let first = equal.clone().bool_and(flagged.clone().bool_not()).int();
    let second = equal.clone().bool_and(flagged.clone()).int();
    let ranks = Tensor::cat(vec![first, second], 1).cumsum(1);
    let rank = ranks
        .clone()
        .narrow(1, 0, nn)
        .mask_where(flagged, ranks.narrow(1, nn, nn));
    // With k = 0 nothing is above the largest value and the room is 0.
    let room = (k - above.clone().int().sum_dim(1)).expand([p, nn]);
    let keep = above.bool_or(equal.bool_and(rank.lower_equal(room)));
    // Mirrored: the transposed half converted on its own, so that the sum's two sides are
    // separate tensors (burn-tch adds in place into a left side it owns alone, which LibTorch
    // refuses when the right side is a view of the same storage).
    let keep = keep.reshape([p, n, n]);
    keep.clone().float() + keep.swap_dims(1, 2).float()
}

/// Each prediction's edge count `[P,1]` from its indicators `y` (`[P,N,N]`, 0/1): the k of
/// its keep mask. Exact in f32 while N² < 2²⁴.
pub(crate) fn edge_counts<B: Backend>(y: &Tensor<B, 3>) -> Tensor<B, 2, Int> {
    let [p, n, _] = y.dims();
    y.clone().reshape([p, n * n]).sum_dim(1).int()
}

/// `[1, N·N]` masks of an N×N matrix: strictly above the diagonal, and the rest.
pub(crate) type Triangle<B> = (Tensor<B, 2, Bool>, Tensor<B, 2, Bool>);

/// The [`Triangle`] of N×N, made on the device (no upload).
pub(crate) fn triangle<B: Backend>(n: usize, device: &B::Device) -> Triangle<B> {
    let flat = Tensor::<B, 1, Int>::arange(0..(n * n) as i64, device);
    let row = flat.clone().div_scalar(n as i64);
    let col = flat.remainder_scalar(n as i64);
    let upper = row.clone().lower(col.clone()).reshape([1, n * n]);
    (upper, row.greater_equal(col).reshape([1, n * n]))
}
