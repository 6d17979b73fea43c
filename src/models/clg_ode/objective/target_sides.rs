//! The topology loss's target side, kept from epoch to epoch. A target's thresholds and its
//! (β0, E) at each are a pure function of the target, the probes and three settings (heat time,
//! Taylor order, thresholds K), and the targets of a run are its cohort's clean scans, seen again
//! every epoch. Computing them is the Taylor series over N² per threshold in f64: about a
//! quarter of a default-objective step on the CPU. [`TargetSides`] computes each once.
//!
//! The key is an MD5 of everything the side depends on, so a hit is the same value, bit for
//! bit, as computing it again: results do not depend on whether, when or on which thread an
//! entry was made.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use md5::{Digest, Md5};

use super::config::TopologyConfig;
use super::topology;

/// A prediction's thresholds and its target's (β0, E) at each.
pub(crate) type TargetSide = (Vec<f64>, Vec<(f64, f64)>);

/// Entries at which the cache starts over (a run whose targets kept changing would otherwise
/// grow it without end; a cohort has far fewer scans).
const MAX_ENTRIES: usize = 100_000;

/// The target sides computed so far, shared by the threads of a step. A clone starts empty.
#[derive(Debug, Default)]
pub(crate) struct TargetSides {
    /// `None`: the target has no thresholds (no positive weight), so no topology loss.
    entries: Mutex<HashMap<[u8; 16], Option<Arc<TargetSide>>>>,
    computed: AtomicUsize,
}

impl Clone for TargetSides {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl TargetSides {
    /// The target side of `target_raw` (raw N×N, row-major) with `probes` (`[V, N]`), computed
    /// or found.
    pub(crate) fn side(
        &self,
        target_raw: &[f32],
        n: usize,
        probes: &[f64],
        cfg: &TopologyConfig,
    ) -> Option<Arc<TargetSide>> {
        let key = key(target_raw, n, probes, cfg);
        if let Some(found) = self.lock().get(&key) {
            return found.clone();
        }
        let side = compute(target_raw, n, probes, cfg).map(Arc::new);
        self.computed.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.lock();
        if entries.len() >= MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, side.clone());
        side
    }

    /// How many sides were computed rather than found (two threads asking for one new target
    /// at once may both compute it).
    #[cfg(test)]
    pub(crate) fn computed(&self) -> usize {
        self.computed.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 16], Option<Arc<TargetSide>>>> {
        // The map holds finished values only, so one left by a panicking thread is whole.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The target side, computed: thresholds of the target's log weights, then β0 and E at each.
pub(crate) fn compute(
    target_raw: &[f32],
    n: usize,
    probes: &[f64],
    cfg: &TopologyConfig,
) -> Option<TargetSide> {
    let log_target = topology::log_weights(target_raw);
    let taus = topology::log_thresholds(&log_target, n, cfg.loss_bins)?;
    let betti = topology::target_betti(&log_target, n, &taus, probes, cfg);
    Some((taus, betti))
}

/// MD5 of the target's bits, N, the probes' bits and the settings the side depends on.
fn key(target_raw: &[f32], n: usize, probes: &[f64], cfg: &TopologyConfig) -> [u8; 16] {
    let mut h = Md5::new();
    for setting in [n as u64, cfg.loss_bins as u64, cfg.taylor_order as u64] {
        h.update(setting.to_le_bytes());
    }
    h.update(cfg.t.to_bits().to_le_bytes());
    h.update((probes.len() as u64).to_le_bytes());
    let mut bytes = Vec::with_capacity(8 * 1024);
    for chunk in probes.chunks(1024) {
        bytes.clear();
        bytes.extend(chunk.iter().flat_map(|v| v.to_bits().to_le_bytes()));
        h.update(&bytes);
    }
    h.update((target_raw.len() as u64).to_le_bytes());
    for chunk in target_raw.chunks(2048) {
        bytes.clear();
        bytes.extend(chunk.iter().flat_map(|v| v.to_bits().to_le_bytes()));
        h.update(&bytes);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A symmetric random-ish target with zeros off its support.
    fn target(n: usize, salt: u32) -> Vec<f32> {
        let mut t = vec![0.0f32; n * n];
        for i in 0..n {
            for j in i + 1..n {
                let h =
                    (i as u32 * 7919 + j as u32 * 104_729 + salt * 31).wrapping_mul(2_654_435_761);
                if !h.is_multiple_of(5) {
                    let v = (h >> 8) as f32 / (1u32 << 24) as f32 * 9.0;
                    (t[i * n + j], t[j * n + i]) = (v, v);
                }
            }
        }
        t
    }

    #[test]
    fn found_sides_are_the_computed_ones_and_every_input_counts() {
        let n = 24;
        let cfg = TopologyConfig::default();
        let probes: Vec<f64> = topology::probes(5, cfg.probes, n)
            .iter()
            .map(|&v| v as f64)
            .collect();
        let (a, b) = (target(n, 1), target(n, 2));
        let cache = TargetSides::default();
        let first = cache.side(&a, n, &probes, &cfg).expect("a has weights");
        assert_eq!(*first, compute(&a, n, &probes, &cfg).unwrap());
        let again = cache.side(&a, n, &probes, &cfg).unwrap();
        assert!(Arc::ptr_eq(&first, &again), "the second ask must be a hit");
        assert_eq!(cache.computed(), 1);
        // Another target, other probes, another setting: each a new entry with its own value.
        let other = cache.side(&b, n, &probes, &cfg).unwrap();
        assert_ne!(*other, *first);
        let flipped: Vec<f64> = probes.iter().map(|v| -v).collect();
        let mut probes2 = probes.clone();
        probes2[..n].copy_from_slice(&flipped[..n]);
        cache.side(&a, n, &probes2, &cfg);
        let mut cfg2 = cfg.clone();
        cfg2.t = 5.0;
        let t5 = cache.side(&a, n, &probes, &cfg2).unwrap();
        assert_eq!(*t5, compute(&a, n, &probes, &cfg2).unwrap());
        assert_ne!(t5.1, first.1);
        assert_eq!(cache.computed(), 4);
        // No positive weight: no side, and that is kept too.
        let empty = vec![0.0f32; n * n];
        assert!(cache.side(&empty, n, &probes, &cfg).is_none());
        assert!(cache.side(&empty, n, &probes, &cfg).is_none());
        assert_eq!(cache.computed(), 5);
        // A clone starts empty.
        let fresh = cache.clone();
        fresh.side(&a, n, &probes, &cfg);
        assert_eq!(fresh.computed(), 1);
    }
}
