//! A finished (or stopped) `train-gnn` run opened again ([`SavedRun`]: its settings, a
//! checkpoint and the data of that checkpoint's fold) and how far a forecast from it goes
//! ([`Horizon`]): what a model's [`forecast`](super::cv::Forecaster::forecast) reads.
//! `reopen.rs` opens one from a run directory.

use std::path::PathBuf;

use super::super::config::GnnConfig;
use super::super::prepared::Prepared;
use super::fold_data::FoldData;
use crate::toolbox::checkpoint::Checkpoint;

/// A run directory with one of its checkpoints and the data of that checkpoint's fold.
pub(crate) struct SavedRun {
    pub run_dir: PathBuf,
    pub config: GnnConfig,
    pub ck_path: PathBuf,
    pub ck: Checkpoint,
    pub fold: usize,
    pub prep: Prepared,
    pub data: FoldData,
    /// How the split of the data as loaded now differs from the split the run recorded in
    /// `run_meta.json` (another cohort, seed or subject set); empty when it is the same or the
    /// run recorded none.
    pub split_changes: Vec<String>,
}

impl SavedRun {
    /// Says loudly on stderr how the split differs from the run's, if it does.
    pub(crate) fn warn_split_changes(&self, command: &str) {
        for change in &self.split_changes {
            eprintln!(
                "[{command}] WARNING: the data as loaded now is split differently from the run \
                 ({}): {change}",
                self.run_dir.display()
            );
        }
    }

    /// The test subjects with a visit-1 forecast (two scans or more), in split order.
    pub(crate) fn forecast_test_subjects(&self) -> Vec<usize> {
        let cohort = &self.prep.cohort;
        self.prep
            .test
            .iter()
            .copied()
            .filter(|&t| cohort.subjects[t].scans.len() >= 2)
            .collect()
    }

    /// The cohort index of subject `id` (`--subject`).
    pub(crate) fn subject_index(&self, id: &str) -> anyhow::Result<usize> {
        self.prep
            .cohort
            .subjects
            .iter()
            .position(|x| x.id == id)
            .ok_or_else(|| anyhow::anyhow!("--subject {id}: not a subject of the cohort"))
    }
}

/// How far ahead a prediction goes.
pub(crate) enum Horizon<'a> {
    /// Visit 1 from visit 0 (the reconstruction of visit 0 for a one-scan subject): the test
    /// protocol.
    NextVisit,
    /// `dts[i]` years after visit 0 of `subjects[i]`; `targets[i]`: the visit at that Δt, if
    /// any (CLG-ODE's innovation plan scores against it).
    Years {
        dts: &'a [f64],
        targets: &'a [Option<usize>],
    },
}
