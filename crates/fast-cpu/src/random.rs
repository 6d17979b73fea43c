//! Dropout masks for the fast path: Bernoulli draws from a ChaCha8 stream of its own, about
//! thirty times faster than Burn's per-value sampler (which Flex uses, and `Kernels::Plain`
//! still does). Seeded by `FastCpu::seed`, so a seeded run draws the same masks every time;
//! an unseeded process starts from entropy, as Flex does. A large mask is drawn in chunks on
//! the rayon pool, each chunk from its own position in the one stream, so the values are those
//! of a single sequential draw whatever the thread count.

use std::sync::Mutex;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::chacha::Stream;
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

/// Words converted per buffer fill, where `rand_chacha` computes them.
const WORDS: usize = 256;

/// `n` Bernoulli(`p`) values from the next `n` 32-bit words of `rng`'s stream, which then
/// stands after them: value `i` is 1 when word `i` is below `p · 2³²` (probability `p`, to
/// 2⁻³²). With AVX-512 the words are computed by [`chacha`](super::chacha), sixteen blocks at
/// a time; otherwise by `rand_chacha`.
pub(super) fn draw(rng: &mut ChaCha8Rng, n: usize, p: f64) -> Vec<f32> {
    draw_with(rng, n, p, Stream::of(rng))
}

/// [`draw`], with the words from `stream` when given.
pub(super) fn draw_with(
    rng: &mut ChaCha8Rng,
    n: usize,
    p: f64,
    stream: Option<Stream>,
) -> Vec<f32> {
    let threshold = (p.clamp(0.0, 1.0) * 4_294_967_296.0) as u64;
    let base = rng.get_word_pos();
    let at_base = rng.clone();
    // SAFETY: each chunk's words cover it, one word per value, in order.
    let out = unsafe {
        written_in(n, CHUNK, |start, chunk| {
            let len = chunk.len();
            let mut values = chunk.iter_mut();
            let mut write = |words: &[u32]| {
                // Words first: `zip` takes from its first iterator before it finds the second
                // one empty.
                for (u, v) in words.iter().zip(values.by_ref()) {
                    v.write(if u64::from(*u) < threshold { 1.0 } else { 0.0 });
                }
            };
            match &stream {
                Some(stream) => stream.each(base + start as u128, len, write),
                None => {
                    let mut rng = at_base.clone();
                    rng.set_word_pos(base + start as u128);
                    let mut words = [0u32; WORDS];
                    for from in (0..len).step_by(WORDS) {
                        let words = &mut words[..WORDS.min(len - from)];
                        rng.fill(&mut words[..]);
                        write(words);
                    }
                }
            }
        })
    };
    rng.set_word_pos(base + n as u128);
    out
}
