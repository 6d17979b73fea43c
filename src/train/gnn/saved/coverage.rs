//! What a run's fold saw in training: the longest Δt from visit 0 and the range of scan ages of
//! its training subjects. A forecast beyond them extrapolates (`predict` refuses it without
//! `--extrapolate`; `plot-sc --trajectories` stops its lines there).

use anyhow::{Result, bail};

use super::super::protocol::fold_data::delta_t;
use super::super::protocol::saved_run::SavedRun;

/// What the fold's training subjects cover: their longest Δt from visit 0, and the range of
/// their scan ages.
pub(super) struct Coverage {
    pub dt_max: f64,
    pub age_min: f64,
    pub age_max: f64,
}

impl Coverage {
    /// The coverage of the run's fold.
    pub(super) fn of(run: &SavedRun) -> Self {
        let train = run
            .prep
            .folds
            .iter()
            .find(|f| f.fold == run.fold)
            .map_or_else(Vec::new, |f| f.train.clone());
        let mut c = Coverage {
            dt_max: 0.0,
            age_min: f64::INFINITY,
            age_max: f64::NEG_INFINITY,
        };
        for &s in &train {
            let scans = run.data.scans(s);
            for (v, scan) in scans.iter().enumerate() {
                c.age_min = c.age_min.min(scan.age);
                c.age_max = c.age_max.max(scan.age);
                if v > 0 {
                    c.dt_max = c.dt_max.max(delta_t(scans, 0, v));
                }
            }
        }
        c
    }

    /// Refuses `dt` (years after a start at `age0`) beyond the coverage, unless extrapolating.
    pub(super) fn check(&self, dt: f64, age0: f64, extrapolate: bool, who: &str) -> Result<()> {
        let target = age0 + dt;
        if extrapolate || self.covers(dt, age0) {
            return Ok(());
        }
        bail!(
            "{who}: Δt {dt} y to age {target} is outside what the fold's training subjects cover \
             (Δt up to {:.2} y, ages {:.2}–{:.2}); pass --extrapolate to predict there anyway",
            self.dt_max,
            self.age_min,
            self.age_max
        )
    }

    /// Whether `dt` years after a start at `age0` is within the coverage.
    pub(super) fn covers(&self, dt: f64, age0: f64) -> bool {
        let target = age0 + dt;
        dt <= self.dt_max + 1e-9 && target >= self.age_min - 1e-9 && target <= self.age_max + 1e-9
    }
}
