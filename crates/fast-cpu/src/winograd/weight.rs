//! The weight gradient through F(2×2, 3×3): the adjoint of the forward pass ([`super`]).
//! With `U_ξ = (G g Gᵀ)[ξ]`, `V_ξ` the input tiles' transforms and `M_ξ = U_ξ · V_ξ`,
//! `dU_ξ = Σ_images D_ξ · V_ξᵀ` with `D = A dY Aᵀ` of the output-gradient tiles, and
//! `dg = Gᵀ dU G`: 16 products `[o × tiles] · [tiles × c]` per image, summed over a fixed
//! partition of the batch ([`batch_parts`]) as the other weight gradients, so that the result
//! does not depend on the number of threads. The bias gradient is summed from each image's
//! output gradient on the way, as the direct weight pass does.

use std::ops::Range;

use rayon::prelude::*;

use super::super::batch_sums::{add_parts, batch_parts, bias_of_plane_sums, plane_sums};
use super::super::direct::Isa;
use super::super::geom::Geom;
use super::super::kernels::with_scratch;
use super::{G, Plan, products, stride, transform};

/// The gradients with respect to the weight `[o, c, 3, 3]` and the bias `[o]` of
/// `conv2d(x, w)` for the output gradient `dy` (`usable(g, Pass::Weight)`); the bias
/// gradient is [`bias_backward`](super::super::batch_sums::bias_backward)'s, bit for bit; `isa` as
/// for [`forward`](super::forward).
pub(in super::super) fn weight_backward(
    isa: Option<Isa>,
    x: &[f32],
    dy: &[f32],
    g: &Geom,
) -> (Vec<f32>, Vec<f32>) {
    let plan = Plan::new([g.c, g.h, g.w], g.pad, g.o);
    debug_assert_eq!((plan.oh, plan.ow), (g.oh, g.ow));
    let size = 16 * g.o * stride(g.c);
    let (partials, sums): (Vec<Vec<f32>>, Vec<Vec<f32>>) = batch_parts(g.n, size)
        .into_par_iter()
        .map(|images| part_gradient(isa, &plan, (x, dy), images))
        .unzip();
    let du = add_parts(partials, size);
    (
        weights_of(&du, g.o, g.c),
        bias_of_plane_sums(&sums.concat(), g.n, g.o),
    )
}

/// `dU` `[ξ][o][stride(c)]` of the images `images`, and the sums of their output-gradient
/// planes (`[images][o]`).
fn part_gradient(
    isa: Option<Isa>,
    plan: &Plan,
    (x, dy): (&[f32], &[f32]),
    images: Range<usize>,
) -> (Vec<f32>, Vec<f32>) {
    let (c, o) = (plan.c, plan.o);
    let (image, plane) = (c * plan.h * plan.w, plan.oh * plan.ow);
    let cs = stride(c);
    let mut du = vec![0.0; 16 * o * cs];
    let mut sums = Vec::with_capacity(images.len() * o);
    let blocks = plan.blocks();
    for i in images {
        let (xi, dyi) = (&x[i * image..][..image], &dy[i * o * plane..][..o * plane]);
        for rows in blocks.iter().cloned() {
            let tiles = rows.len() * plan.tw;
            let stride = stride(tiles);
            let work = transform::work(plan.tw, rows.len()).max(tiles * cs);
            with_scratch(16 * (c + o) * stride + work, |buf| {
                let (v, rest) = buf.split_at_mut(16 * c * stride);
                let (d, work) = rest.split_at_mut(16 * o * stride);
                transform::input(isa, plan, xi, rows.clone(), v, work);
                transform::gradient(isa, plan, dyi, rows, d);
                products::weight(isa, (d, v), [o, c], [tiles, stride], &mut du, work);
            });
        }
        plane_sums(dyi, o, plane, &mut sums);
    }
    (du, sums)
}

/// `dg = Gᵀ dU G` of every kernel: `[o, c, 3, 3]` from `dU` `[ξ][o][stride(c)]`.
fn weights_of(du: &[f32], o: usize, c: usize) -> Vec<f32> {
    let cs = stride(c);
    let mut dw = vec![0.0; o * c * 9];
    for (k, taps) in dw.chunks_exact_mut(9).enumerate() {
        let at = |i: usize, j: usize| du[(4 * i + j) * o * cs + (k / c) * cs + k % c];
        for (tap, out) in taps.iter_mut().enumerate() {
            let (a, b) = (tap / 3, tap % 3);
            *out = (0..4)
                .map(|i| G[i][a] * (0..4).map(|j| at(i, j) * G[j][b]).sum::<f32>())
                .sum();
        }
    }
    dw
}
