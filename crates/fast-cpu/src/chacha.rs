//! The words of a ChaCha8 stream, sixteen blocks at a time with AVX-512: the same words, in the
//! same order, as `rand_chacha`'s `ChaCha8Rng` with that seed and stream, whose own SIMD code
//! runs four blocks on 128-bit lanes (AVX2 at best). Here block `l` of a group of sixteen is
//! lane `l` of every state word, so each step of a round is one instruction for all sixteen
//! blocks; a 16 × 16 transpose then puts each block's words in order.
//!
//! The state is ChaCha's: four constants, the 256-bit key, a 64-bit block counter (words 12
//! and 13) and a 64-bit stream number (words 14 and 15); eight rounds; the input added back.

use rand_chacha::ChaCha8Rng;

/// Words per ChaCha block.
const BLOCK: usize = 16;
/// Blocks computed together, one per lane.
const LANES: usize = 16;
/// Words per group of blocks.
const GROUP: usize = BLOCK * LANES;

/// The key and stream of a ChaCha8 generator: what fixes its words.
#[derive(Clone, Copy)]
pub(super) struct Stream {
    key: [u32; 8],
    stream: u64,
}

impl Stream {
    /// The stream `rng` draws from, when this CPU computes it here (AVX-512 in use, see
    /// [`isa`](super::isa)); `None` leaves it to `rng`.
    pub(super) fn of(rng: &ChaCha8Rng) -> Option<Self> {
        if !super::isa::avx512_in_use() {
            return None;
        }
        let seed = rng.get_seed();
        let key = std::array::from_fn(|i| {
            u32::from_le_bytes([
                seed[4 * i],
                seed[4 * i + 1],
                seed[4 * i + 2],
                seed[4 * i + 3],
            ])
        });
        Some(Self {
            key,
            stream: rng.get_stream(),
        })
    }

    /// Words `pos..pos + n` of the stream (`pos` counts words from its start, as
    /// `ChaCha8Rng::get_word_pos` does), handed to `f` in order, a group's worth or less at a
    /// time.
    pub(super) fn each(&self, pos: u128, n: usize, mut f: impl FnMut(&[u32])) {
        let mut group = [0u32; GROUP];
        let (mut block, mut skip) = ((pos / BLOCK as u128) as u64, (pos % BLOCK as u128) as usize);
        let mut left = n;
        while left > 0 {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `of` gave a `Stream` only where the CPU has AVX-512F.
            unsafe {
                avx512::group(self, block, &mut group)
            };
            let take = (GROUP - skip).min(left);
            f(&group[skip..skip + take]);
            (left, block, skip) = (left - take, block.wrapping_add(LANES as u64), 0);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    use super::{BLOCK, GROUP, LANES, Stream};

    /// Blocks `first..first + 16` of `s` (block counter modulo 2⁶⁴), one after the other.
    #[target_feature(enable = "avx512f")]
    pub(super) fn group(s: &Stream, first: u64, out: &mut [u32; GROUP]) {
        let constants = [0x6170_7865u32, 0x3320_646e, 0x7962_2d32, 0x6b20_6574];
        let counter: [u64; LANES] = std::array::from_fn(|l| first.wrapping_add(l as u64));
        let low: [u32; LANES] = std::array::from_fn(|l| counter[l] as u32);
        let high: [u32; LANES] = std::array::from_fn(|l| (counter[l] >> 32) as u32);
        let splat = |v: u32| _mm512_set1_epi32(v as i32);
        // SAFETY: `low` and `high` hold 16 values each.
        let (low, high) = unsafe {
            (
                _mm512_loadu_si512(low.as_ptr().cast()),
                _mm512_loadu_si512(high.as_ptr().cast()),
            )
        };
        let input: [__m512i; BLOCK] = std::array::from_fn(|w| match w {
            0..4 => splat(constants[w]),
            4..12 => splat(s.key[w - 4]),
            12 => low,
            13 => high,
            14 => splat(s.stream as u32),
            _ => splat((s.stream >> 32) as u32),
        });
        let mut x = input;
        for _ in 0..4 {
            quarter(&mut x, 0, 4, 8, 12);
            quarter(&mut x, 1, 5, 9, 13);
            quarter(&mut x, 2, 6, 10, 14);
            quarter(&mut x, 3, 7, 11, 15);
            quarter(&mut x, 0, 5, 10, 15);
            quarter(&mut x, 1, 6, 11, 12);
            quarter(&mut x, 2, 7, 8, 13);
            quarter(&mut x, 3, 4, 9, 14);
        }
        let words: [__m512i; BLOCK] = std::array::from_fn(|w| _mm512_add_epi32(x[w], input[w]));
        for (l, block) in transpose(words).iter().enumerate() {
            // SAFETY: block `l` is words `16 l..16 l + 16` of `out`.
            unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(l * BLOCK).cast(), *block) };
        }
    }

    /// ChaCha's quarter round on state words `a`, `b`, `c`, `d` of every block.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn quarter(x: &mut [__m512i; BLOCK], a: usize, b: usize, c: usize, d: usize) {
        let (mut va, mut vb, mut vc, mut vd) = (x[a], x[b], x[c], x[d]);
        va = _mm512_add_epi32(va, vb);
        vd = _mm512_rol_epi32::<16>(_mm512_xor_si512(vd, va));
        vc = _mm512_add_epi32(vc, vd);
        vb = _mm512_rol_epi32::<12>(_mm512_xor_si512(vb, vc));
        va = _mm512_add_epi32(va, vb);
        vd = _mm512_rol_epi32::<8>(_mm512_xor_si512(vd, va));
        vc = _mm512_add_epi32(vc, vd);
        vb = _mm512_rol_epi32::<7>(_mm512_xor_si512(vb, vc));
        (x[a], x[b], x[c], x[d]) = (va, vb, vc, vd);
    }

    /// Row `l` of the result is lane `l` of every row of `r`.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn transpose(r: [__m512i; 16]) -> [__m512i; 16] {
        // Pairs of rows interleaved by 32 bits, then by 64: in each 128-bit lane `k`, `u[4 g +
        // j]` holds lane `4 k + j` of rows `4 g..4 g + 4`.
        let t: [__m512i; 16] = std::array::from_fn(|i| {
            let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
            if i % 2 == 0 {
                _mm512_unpacklo_epi32(a, b)
            } else {
                _mm512_unpackhi_epi32(a, b)
            }
        });
        let u: [__m512i; 16] = std::array::from_fn(|i| {
            let (g, j) = (i / 4, i % 4);
            let (a, b) = (t[4 * g + j / 2], t[4 * g + 2 + j / 2]);
            if j % 2 == 0 {
                _mm512_unpacklo_epi64(a, b)
            } else {
                _mm512_unpackhi_epi64(a, b)
            }
        });
        // Then the 128-bit lanes: even lanes of rows-groups 0 and 1 (and 2 and 3), odd ones,
        // and the same again.
        let mut out = [_mm512_setzero_si512(); 16];
        for j in 0..4 {
            let even01 = _mm512_shuffle_i32x4::<0x88>(u[j], u[4 + j]);
            let odd01 = _mm512_shuffle_i32x4::<0xDD>(u[j], u[4 + j]);
            let even23 = _mm512_shuffle_i32x4::<0x88>(u[8 + j], u[12 + j]);
            let odd23 = _mm512_shuffle_i32x4::<0xDD>(u[8 + j], u[12 + j]);
            out[j] = _mm512_shuffle_i32x4::<0x88>(even01, even23);
            out[8 + j] = _mm512_shuffle_i32x4::<0xDD>(even01, even23);
            out[4 + j] = _mm512_shuffle_i32x4::<0x88>(odd01, odd23);
            out[12 + j] = _mm512_shuffle_i32x4::<0xDD>(odd01, odd23);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    use super::Stream;

    /// The words are `ChaCha8Rng`'s: from the start, from inside a block, across groups, on a
    /// stream other than 0, and where the block counter's low word wraps into the high one.
    #[test]
    fn words_are_chacha8rngs() {
        for (seed, stream, pos, n) in [
            (1, 0, 0, 16),
            (2, 0, 5, 1000),
            (3, 7, 250, 600),
            (4, 0, (u32::MAX as u128) * 16 - 40, 700),
        ] {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(stream);
            rng.set_word_pos(pos);
            let mut want = vec![0u32; n];
            rng.fill(&mut want[..]);
            let Some(words) = Stream::of(&rng) else {
                eprintln!("skipped: AVX-512 is not in use on this CPU");
                return;
            };
            let mut got = Vec::with_capacity(n);
            words.each(pos, n, |w| got.extend_from_slice(w));
            assert!(got == want, "seed {seed} stream {stream} from word {pos}");
        }
    }
}
