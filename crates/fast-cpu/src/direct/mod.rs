//! Direct convolution with stride 1 (any padding and dilation) on x86-64 CPUs with AVX-512 or
//! AVX2 + FMA: no im2col matrix and no GEMM packing of the image, our own register tiles
//! ([`simd`]) instead of `gemm`'s.
//!
//! Each image's input is copied once into a flat layout ([`Flat`]): every channel padded to
//! `hp × wp`, one after another, then zeros. Output position `(oh, ow)` is flat position
//! `q = oh · wp + ow`, and tap `(c, i, j)` reads the input at `q + c·hp·wp + i·dh·wp + j·dw`,
//! so that consecutive positions read consecutive inputs for every tap: the tiles load vectors
//! of the input straight from it. The forward pass and the input gradient compute the
//! positions with `ow ≥ OW` (the padded columns) too and throw them away, a few per cent for
//! the MNIST CNN (26 columns for 24 outputs); the weight gradient skips them.
//!
//! * forward: `y[o][q] = b[o] + Σ_tap w[o][tap] · x[q + tap]`;
//! * weight gradient: `dW[tap][o] = Σ_i Σ_q x_i[q + tap] · dy_i[q][o]`, with `dy` transposed
//!   onto the input's flat positions, one image at a time (so that its two copies stay in L2
//!   while its tiles read them), over a fixed partition of the batch as in
//!   [`conv`](super::conv);
//! * input gradient (AVX-512, and AVX2 where its tiles go by rows, see [`Pass`]):
//!   `dxp[c][q + tap] += Σ_o w[o][c][tap] · dy[o][q]`, im2col's GEMM and col2im in one tile,
//!   into a padded input gradient whose border is dropped.
//!
//! Where every output row is a whole number of vectors (the MNIST CNN's second layer with
//! AVX2: 24 columns), the forward and input-gradient tiles take their vectors row by row
//! instead, and compute no padded column ([`flat::Flat::tiles`]).
//!
//! Every value is summed in an order fixed by the shapes and the instruction set, never by
//! the number of threads.

use std::sync::LazyLock;

use super::geom::Geom;
#[cfg(target_arch = "x86_64")]
use super::isa::avx2_and_fma;
#[cfg(target_arch = "x86_64")]
use simd::{avx2, avx512};

mod flat;
mod forward;
mod input;
mod simd;
#[cfg(test)]
pub(super) mod tests;
mod weight;

pub(crate) use forward::forward;
pub(crate) use input::input_backward;
pub(crate) use weight::weight_backward;

/// The register tiles to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) enum Isa {
    Avx512,
    Avx2,
}

impl Isa {
    /// The tiles of this CPU (AVX-512 unless `TRAINER_CPU_AVX512=0`, else AVX2 + FMA), or
    /// `None` (the convolutions then run as im2col and GEMM).
    pub(crate) fn detect() -> Option<Self> {
        #[cfg(target_arch = "x86_64")]
        {
            if super::isa::avx512_in_use() {
                return Some(Self::Avx512);
            }
            if avx2_and_fma() {
                return Some(Self::Avx2);
            }
        }
        None
    }

    /// Whether this CPU can run these tiles.
    #[cfg(test)]
    pub(crate) fn available(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Self::Avx512 => super::isa::cpu_has_avx512(),
                Self::Avx2 => avx2_and_fma(),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        false
    }

    /// `f32` lanes per register and the input-gradient tile (channels, vectors).
    pub(super) fn scatter_sizes(self) -> (usize, (usize, usize)) {
        #[cfg(target_arch = "x86_64")]
        match self {
            Self::Avx512 => (avx512::L, avx512::SCATTER),
            Self::Avx2 => (avx2::L, avx2::SCATTER),
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no direct convolution tiles on this architecture")
    }

    /// `f32` lanes per register and the forward tile (channels, vectors of positions).
    pub(super) fn sizes(self) -> (usize, (usize, usize)) {
        #[cfg(target_arch = "x86_64")]
        match self {
            Self::Avx512 => (avx512::L, avx512::FORWARD),
            Self::Avx2 => (avx2::L, avx2::FORWARD),
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no direct convolution tiles on this architecture")
    }

    /// `f32` lanes per register and the weight-gradient tile (taps, vectors of channels) for
    /// `o` output channels: AVX-512's narrow tile for 17 to 32 channels.
    pub(super) fn weight_sizes(self, o: usize) -> (usize, (usize, usize)) {
        #[cfg(target_arch = "x86_64")]
        match self {
            Self::Avx512 if narrow(o) => (avx512::L, avx512::WEIGHT_NARROW),
            Self::Avx512 => (avx512::L, avx512::WEIGHT),
            Self::Avx2 => (avx2::L, avx2::WEIGHT),
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no direct convolution tiles on this architecture")
    }
}

/// The environment variable that turns the direct kernels off (`0`): every convolution then
/// runs as im2col and GEMM, as before them, to compare the two on one machine.
pub const DIRECT_VAR: &str = "TRAINER_CONV_DIRECT";

/// Whether `TRAINER_CONV_DIRECT=0` is set (read once).
static TURNED_OFF: LazyLock<bool> =
    LazyLock::new(|| std::env::var(DIRECT_VAR).is_ok_and(|v| v.trim() == "0"));

/// The passes of a convolution the direct kernels run. The input gradient runs direct with
/// AVX-512, and with AVX2 + FMA where its tiles go by rows ([`flat::Flat::tiles`]): for the
/// MNIST CNN's second layer, AVX-512 took 3.3–3.5 ms per batch against 3.6–3.9 for `gemm` and
/// col2im; AVX2 on consecutive flat positions 6.6–6.7 against 6.4–6.6 (best of 15 calls, 2
/// threads), by rows 7–9 % less than `gemm` and col2im (Zen 3, medians of 40 alternated
/// pairs). As the forward of the output gradient padded by the kernel's reach, it lost on
/// both (4.1–4.4 vs 3.9–4.0 ms with AVX-512): it multiplies the padding's zeros too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    Forward,
    Weight,
    Input,
}

/// Output channels from which the weight gradient runs direct with the wide tiles: the AVX-512
/// tile's width. Fewer run as one GEMM per image, except [`narrow`] ones with AVX-512.
const WIDE: usize = 64;

/// Whether `o` output channels take AVX-512's narrow weight tile (two vectors of channels).
fn narrow(o: usize) -> bool {
    (17..=32).contains(&o)
}

/// Whether the direct kernels handle `pass` of `g` (stride 1; for the weight gradient, at least
/// [`WIDE`] output channels, or [`narrow`] ones with AVX-512), and with which tiles.
pub(crate) fn usable(g: &Geom, pass: Pass) -> Option<Isa> {
    if *TURNED_OFF {
        return None;
    }
    let isa = Isa::detect().filter(|_| g.stride == [1, 1])?;
    match pass {
        Pass::Forward => Some(isa),
        Pass::Weight => (g.o >= WIDE || (isa == Isa::Avx512 && narrow(g.o))).then_some(isa),
        Pass::Input => (isa == Isa::Avx512 || input_by_rows(isa, g)).then_some(isa),
    }
}

/// Whether the input gradient's tiles of `isa` go by rows for `g` ([`flat::Flat::tiles`]):
/// with AVX2 + FMA, the direct input gradient runs only then.
fn input_by_rows(isa: Isa, g: &Geom) -> bool {
    let (lanes, (_, nv)) = isa.scatter_sizes();
    let flat = flat::Flat::new([1, g.h, g.w], g.pad, g.dil, [g.kh, g.kw], nv * lanes);
    flat.by_rows(nv, lanes)
}
