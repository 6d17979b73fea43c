//! The register tiles of the direct convolution ([`direct`](super)), once per
//! instruction set: `avx512` (16 `f32` lanes, 32 registers) and `avx2` (AVX2 + FMA, 8 lanes,
//! 16 registers). Both modules have the same items; the tile bodies are one macro, so the two
//! differ only in their vector type, their lane count, a few one-line helpers and the tile
//! sizes that fit their registers.
//!
//! * [`forward`](avx512::forward): `MR` output channels × `NV` vectors of flat positions
//!   (consecutive within a vector, see [`Tile`](super::flat::Tile)); per tap, `NV` loads of
//!   the input, `MR` broadcasts of packed weights and `MR · NV` fused multiply-adds, summed in
//!   tap order.
//! * [`weight`](avx512::weight): `MR` taps × `NV` vectors of output channels; per flat
//!   position, `NV` loads of the transposed output gradient, `MR` broadcasts of the input and
//!   `MR · NV` fused multiply-adds, summed in position order over the runs given.
//! * [`scatter`](avx512::scatter): the input gradient's `MR` channels × `NV` vectors of flat
//!   positions; the forward tile's rank-1 updates over the output-gradient channels, then
//!   added to the padded input gradient.

/// Where one vector of a forward tile goes: lanes `lo..hi` to `base + lane`, with `base` the
/// offset (from the output channel's plane) of lane 0. `base` may be negative: only lanes
/// `lo..hi` are written.
#[derive(Clone, Copy, Debug)]
pub(super) struct Segment {
    pub vector: usize,
    pub lo: usize,
    pub hi: usize,
    pub base: isize,
}

/// The rank-1 update of the forward and input-gradient tiles: `acc[m][v] += w[m] · p[v][at ..]`
/// for the `MR` weights at `w` and the `NV` vectors at `p[v] + at` (the module's `zero`,
/// `load`, `splat`, `fma`, and the tile's `MR`, `NV`, in scope where it is used).
#[cfg(target_arch = "x86_64")]
macro_rules! rank1 {
    ($acc:ident, $w:expr, $p:expr, $at:expr) => {{
        let (w, at) = ($w, $at);
        let mut xv = [zero(); NV];
        for (xv, p) in xv.iter_mut().zip($p) {
            *xv = load(p.add(at));
        }
        for (m, row) in $acc.iter_mut().enumerate() {
            let s = splat(*w.add(m));
            for (a, xv) in row.iter_mut().zip(&xv) {
                *a = fma(s, *xv, *a);
            }
        }
    }};
}

/// The tile bodies, for the module's `V`, `L`, `zero`, `splat`, `load`, `fma`, `store_lanes`,
/// `hsum` and target feature string.
#[cfg(target_arch = "x86_64")]
macro_rules! tiles {
    ($feature:literal) => {
        /// One forward tile: `MR` channels (weights packed `[tap][step]` from `w`, `step ≥ MR`,
        /// biases from `bias`) over `NV` vectors of `L` flat positions, vector `v` from
        /// `x + starts[v]` (the padded input at its first position), each tap at `+ taps[t]`;
        /// written to the planes `y + m · plane` of the first `rows` channels through
        /// `segments`.
        ///
        /// # Safety
        /// `starts` has `NV` values; every `x + starts[v] + taps[t] + l` for `l < L` is
        /// readable, `w` holds `taps.len() · step` values, `bias` `MR`, and every lane a segment
        /// names is writable for `m < rows`.
        #[target_feature(enable = $feature)]
        #[allow(clippy::too_many_arguments)]
        pub(in super::super) unsafe fn forward<const MR: usize, const NV: usize>(
            (w, step): (*const f32, usize),
            taps: &[usize],
            (x, starts): (*const f32, &[usize]),
            bias: *const f32,
            y: *mut f32,
            plane: usize,
            rows: usize,
            segments: &[super::Segment],
        ) {
            unsafe {
                let mut acc = [[zero(); NV]; MR];
                for (m, row) in acc.iter_mut().enumerate() {
                    let b = splat(*bias.add(m));
                    for a in row.iter_mut() {
                        *a = b;
                    }
                }
                // As an array: the compiler then unrolls over the vectors.
                let starts = &*starts.as_ptr().cast::<[usize; NV]>();
                let mut xs = [x; NV];
                for (p, &start) in xs.iter_mut().zip(starts) {
                    *p = x.add(start);
                }
                let mut wt = w;
                for &tap in taps {
                    rank1!(acc, wt, &xs, tap);
                    wt = wt.add(step);
                }
                // The vector chosen by comparisons, not by `row[s.vector]`: an index into the
                // accumulators made the compiler keep them in memory and store them at every
                // tap (AVX-512's forward 2.6× slower).
                for (m, row) in acc.iter().enumerate().take(rows) {
                    let ym = y.add(m * plane);
                    for s in segments {
                        let mut a = row[0];
                        for (v, &r) in row.iter().enumerate().skip(1) {
                            if v == s.vector {
                                a = r;
                            }
                        }
                        store_lanes(ym.wrapping_offset(s.base), a, s.lo, s.hi);
                    }
                }
            }
        }

        /// One input-gradient tile: for `MR` channels (weights packed `[o][step]` from `w`,
        /// `step ≥ MR`) and `NV` vectors of `L` positions of the output gradient, vector `v`
        /// at `dy + dy_at[v]` (channel `o` at `+ o · ld`), adds `Σ_{o < k} w[o · step + m] ·
        /// dy[o · ld + dy_at[v] + l]` to `dx[m · plane + dx_at[v] + l]` for the first `count`
        /// vectors.
        ///
        /// # Safety
        /// `dy_at` and `dx_at` have `NV` values; every `dy + o · ld + dy_at[v] + l` (`o < k`,
        /// `l < L`) is readable, `w` holds `k · step` values, and every `dx + m · plane +
        /// dx_at[v] + l` (`m < MR`, `v < count`) is readable and writable.
        #[target_feature(enable = $feature)]
        pub(in super::super) unsafe fn scatter<const MR: usize, const NV: usize>(
            (w, step): (*const f32, usize),
            (dy, dy_at): (*const f32, &[usize]),
            ld: usize,
            k: usize,
            (dx, dx_at, count): (*mut f32, &[usize], usize),
            plane: usize,
        ) {
            unsafe {
                let mut acc = [[zero(); NV]; MR];
                // As arrays: the compiler then unrolls over the vectors.
                let dy_at = &*dy_at.as_ptr().cast::<[usize; NV]>();
                let dx_at = &*dx_at.as_ptr().cast::<[usize; NV]>();
                let mut ds = [dy; NV];
                for (p, &at) in ds.iter_mut().zip(dy_at) {
                    *p = dy.add(at);
                }
                let mut wt = w;
                for o in 0..k {
                    rank1!(acc, wt, &ds, o * ld);
                    wt = wt.add(step);
                }
                for (m, row) in acc.iter().enumerate() {
                    let p = dx.add(m * plane);
                    for (v, (a, &at)) in row.iter().zip(dx_at).enumerate() {
                        if v < count {
                            store(p.add(at), add(load(p.add(at)), *a));
                        }
                    }
                }
            }
        }

        /// One image's share of a weight-gradient tile: for taps `taps` (`MR` input offsets)
        /// and `NV · L` channels, adds `Σ_q x[q + tap] · dyt[q · ld + o]` over the flat
        /// positions `q` of the runs `(start, len)` given, in order, to `out[t · ldo + o]`
        /// (or sets it when `first`).
        ///
        /// # Safety
        /// Every `x + taps[t] + q` and `dyt + q · ld + o` (`q` in a run, `o < NV · L`) is
        /// readable, and `out[t · ldo + o]` writable.
        #[target_feature(enable = $feature)]
        #[allow(clippy::too_many_arguments)]
        pub(in super::super) unsafe fn weight<const MR: usize, const NV: usize>(
            x: *const f32,
            taps: &[usize; MR],
            dyt: *const f32,
            ld: usize,
            runs: &[(usize, usize)],
            out: *mut f32,
            ldo: usize,
            first: bool,
        ) {
            unsafe {
                let mut acc = [[zero(); NV]; MR];
                if !first {
                    for (t, row) in acc.iter_mut().enumerate() {
                        for (v, a) in row.iter_mut().enumerate() {
                            *a = load(out.add(t * ldo + v * L));
                        }
                    }
                }
                let mut xs = [x; MR];
                for (p, &tap) in xs.iter_mut().zip(taps) {
                    *p = x.add(tap);
                }
                for &(start, len) in runs {
                    for q in start..start + len {
                        let row = dyt.add(q * ld);
                        let mut d = [zero(); NV];
                        for (v, d) in d.iter_mut().enumerate() {
                            *d = load(row.add(v * L));
                        }
                        for (a, p) in acc.iter_mut().zip(&xs) {
                            let s = splat(*p.add(q));
                            for (a, d) in a.iter_mut().zip(&d) {
                                *a = fma(s, *d, *a);
                            }
                        }
                    }
                }
                for (t, row) in acc.iter().enumerate() {
                    for (v, a) in row.iter().enumerate() {
                        store(out.add(t * ldo + v * L), *a);
                    }
                }
            }
        }
    };
}

/// Calls the tile `$f` of `$isa`'s module (`avx512` or `avx2`, in scope where it is used) with
/// `MR` = the tile size `$wide.0`, or `$few` for a last block of `$rows ≤ $few` channels, and
/// `NV` = `$wide.1`; the weights `($w, $wide.0)` (packed for the wide tile) come first, then
/// `$args`.
#[cfg(target_arch = "x86_64")]
macro_rules! call_tile {
    ($isa:expr, $rows:expr, $f:ident, $wide:ident, $few:ident, $w:expr, ($($arg:expr),*)) => {
        match $isa {
            Isa::Avx512 if $rows <= avx512::$few => avx512::$f::<
                { avx512::$few },
                { avx512::$wide.1 },
            >(($w, avx512::$wide.0), $($arg),*),
            Isa::Avx512 => avx512::$f::<{ avx512::$wide.0 }, { avx512::$wide.1 }>(
                ($w, avx512::$wide.0),
                $($arg),*
            ),
            Isa::Avx2 if $rows <= avx2::$few => avx2::$f::<{ avx2::$few }, { avx2::$wide.1 }>(
                ($w, avx2::$wide.0),
                $($arg),*
            ),
            Isa::Avx2 => avx2::$f::<{ avx2::$wide.0 }, { avx2::$wide.1 }>(
                ($w, avx2::$wide.0),
                $($arg),*
            ),
        }
    };
}
#[cfg(target_arch = "x86_64")]
pub(super) use call_tile;

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    pub(in super::super::super) use super::super::super::lanes::avx512::L;
    use super::super::super::lanes::avx512::*;

    /// Forward tile: channels × vectors of positions (24 accumulators of 32 registers).
    pub const FORWARD: (usize, usize) = (8, 3);
    /// The forward tile's channels for a last block of at most 4.
    pub const FORWARD_FEW: usize = 4;
    /// Weight-gradient tile: taps × vectors of channels (24 accumulators).
    pub const WEIGHT: (usize, usize) = (6, 4);
    /// Weight-gradient tile for 17 to 32 output channels (18 accumulators): the CNN's first
    /// layer, 9 taps × 32 channels, in one tile (0.35 ms per batch as one GEMM per image, 0.22
    /// with this tile; the wide tile would pad it to 12 taps × 64 channels).
    pub const WEIGHT_NARROW: (usize, usize) = (9, 2);
    /// Input-gradient tile: channels × vectors of positions (the forward tile's).
    pub const SCATTER: (usize, usize) = FORWARD;
    /// The input-gradient tile's channels for a last block of at most 4.
    pub const SCATTER_FEW: usize = FORWARD_FEW;

    tiles!("avx512f");
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    pub(in super::super::super) use super::super::super::lanes::avx2::L;
    use super::super::super::lanes::avx2::*;

    /// Forward tile: channels × vectors of positions (12 accumulators of 16 registers).
    pub const FORWARD: (usize, usize) = (6, 2);
    /// The forward tile's channels for a last block of at most 4 (the second layer's 64
    /// channels are ten blocks of 6 and one of 4).
    pub const FORWARD_FEW: usize = 4;
    /// Weight-gradient tile: taps × vectors of channels (12 accumulators).
    pub const WEIGHT: (usize, usize) = (6, 2);
    /// Input-gradient tile: channels × vectors of positions (the forward tile's).
    pub const SCATTER: (usize, usize) = FORWARD;
    /// The input-gradient tile's channels for a last block of at most 4.
    pub const SCATTER_FEW: usize = FORWARD_FEW;

    tiles!("avx2,fma");
}
