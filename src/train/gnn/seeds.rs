//! The seeds of a CLG-ODE run, all from `--seed`: a fold's (weight init, epoch order) and each
//! subject's generator (visit sampling and augmentation) per fold, epoch and position, so a
//! resumed run continues exactly.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::toolbox::seed::mix;

/// Seed of one fold: weight init and the subjects' generators.
pub(crate) fn fold_seed(seed: u64, fold: usize) -> u64 {
    mix(seed, 0xC1_0DE0 + fold as u64)
}

/// The generator of the subject at position `pos` of epoch `epoch`'s order.
pub(super) fn subject_rng(seed: u64, fold: usize, epoch: usize, pos: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(mix(
        fold_seed(seed, fold),
        ((epoch as u64) << 32) | pos as u64,
    ))
}
