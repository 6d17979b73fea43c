//! Dropout masks for the fast path: Bernoulli draws from a ChaCha8 stream of its own, about
//! thirty times faster than Burn's per-value sampler (which Flex uses, and `Kernels::Plain`
//! still does). Seeded by `FastCpu::seed`, so a seeded run draws the same masks every time;
//! an unseeded process starts from entropy, as Flex does. A large mask is drawn in chunks on
//! the rayon pool, each chunk from its own position in the one stream, so the values are those
//! of a single sequential draw whatever the thread count.

use std::sync::Mutex;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::kernels::written_in;

static RNG: Mutex<Option<ChaCha8Rng>> = Mutex::new(None);

/// Restarts the stream from `seed`.
pub(super) fn seed(seed: u64) {
    *RNG.lock().unwrap_or_else(|e| e.into_inner()) = Some(ChaCha8Rng::seed_from_u64(seed));
}

/// `n` values, each 1 with probability `p` and 0 otherwise.
pub(super) fn bernoulli(n: usize, p: f64) -> Vec<f32> {
    let mut guard = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let rng = guard.get_or_insert_with(|| ChaCha8Rng::from_rng(&mut rand::rng()));
    draw(rng, n, p)
}

/// Values per rayon task.
const CHUNK: usize = 1 << 14;

/// Words converted per buffer fill.
const WORDS: usize = 256;

/// `n` Bernoulli(`p`) values from the next `n` 32-bit words of `rng`'s stream, which then
/// stands after them: value `i` is 1 when word `i` is below `p · 2³²` (probability `p`, to
/// 2⁻³²).
pub(super) fn draw(rng: &mut ChaCha8Rng, n: usize, p: f64) -> Vec<f32> {
    let threshold = (p.clamp(0.0, 1.0) * 4_294_967_296.0) as u64;
    let base = rng.get_word_pos();
    let at_base = rng.clone();
    // SAFETY: each chunk's loop writes every value of it (its blocks cover it, and each block
    // is zipped with as many words).
    let out = unsafe {
        written_in(n, CHUNK, |start, chunk| {
            let mut rng = at_base.clone();
            rng.set_word_pos(base + start as u128);
            let mut words = [0u32; WORDS];
            for block in chunk.chunks_mut(WORDS) {
                let words = &mut words[..block.len()];
                rng.fill(&mut words[..]);
                for (v, u) in block.iter_mut().zip(words.iter()) {
                    v.write(if u64::from(*u) < threshold { 1.0 } else { 0.0 });
                }
            }
        })
    };
    rng.set_word_pos(base + n as u128);
    out
}
