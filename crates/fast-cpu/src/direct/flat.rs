//! One image's input laid out for the direct tiles: every channel padded to `hp × wp`, one
//! after another, then zeros, so that output position `(oh, ow)` is flat position
//! `q = oh · wp + ow` and tap `(c, i, j)` reads the input at `q + c·hp·wp + i·dh·wp + j·dw`.

use super::simd::Segment;

/// One image's input in the flat layout (see the module documentation).
pub(super) struct Flat {
    pub(super) c: usize,
    pub(super) h: usize,
    pub(super) w: usize,
    pub(super) pad: [usize; 2],
    pub(super) hp: usize,
    pub(super) wp: usize,
    pub(super) oh: usize,
    pub(super) ow: usize,
    /// Offset of every tap `(c, i, j)`, in the weight's order.
    pub(super) taps: Vec<usize>,
    /// Flat positions computed: `oh · wp` rounded up to the tile width.
    pub(super) positions: usize,
    /// Values of the buffer, zeros at the end included.
    pub(super) len: usize,
}

impl Flat {
    pub(super) fn new(
        input: [usize; 3],
        pad: [usize; 2],
        dil: [usize; 2],
        kernel: [usize; 2],
        tile: usize,
    ) -> Self {
        let [c, h, w] = input;
        let (hp, wp) = (h + 2 * pad[0], w + 2 * pad[1]);
        let (oh, ow) = (hp - dil[0] * (kernel[0] - 1), wp - dil[1] * (kernel[1] - 1));
        let mut taps = Vec::with_capacity(c * kernel[0] * kernel[1]);
        for ci in 0..c {
            for i in 0..kernel[0] {
                for j in 0..kernel[1] {
                    taps.push(ci * hp * wp + i * dil[0] * wp + j * dil[1]);
                }
            }
        }
        let positions = (oh * wp).div_ceil(tile) * tile;
        let reach = taps.iter().max().copied().unwrap_or(0);
        let len = (c * hp * wp).max(positions + reach);
        Self {
            c,
            h,
            w,
            pad,
            hp,
            wp,
            oh,
            ow,
            taps,
            positions,
            len,
        }
    }

    /// Writes `x` (`[c, h, w]`) into `out` (`len` values) in the flat layout.
    pub(super) fn fill(&self, x: &[f32], out: &mut [f32]) {
        let [ph, pw] = self.pad;
        let (plane, body) = (self.hp * self.wp, self.c * self.hp * self.wp);
        for (ci, dst) in out[..body].chunks_exact_mut(plane).enumerate() {
            dst[..ph * self.wp].fill(0.0);
            dst[(ph + self.h) * self.wp..].fill(0.0);
            let src = &x[ci * self.h * self.w..][..self.h * self.w];
            for (row, src) in dst[ph * self.wp..]
                .chunks_exact_mut(self.wp)
                .zip(src.chunks_exact(self.w))
            {
                row[..pw].fill(0.0);
                row[pw..pw + self.w].copy_from_slice(src);
                row[pw + self.w..].fill(0.0);
            }
        }
        out[body..self.len].fill(0.0);
    }

    /// Writes `dy` (`[o, oh, ow]`) transposed into `out`: `positions` rows of `o_pad`
    /// channels, zeros in the padded columns, past the last row and in the channels past `o`.
    /// Blocks of 8 channels × 8 columns are transposed in registers; the rest one value at a
    /// time. Only for CPUs with AVX (the direct kernels need AVX2).
    pub(super) fn spread_transposed(&self, dy: &[f32], o_pad: usize, out: &mut [f32]) {
        let (plane, o) = (self.oh * self.ow, dy.len() / (self.oh * self.ow).max(1));
        let blocked = cfg!(target_arch = "x86_64");
        let (full_c, full_col) = if blocked {
            (o / 8 * 8, self.ow / 8 * 8)
        } else {
            (0, 0)
        };
        for (q, dst) in out.chunks_exact_mut(o_pad).enumerate() {
            let (r, col) = (q / self.wp, q % self.wp);
            if r < self.oh && col < self.ow {
                let at = r * self.ow + col;
                let first = if col < full_col { full_c } else { 0 };
                for (c, v) in dst[..o].iter_mut().enumerate().skip(first) {
                    *v = dy[c * plane + at];
                }
                dst[o..].fill(0.0);
            } else {
                dst.fill(0.0);
            }
        }
        #[cfg(target_arch = "x86_64")]
        for r in 0..self.oh {
            for col in (0..full_col).step_by(8) {
                for c in (0..full_c).step_by(8) {
                    let (from, to) = (
                        c * plane + r * self.ow + col,
                        (r * self.wp + col) * o_pad + c,
                    );
                    assert!(from + 7 * plane + 8 <= dy.len() && to + 7 * o_pad + 8 <= out.len());
                    // SAFETY: the assertion keeps the 8 rows of 8 values read and written
                    // inside `dy` and `out`; the CPU has AVX (see above).
                    unsafe {
                        super::super::lanes::transpose8(
                            dy.as_ptr().add(from),
                            plane,
                            out.as_mut_ptr().add(to),
                            o_pad,
                        )
                    }
                }
            }
        }
    }

    /// The forward tiles of `vectors` vectors of `lanes` positions that cover the output
    /// plane, in one of two layouts, whichever computes fewer positions:
    ///
    /// * consecutive flat positions, the padded columns computed and thrown away (each vector
    ///   written through one segment per output row it touches);
    /// * whole vectors of one output row each, when a row is a whole number of vectors (the
    ///   MNIST CNN's second layer with AVX2: 24 columns of a 26-wide input, 576 positions
    ///   instead of 624), each written as it is. A last tile short of vectors repeats its last
    ///   one and writes it once.
    pub(super) fn tiles(&self, vectors: usize, lanes: usize) -> Vec<Tile> {
        if let Some(rows) = self.row_tiles(vectors, lanes) {
            rows.into_iter()
                .map(|tile| Tile {
                    starts: tile
                        .vectors
                        .iter()
                        .map(|&k| self.row_start(k, lanes))
                        .collect(),
                    segments: tile.vectors[..tile.count]
                        .iter()
                        .enumerate()
                        .map(|(vector, &k)| Segment {
                            vector,
                            lo: 0,
                            hi: lanes,
                            base: (k * lanes) as isize,
                        })
                        .collect(),
                })
                .collect()
        } else {
            let tile = vectors * lanes;
            (0..self.positions / tile)
                .map(|t| Tile {
                    starts: (0..vectors).map(|v| t * tile + v * lanes).collect(),
                    segments: self.segments(t * tile, vectors, lanes),
                })
                .collect()
        }
    }

    /// The tiles by rows (see [`Flat::tiles`]), if that layout computes fewer positions than
    /// consecutive flat ones.
    pub(super) fn row_tiles(&self, vectors: usize, lanes: usize) -> Option<Vec<RowTile>> {
        let row_vectors = self.oh * self.ow / lanes;
        self.by_rows(vectors, lanes).then(|| {
            (0..row_vectors.div_ceil(vectors))
                .map(|t| {
                    let count = (row_vectors - t * vectors).min(vectors);
                    RowTile {
                        vectors: (0..vectors)
                            .map(|v| t * vectors + v.min(count - 1))
                            .collect(),
                        count,
                    }
                })
                .collect()
        })
    }

    /// Whether tiles of `vectors` vectors of `lanes` positions go by rows (see
    /// [`Flat::tiles`]): rows are whole vectors, and fewer positions are computed.
    pub(super) fn by_rows(&self, vectors: usize, lanes: usize) -> bool {
        let row_vectors = self.oh * self.ow / lanes;
        self.ow.is_multiple_of(lanes)
            && row_vectors.div_ceil(vectors) * vectors * lanes < self.positions
    }

    /// The flat position of output vector `k` (of `lanes` positions; rows are whole vectors).
    pub(super) fn row_start(&self, k: usize, lanes: usize) -> usize {
        (k * lanes / self.ow) * self.wp + k * lanes % self.ow
    }

    /// The segments that carry the vectors of the tile at flat position `q0` to the output
    /// plane (`oh × ow`, rows of `ow`).
    fn segments(&self, q0: usize, vectors: usize, lanes: usize) -> Vec<Segment> {
        let mut out = Vec::new();
        for vector in 0..vectors {
            let qs = q0 + vector * lanes;
            let last = ((qs + lanes - 1) / self.wp).min(self.oh.saturating_sub(1));
            for r in qs / self.wp..=last {
                let lo = (r * self.wp).max(qs) - qs;
                let hi = (r * self.wp + self.ow).min(qs + lanes).saturating_sub(qs);
                if r < self.oh && lo < hi {
                    let base = (r * self.ow + qs) as isize - (r * self.wp) as isize;
                    out.push(Segment {
                        vector,
                        lo,
                        hi,
                        base,
                    });
                }
            }
        }
        out
    }
}

/// A tile by rows ([`Flat::row_tiles`]): the indices `k` of its `vectors` (vector `k` holds
/// output positions `k · lanes ..`), of which the first `count` are its own; a last tile short
/// of vectors repeats its last one in the others, computes it again and writes it once.
pub(super) struct RowTile {
    pub(super) vectors: Vec<usize>,
    pub(super) count: usize,
}

/// One forward tile: where its vectors read the flat input (each vector's first position)
/// and where they go in the output plane.
pub(super) struct Tile {
    pub(super) starts: Vec<usize>,
    pub(super) segments: Vec<Segment>,
}
