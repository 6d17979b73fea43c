//! The Winograd convolutions against im2col and GEMM ([`conv`](super::super::conv)): the
//! forward output (with and without bias) and the input gradient agree to a relative 1e-4 (the
//! two sum each value in another order, in `f32`, and F(2×2, 3×3)'s transforms add a few
//! roundings), for padding 0 to 2 on each axis, odd and even output sizes, channel counts off
//! any GEMM tile, images of several tasks and single images; and the same bits on 1 and 3
//! threads.

use burn_backend::ops::ConvOptions;

use super::super::batch_sums::bias_backward;
use super::super::conv::{im2col_forward, im2col_weight_backward, im2col_x_backward};
use super::super::direct::tests::{assert_close, on_threads, operands, values};
use super::super::direct::{Isa, Pass};
use super::super::geom::Geom;
use super::{BLOCK_TILES, Plan, fits, forward, input_backward, stride, transform, weight_backward};

fn geom(x: [usize; 4], o: usize, pad: [usize; 2]) -> Geom {
    let w = [o, x[1], 3, 3];
    Geom::new(&x, &w, &ConvOptions::new([1, 1], pad, [1, 1], 1)).unwrap()
}

fn cases() -> Vec<Geom> {
    vec![
        // The MNIST CNN's second layer, on three images.
        geom([3, 32, 26, 26], 64, [0, 0]),
        // Odd output sizes, padding 1 and 2, one axis each.
        geom([2, 16, 9, 12], 17, [1, 0]),
        geom([1, 19, 7, 6], 33, [2, 1]),
        geom([2, 20, 5, 8], 16, [0, 2]),
        // One output row and column (a 3×3 image), and a 4×4 one padded by 2.
        geom([2, 16, 3, 3], 16, [0, 0]),
        geom([1, 16, 4, 4], 18, [2, 2]),
        // An image of several tasks (more than BLOCK_TILES tiles), rows that do not divide.
        geom([2, 16, 40, 30], 20, [1, 1]),
        // No images.
        geom([0, 16, 6, 6], 16, [1, 1]),
    ]
}

/// The kernels to check on this CPU: the portable code, and the register tiles of each
/// instruction set it has.
fn kernels() -> Vec<Option<Isa>> {
    let tiles = [Isa::Avx512, Isa::Avx2]
        .into_iter()
        .filter(|isa| isa.available());
    std::iter::once(None).chain(tiles.map(Some)).collect()
}

#[test]
fn winograd_convolution_matches_im2col() {
    for (g, isa) in cases()
        .into_iter()
        .flat_map(|g| kernels().into_iter().map(move |k| (g, k)))
    {
        let passes = [Pass::Forward, Pass::Input, Pass::Weight];
        assert!(passes.into_iter().all(|pass| fits(&g, pass)), "{g:?}");
        let x = values(g.n * g.image(), 1);
        let w = values(g.o * g.k(), 2);
        let b = values(g.o, 3);
        let dy = values(g.n * g.o * g.l(), 4);
        let what = format!("{g:?} with {isa:?}");
        assert_close(
            &format!("forward {what}"),
            &forward(isa, &x, &w, Some(&b), &g),
            &im2col_forward(&x, &w, Some(&b), &g),
        );
        assert_close(
            &format!("forward, no bias, {what}"),
            &forward(isa, &x, &w, None, &g),
            &im2col_forward(&x, &w, None, &g),
        );
        assert_close(
            &format!("input gradient {what}"),
            &input_backward(isa, &dy, &w, &g),
            &im2col_x_backward(&dy, &w, &g),
        );
        let (dw, bias) = weight_backward(isa, &x, &dy, &g);
        assert_close(
            &format!("weight gradient {what}"),
            &dw,
            &im2col_weight_backward(&x, &dy, &g).0,
        );
        // The bias gradient summed beside the weight's is the bias pass's, bit for bit.
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let want = bias_backward(&dy, g.n, g.o, g.l());
        assert!(bits(&bias) == bits(&want), "bias gradient {what}");
    }
}

#[test]
fn a_large_image_is_cut_into_blocks_of_tile_rows() {
    let g = geom([1, 16, 40, 30], 20, [1, 1]);
    let plan = Plan::new([g.c, g.h, g.w], g.pad, g.o);
    // 20 × 15 tiles: two blocks of 10 tile rows, each of at most BLOCK_TILES tiles.
    assert_eq!((plan.th, plan.tw), (20, 15));
    assert_eq!(plan.blocks(), [0..10, 10..20]);
    assert!(
        plan.blocks()
            .iter()
            .all(|b| b.len() * plan.tw <= BLOCK_TILES)
    );
}

#[test]
fn winograd_convolution_gives_the_same_bits_on_any_thread_count() {
    for (g, isa) in cases()
        .into_iter()
        .flat_map(|g| kernels().into_iter().map(move |k| (g, k)))
    {
        let (x, w, dy) = operands(&g);
        let run = |threads: usize| {
            on_threads(threads, || {
                let (dw, bias) = weight_backward(isa, &x, &dy, &g);
                let passes = [
                    forward(isa, &x, &w, None, &g),
                    input_backward(isa, &dy, &w, &g),
                    dw,
                    bias,
                ];
                passes.concat()
            })
        };
        let bits = |v: Vec<f32>| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert!(bits(run(1)) == bits(run(3)), "{g:?} with {isa:?}");
    }
}

/// The transforms written for AVX-512 ([`avx512`](super::avx512)) compute every value with
/// the portable code's operations in its order: the same bits, for every block of every case,
/// the forward pass's and the input gradient's (padded by `2 − pad`) alike.
#[test]
fn avx512_transforms_give_the_portable_bits() {
    if !Isa::Avx512.available() {
        eprintln!("this CPU has no AVX-512: nothing to compare");
        return;
    }
    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for g in cases().into_iter().filter(|g| g.n > 0) {
        let plans = [
            Plan::new([g.c, g.h, g.w], g.pad, g.o),
            Plan::new([g.o, g.oh, g.ow], g.pad.map(|p| 2 - p), g.c),
        ];
        for plan in plans {
            let x = values(plan.c * plan.h * plan.w, 5);
            let dy = values(plan.o * plan.oh * plan.ow, 6);
            let bias = values(plan.o, 7);
            for rows in plan.blocks() {
                let (tiles, stride) = (rows.len() * plan.tw, stride(rows.len() * plan.tw));
                let what = format!("{plan:?}, tile rows {rows:?}");
                // Only the tiles' columns: the rest of each row is left as it was.
                let columns = |v: &[f32]| -> Vec<u32> {
                    v.chunks_exact(stride)
                        .flat_map(|row| bits(&row[..tiles]))
                        .collect()
                };
                let transformed = |isa: Option<Isa>| {
                    let mut v = vec![f32::NAN; 16 * plan.c * stride];
                    let mut work = vec![0.0; transform::work(plan.tw, rows.len())];
                    transform::input(isa, &plan, &x, rows.clone(), &mut v, &mut work);
                    columns(&v)
                };
                assert!(
                    transformed(Some(Isa::Avx512)) == transformed(None),
                    "input, {what}"
                );
                let gradient = |isa: Option<Isa>| {
                    let mut d = vec![f32::NAN; 16 * plan.o * stride];
                    transform::gradient(isa, &plan, &dy, rows.clone(), &mut d);
                    columns(&d)
                };
                assert!(
                    gradient(Some(Isa::Avx512)) == gradient(None),
                    "gradient, {what}"
                );
                let m = values(16 * plan.o * stride, 8);
                let output = |isa: Option<Isa>, bias: Option<&[f32]>| {
                    let mut y = vec![0.0f32; plan.o * plan.oh * plan.ow];
                    // SAFETY: `y` holds the whole output; nothing else writes it.
                    unsafe {
                        transform::output(isa, &plan, &m, rows.clone(), bias, y.as_mut_ptr())
                    };
                    bits(&y)
                };
                for b in [Some(&bias[..]), None] {
                    assert!(
                        output(Some(Isa::Avx512), b) == output(None, b),
                        "output, {what}"
                    );
                }
            }
        }
    }
}

#[test]
fn other_convolutions_are_not_taken() {
    let conv = |x: [usize; 4], w: [usize; 4], stride, pad, dil, pass| {
        let options = ConvOptions::new([stride; 2], [pad; 2], [dil; 2], 1);
        fits(&Geom::new(&x, &w, &options).unwrap(), pass)
    };
    let mnist = [2, 32, 26, 26];
    for pass in [Pass::Forward, Pass::Input, Pass::Weight] {
        assert!(conv(mnist, [64, 32, 3, 3], 1, 0, 1, pass));
        assert!(conv(mnist, [64, 32, 3, 3], 1, 1, 1, pass));
        // The MNIST CNN's first layer: one input channel.
        assert!(!conv([2, 1, 28, 28], [32, 1, 3, 3], 1, 0, 1, pass));
        assert!(!conv(mnist, [64, 32, 3, 3], 2, 0, 1, pass));
        assert!(!conv(mnist, [64, 32, 3, 3], 1, 0, 2, pass));
        assert!(!conv(mnist, [64, 32, 3, 3], 1, 3, 1, pass));
        assert!(!conv(mnist, [64, 32, 5, 5], 1, 0, 1, pass));
        assert!(!conv(mnist, [8, 32, 3, 3], 1, 0, 1, pass));
    }
    // Rows of tiles: 17 of the output (34 columns) are too many for the forward pass; the
    // input gradient's rows are the input's (33 columns padded by 1: 17 tiles).
    assert!(!conv(
        [1, 16, 36, 36],
        [16, 16, 3, 3],
        1,
        0,
        1,
        Pass::Forward
    ));
    assert!(conv(
        [1, 16, 34, 34],
        [16, 16, 3, 3],
        1,
        0,
        1,
        Pass::Forward
    ));
    assert!(!conv([1, 16, 33, 33], [16, 16, 3, 3], 1, 1, 1, Pass::Input));
    assert!(conv([1, 16, 32, 32], [16, 16, 3, 3], 1, 1, 1, Pass::Input));
}
