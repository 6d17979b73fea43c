//! Derived seeds and the epoch order: every random choice of a run is a function of the run's
//! seed and a position (epoch, step, subject), so a resumed run draws exactly what an
//! uninterrupted one would have drawn.

use rand::SeedableRng;
use rand::seq::SliceRandom;

/// A 64-bit mix of two numbers (SplitMix64 finaliser), for derived seeds.
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The shuffled order of `0..n` for epoch `epoch` (ChaCha8 seeded from `(seed, epoch)`).
pub(crate) fn epoch_order(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(seed, epoch));
    order.shuffle(&mut rng);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_permutations_that_differ_by_epoch_and_seed() {
        let a = epoch_order(50, 1, 0);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..50).collect::<Vec<_>>());
        assert_eq!(a, epoch_order(50, 1, 0));
        assert_ne!(a, epoch_order(50, 1, 1));
        assert_ne!(a, epoch_order(50, 2, 0));
        assert_ne!(mix(1, 2), mix(2, 1));
    }
}
