//! Winograd's F(2×2, 3×3) (Lavin and Gray, 2016) for 3×3 convolutions with stride 1, no
//! dilation and [`MIN_CHANNELS`] or more channels on each side (the MNIST CNN's second layer):
//! the forward pass; the input gradient as the forward pass of the output gradient (padded by
//! two minus the padding, the kernel turned by 180° and its two channel axes swapped); and the
//! weight gradient as the adjoint of the forward pass ([`weight`]).
//!
//! Each 4×4 tile `d` of the (padded) input gives a 2×2 tile of the output,
//! `Y = Aᵀ [Σ_c (G g_{o,c} Gᵀ) ⊙ (Bᵀ d_c B)] A`, so the sums over channels are 16 matrix
//! products `M_ξ = U_ξ [o × c] · V_ξ [c × tiles]`, one per position `ξ` of the 4×4 transformed
//! tile: 16 multiplications per output tile and channel pair where the direct convolution
//! makes 36. Per task (an image, or a block of its tile rows when it has more than
//! [`BLOCK_TILES`] tiles), in the thread's scratch buffer ([`transform`]):
//!
//! 1. `V[c][ξ][t] = Bᵀ d B` for every tile `t` (each channel's 16 rows of tiles next to each
//!    other, so that the transform writes to one small region at a time);
//! 2. `M[o][ξ][t] = U_ξ · V_ξ`, through our register tiles ([`products`]; AVX-512 or AVX2 +
//!    FMA as [`Isa::detect`] says, which `TRAINER_CPU_AVX512=0` turns to AVX2), or
//!    [`matmul`](super::kernels::matmul) on other CPUs;
//! 3. `y = Aᵀ M A + b`, the last row or column dropped where `OH` or `OW` is odd.
//!
//! With AVX-512 the transforms are written with its instructions ([`avx512`]), a row of tiles
//! in one register; elsewhere they are portable code ([`transform`]), which gives the same
//! bits. Both ask for the rows they read next ahead of time.
//!
//! Every value is summed in an order fixed by the shapes, never by the number of threads; it
//! is another order than the direct tiles' and im2col's, within the tests' 1e-4 of them.
//! `TRAINER_CONV_WINOGRAD=0` turns this off (the direct tiles or im2col then run), to compare.

use std::array::from_fn;
use std::ops::Range;
use std::sync::LazyLock;

use rayon::prelude::*;

use super::direct::{Isa, Pass};
use super::geom::Geom;
use super::kernels::{Shared, with_scratch};

#[cfg(target_arch = "x86_64")]
mod avx512;
mod prefetch;
mod products;
#[cfg(test)]
mod tests;
mod transform;
mod weight;

pub(super) use weight::weight_backward;

/// The environment variable that turns the Winograd convolutions off (`0`).
pub const WINOGRAD_VAR: &str = "TRAINER_CONV_WINOGRAD";

/// Whether `TRAINER_CONV_WINOGRAD=0` is set (read once).
static TURNED_OFF: LazyLock<bool> =
    LazyLock::new(|| std::env::var(WINOGRAD_VAR).is_ok_and(|v| v.trim() == "0"));

/// Fewest input and output channels: the products' depth is the input channels, and the
/// transforms cost per channel what a few multiplications by the other side's channels save.
const MIN_CHANNELS: usize = 16;

/// Most tiles per task: the task's `V` and `M` take `16 · (c + o)` values per tile (0.9 MiB for
/// the MNIST CNN's second layer, 144 tiles and 96 channels; 1.0 MiB for its input gradient,
/// 169 tiles). Cutting the input gradient's 13 tile rows into two tasks made both its
/// products and its transforms slower (2.2 against 2.1 ms, 1.2 against 1.0 ms, with AVX-512).
const BLOCK_TILES: usize = 192;

/// The products' operands are laid out in rows of a multiple of this many values
/// ([`stride`]), so that their tiles ([`products`]) take whole vectors of them.
const STRIDE_STEP: usize = 16;

/// The values per row of `n` tiles (`V`, `M` and `D`) or channels (the weight gradient's `dU`
/// and `V_ξᵀ`): `n` rounded up to [`STRIDE_STEP`].
fn stride(n: usize) -> usize {
    n.next_multiple_of(STRIDE_STEP)
}

/// Whether the Winograd kernels run `pass` of `g`: wherever `g` [`fits`]. For the MNIST CNN's
/// second layer (64 images, 2 threads, milliseconds, the direct tiles against these):
///
/// | pass | AVX-512 | AVX2 + FMA |
/// |---|---|---|
/// | forward | 3.2 against 1.9 | 5.7 against 3.7 |
/// | input gradient | 3.5 against 2.6 | 6.3 against 5.4 |
/// | weight gradient | 3.4 against 2.4 | 6.3 against 4.2 |
///
/// With `gemm`'s micro-kernels for the products and the portable transforms, the two
/// gradients lost to the direct tiles in a training step with AVX-512 (4.0 against 3.8 ms,
/// 4.1–4.4 against 3.8–3.9).
pub(super) fn usable(g: &Geom, pass: Pass) -> bool {
    !*TURNED_OFF && fits(g, pass)
}

/// Whether these kernels handle `pass` of `g` (and pay on it): a 3×3 kernel, stride 1, no
/// dilation, padding up to 2, [`MIN_CHANNELS`] on each side, and rows of at most
/// [`MAX_ROW_TILES`](transform::MAX_ROW_TILES) tiles (the output's for the forward pass and
/// the weight gradient, the input's for the input gradient).
fn fits(g: &Geom, pass: Pass) -> bool {
    let columns = match pass {
        Pass::Forward | Pass::Weight => g.ow,
        Pass::Input => g.w,
    };
    [g.kh, g.kw] == [3, 3]
        && g.stride == [1, 1]
        && g.dil == [1, 1]
        && g.pad.iter().all(|&p| p <= 2)
        && g.c >= MIN_CHANNELS
        && g.o >= MIN_CHANNELS
        && columns.div_ceil(2) <= transform::MAX_ROW_TILES
}

/// `conv2d(x, w) + b` as `[n, o, oh, ow]` (`usable(g, Pass::Forward)`), with the register
/// tiles and transforms of `isa` (one this CPU has), or portable code and `gemm` when `None`.
pub(super) fn forward(
    isa: Option<Isa>,
    x: &[f32],
    w: &[f32],
    b: Option<&[f32]>,
    g: &Geom,
) -> Vec<f32> {
    let plan = Plan::new([g.c, g.h, g.w], g.pad, g.o);
    debug_assert_eq!((plan.oh, plan.ow), (g.oh, g.ow));
    let u = transform_weights(g.o, g.c, |o, c, tap| w[(o * g.c + c) * 9 + tap]);
    convolve(isa, (x, g.n), &plan, &u, b)
}

/// The input gradient `[n, c, h, w]` of `conv2d(x, w)` for the output gradient `dy`
/// (`usable(g, Pass::Input)`): `dy` padded by `2 − pad` convolved with the kernel turned by
/// 180°, output and input channels swapped; `isa` as for [`forward`].
pub(super) fn input_backward(isa: Option<Isa>, dy: &[f32], w: &[f32], g: &Geom) -> Vec<f32> {
    let plan = Plan::new([g.o, g.oh, g.ow], g.pad.map(|p| 2 - p), g.c);
    debug_assert_eq!((plan.oh, plan.ow), (g.h, g.w));
    let u = transform_weights(g.c, g.o, |c, o, tap| w[(o * g.c + c) * 9 + 8 - tap]);
    convolve(isa, (dy, g.n), &plan, &u, None)
}

/// One convolution's tiles: inputs `[c, h, w]` padded by `pad`, `o` output channels.
#[derive(Clone, Copy, Debug)]
struct Plan {
    c: usize,
    h: usize,
    w: usize,
    pad: [usize; 2],
    o: usize,
    oh: usize,
    ow: usize,
    /// Tile columns (`⌈ow / 2⌉`) and tile rows.
    tw: usize,
    th: usize,
    /// Tile rows per task.
    rows: usize,
}

impl Plan {
    fn new([c, h, w]: [usize; 3], pad: [usize; 2], o: usize) -> Self {
        let (oh, ow) = (h + 2 * pad[0] - 2, w + 2 * pad[1] - 2);
        let (th, tw) = (oh.div_ceil(2), ow.div_ceil(2));
        let blocks = (th * tw).div_ceil(BLOCK_TILES).max(1);
        Self {
            c,
            h,
            w,
            pad,
            o,
            oh,
            ow,
            tw,
            th,
            rows: th.div_ceil(blocks).max(1),
        }
    }

    /// The tile rows of each task of an image.
    fn blocks(&self) -> Vec<Range<usize>> {
        (0..self.th)
            .step_by(self.rows)
            .map(|r| r..(r + self.rows).min(self.th))
            .collect()
    }
}

/// The 4 × 3 matrix `G` of F(2×2, 3×3).
const G: [[f32; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];

/// `U[ξ][o][c] = (G g Gᵀ)[ξ]` for every kernel `g`, whose tap `3·i + j` is `at(o, c, tap)`,
/// [`LANES`] input channels at a time. On the calling thread: 0.04 ms for the MNIST CNN's 2048
/// kernels; spread over the pool, its wake-up cost more than that.
fn transform_weights(o: usize, c: usize, at: impl Fn(usize, usize, usize) -> f32) -> Vec<f32> {
    /// Kernels transformed at once, one per lane.
    const LANES: usize = 8;
    type Lanes = [f32; LANES];
    let mut u = vec![0.0; 16 * o * c];
    // `Σ_l a[l] · b[l]`, lane by lane, for three weights `a`.
    let dot = |a: [f32; 3], b: [Lanes; 3]| -> Lanes {
        from_fn(|k| a[0] * b[0][k] + a[1] * b[1][k] + a[2] * b[2][k])
    };
    for oo in 0..o {
        for first in (0..c).step_by(LANES) {
            let lanes = (c - first).min(LANES);
            // Tap `t` of the kernels of channels `first..first + lanes` (zero past them).
            let mut g = [[0.0; LANES]; 9];
            for k in 0..lanes {
                for (tap, values) in g.iter_mut().enumerate() {
                    values[k] = at(oo, first + k, tap);
                }
            }
            // Row `i` of G g, each of its three values a lane per kernel.
            let rows: [[Lanes; 3]; 4] =
                from_fn(|i| from_fn(|j| dot(G[i], [g[j], g[3 + j], g[6 + j]])));
            for (i, row) in rows.into_iter().enumerate() {
                for (j, gj) in G.into_iter().enumerate() {
                    let at = ((4 * i + j) * o + oo) * c + first;
                    let values: Lanes =
                        from_fn(|k| gj[0] * row[0][k] + gj[1] * row[1][k] + gj[2] * row[2][k]);
                    match u.get_mut(at..at + LANES).filter(|_| lanes == LANES) {
                        Some(whole) => whole.copy_from_slice(&values),
                        None => u[at..at + lanes].copy_from_slice(&values[..lanes]),
                    }
                }
            }
        }
    }
    u
}

/// `[n, o, oh, ow]`: every image of `input` (`[n, c, h, w]`) convolved through `u`
/// ([`transform_weights`]) plus `bias`.
fn convolve(
    isa: Option<Isa>,
    (input, n): (&[f32], usize),
    plan: &Plan,
    u: &[f32],
    bias: Option<&[f32]>,
) -> Vec<f32> {
    let Plan { c, h, w, o, .. } = *plan;
    let (image, plane) = (c * h * w, plan.oh * plan.ow);
    let blocks = plan.blocks();
    let mut y: Vec<f32> = Vec::with_capacity(n * o * plane);
    let out = Shared(y.as_mut_ptr());
    (0..n * blocks.len()).into_par_iter().for_each(|task| {
        let (i, rows) = (task / blocks.len(), blocks[task % blocks.len()].clone());
        let tiles = rows.len() * plan.tw;
        let stride = stride(tiles);
        let work = transform::work(plan.tw, rows.len());
        with_scratch(16 * (c + o) * stride + work, |buf| {
            let (v, rest) = buf.split_at_mut(16 * c * stride);
            let (m, work) = rest.split_at_mut(16 * o * stride);
            transform::input(
                isa,
                plan,
                &input[i * image..][..image],
                rows.clone(),
                v,
                work,
            );
            // Zeros after the tiles: the products compute those columns too.
            v.chunks_exact_mut(stride)
                .for_each(|row| row[tiles..].fill(0.0));
            products::forward(isa, u, [o, c], v, stride, m);
            // SAFETY: image `i`'s output starts at `i · o · plane`, inside `y`'s capacity, and
            // this task writes only the rows of its own tile rows there.
            unsafe { transform::output(isa, plan, m, rows, bias, out.at(i * o * plane)) }
        })
    });
    // SAFETY: every image's tile rows cover all its output rows, of every channel.
    unsafe { y.set_len(n * o * plane) };
    y
}
