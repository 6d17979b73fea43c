//! The training scans as the fit reads them, without a copy: each pass of the fit computes a
//! scan's log weights and presence from the cohort's own f32 upper triangle into two reused
//! buffers, so the fit holds no second copy of the cohort (at 1,000 subjects × 400 nodes the
//! f64 logs of the training scans took 0.9 GB). The values are the same as a stored copy's,
//! bit for bit: the same `log1p` of the same numbers, read in the same order.

use rayon::prelude::*;

use super::{EbScan, pair_dt};

/// One training scan: its age (the visit index when unknown), sex id and upper triangle.
pub(super) struct Visit<'a> {
    pub age: f64,
    pub sex: usize,
    pub a: &'a [f32],
}

/// A scan's `log1p(max(a, 0))` and `a > 0` of every upper-triangle entry.
#[derive(Default)]
pub(super) struct Logs {
    pub y: Vec<f64>,
    pub z: Vec<bool>,
}

/// Entries per parallel piece of [`Logs::fill`] (a piece is a few microseconds of `log1p`).
const PIECE: usize = 8192;

impl Logs {
    /// The logs of upper triangle `a`.
    pub(super) fn of(a: &[f32]) -> Self {
        let mut l = Self::default();
        l.fill(a);
        l
    }

    /// Overwrites the buffers with the logs of upper triangle `a`.
    pub(super) fn fill(&mut self, a: &[f32]) {
        self.y.resize(a.len(), 0.0);
        self.z.resize(a.len(), false);
        self.y
            .par_chunks_mut(PIECE)
            .zip(self.z.par_chunks_mut(PIECE))
            .zip(a.par_chunks(PIECE))
            .for_each(|((y, z), a)| {
                for ((y, z), &v) in y.iter_mut().zip(z.iter_mut()).zip(a) {
                    *y = f64::from(v.max(0.0)).ln_1p();
                    *z = v > 0.0;
                }
            });
    }
}

/// Calls `f(visit, logs)` for every scan of every subject, in order.
pub(super) fn for_all(subjects: &[Vec<Visit>], mut f: impl FnMut(&Visit, &Logs)) {
    let mut logs = Logs::default();
    for v in subjects.iter().flatten() {
        logs.fill(v.a);
        f(v, &logs);
    }
}

/// Calls `f(v0, logs0, v1, logs1, Δt)` for every consecutive visit pair of every subject, in
/// order (Δt as [`pair_dt`] takes it); each scan's logs computed once per call.
pub(super) fn for_pairs(
    subjects: &[Vec<Visit>],
    mut f: impl FnMut(&Visit, &Logs, &Visit, &Logs, f64),
) {
    let (mut prev, mut next) = (Logs::default(), Logs::default());
    for s in subjects {
        if s.len() < 2 {
            continue;
        }
        prev.fill(s[0].a);
        for w in s.windows(2) {
            next.fill(w[1].a);
            f(&w[0], &prev, &w[1], &next, pair_dt(w[0].age, w[1].age, 1));
            std::mem::swap(&mut prev, &mut next);
        }
    }
}

/// The subjects' scans as the fit reads them (the visit index where the age is unknown).
pub(super) fn visits<'a>(subjects: &'a [Vec<EbScan<'a>>]) -> Vec<Vec<Visit<'a>>> {
    subjects
        .iter()
        .map(|s| {
            s.iter()
                .enumerate()
                .map(|(v, sc)| Visit {
                    age: if sc.age.is_finite() { sc.age } else { v as f64 },
                    sex: sc.sex,
                    a: sc.a_raw,
                })
                .collect()
        })
        .collect()
}

/// The mean age of the scans (0 without one).
pub(super) fn mean_age(scans: &[Vec<Visit<'_>>]) -> f64 {
    let n = scans.iter().flatten().count().max(1) as f64;
    scans.iter().flatten().map(|s| s.age).sum::<f64>() / n
}
