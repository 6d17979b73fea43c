//! Dropout masks for the fast path: Bernoulli draws from a ChaCha8 stream of its own, about
//! thirty times faster than Burn's per-value sampler (which Flex uses, and `Kernels::Plain`
//! still does). Seeded by `FastCpu::seed`, so a seeded run draws the same masks every time;
//! an unseeded process starts from entropy, as Flex does. A large mask is drawn in chunks on
//! the rayon pool, each chunk from its own position in the one stream, so the values are those
//! of a single sequential draw whatever the thread count. Dropout's rates draw one byte per
//! value instead of one word (see [`draw`]): the CNN's two masks took 0.40 ms of a training
//! step that way, 0.13 ms this way (2 cores).

use std::mem::MaybeUninit;
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

/// `n` Bernoulli(`p`) values from `rng`'s stream, which then stands after the words used.
/// When `p · 256` is a whole number (dropout's 0.25, 0.5, 0.75, …) value `i` is 1 when byte
/// `i` of the stream is below it, exactly probability `p`, a quarter of the stream and of the
/// time ([`by_bytes`]); otherwise value `i` is 1 when word `i` is below `p · 2³²` (probability
/// `p`, to 2⁻³²).
pub(super) fn draw(rng: &mut ChaCha8Rng, n: usize, p: f64) -> Vec<f32> {
    let p = p.clamp(0.0, 1.0);
    let per_byte = p * 256.0;
    if per_byte.fract() == 0.0 {
        return by_bytes(rng, n, per_byte as u16);
    }
    let threshold = (p * 4_294_967_296.0) as u64;
    chunked(rng, n, 1, |words, block| {
        for (v, u) in block.iter_mut().zip(words.iter()) {
            v.write(if u64::from(*u) < threshold { 1.0 } else { 0.0 });
        }
    })
}

/// `n` values, value `i` 1 when byte `i` of the stream (little-endian within its word) is
/// below `threshold`; the stream then stands after the `⌈n / 4⌉` words used.
fn by_bytes(rng: &mut ChaCha8Rng, n: usize, threshold: u16) -> Vec<f32> {
    chunked(rng, n, 4, |words, block| {
        for w in words.iter_mut() {
            *w = w.to_le();
        }
        // SAFETY: `u8` has no invalid values and an alignment of 1; the bytes are the words'
        // own, little-endian within each word after the line above.
        let bytes =
            unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), 4 * words.len()) };
        for (v, &b) in block.iter_mut().zip(bytes) {
            v.write(if u16::from(b) < threshold { 1.0 } else { 0.0 });
        }
    })
}

/// `n` values written by `convert(words, block)` from the stream's words, `per_word` values
/// per word (1 or 4: every chunk and block starts on a word), in chunks on the rayon pool,
/// each chunk from its own position in the stream: the values of one sequential draw
/// whatever the thread count. The stream then stands after the `⌈n / per_word⌉` words used.
fn chunked(
    rng: &mut ChaCha8Rng,
    n: usize,
    per_word: usize,
    convert: impl Fn(&mut [u32], &mut [MaybeUninit<f32>]) + Sync,
) -> Vec<f32> {
    let base = rng.get_word_pos();
    let at_base = rng.clone();
    // SAFETY: each chunk's loop writes every value of it: its blocks cover it, and `convert`
    // is given enough words for each.
    let out = unsafe {
        written_in(n, CHUNK, |start, chunk| {
            let mut rng = at_base.clone();
            rng.set_word_pos(base + (start / per_word) as u128);
            let mut words = [0u32; WORDS];
            for block in chunk.chunks_mut(WORDS * per_word) {
                let words = &mut words[..block.len().div_ceil(per_word)];
                rng.fill(&mut words[..]);
                convert(words, block);
            }
        })
    };
    rng.set_word_pos(base + n.div_ceil(per_word) as u128);
    out
}
