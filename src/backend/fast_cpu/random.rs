//! Dropout masks for the fast path: Bernoulli draws from a ChaCha8 stream of its own, about
//! thirty times faster than Burn's per-value sampler (which Flex uses, and `Kernels::Plain`
//! still does). Seeded by `FastCpu::seed`, so a seeded run draws the same masks every time;
//! an unseeded process starts from entropy, as Flex does.

use std::sync::Mutex;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

static RNG: Mutex<Option<ChaCha8Rng>> = Mutex::new(None);

/// Restarts the stream from `seed`.
pub(super) fn seed(seed: u64) {
    *RNG.lock().unwrap_or_else(|e| e.into_inner()) = Some(ChaCha8Rng::seed_from_u64(seed));
}

/// `n` values, each 1 with probability `p` and 0 otherwise.
pub(super) fn bernoulli(n: usize, p: f64) -> Vec<f32> {
    let mut guard = RNG.lock().unwrap_or_else(|e| e.into_inner());
    let rng = guard.get_or_insert_with(|| ChaCha8Rng::from_rng(&mut rand::rng()));
    // u < p · 2³² for a uniform 32-bit u has probability p (to 2⁻³²).
    let threshold = (p.clamp(0.0, 1.0) * 4_294_967_296.0) as u64;
    let mut words = vec![0u32; n];
    rng.fill(&mut words[..]);
    words
        .into_iter()
        .map(|u| if u64::from(u) < threshold { 1.0 } else { 0.0 })
        .collect()
}
