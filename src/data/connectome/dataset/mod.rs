//! The assembled cohort (docs/clg-ode-model.md §1): per subject its ordered scans with SC, morphology, age and
//! covariates, plus the per-fold normalisation statistics (§1.4).
//!
//! One concern per file: the types here, `load` (reading the three inputs into a
//! [`Cohort`]), `report` (the [`LoadReport`] of what was dropped or patched) and `norm`
//! (the per-fold [`NormStats`]).

mod load;
mod norm;
mod report;

use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2, ArrayView1};
use serde::{Deserialize, Serialize};

use super::morph::DEFAULT_METRICS;
use super::{ConnectomeError, Result, SymMatrix};

pub(crate) use load::load_cohort;
pub(crate) use norm::{NormStats, NormalizedScan};
pub(crate) use report::LoadReport;

/// The three inputs of a cohort (`--sc_dir`, `--morph_root`, `--subject_info_csv`). Without a
/// subject table, ages are the visit indices and sex/site unknown (the reference's baselines
/// read none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CohortPaths {
    pub sc_dir: PathBuf,
    pub morph_root: PathBuf,
    pub subject_info_csv: Option<PathBuf>,
}

impl CohortPaths {
    /// The layout written by [`super::write_synthetic_cohort`]: `<root>/sc`, `<root>/morph`,
    /// `<root>/subject_info_sc.csv`.
    pub(crate) fn under(root: &Path) -> Self {
        Self {
            sc_dir: root.join("sc"),
            morph_root: root.join("morph"),
            subject_info_csv: Some(root.join("subject_info_sc.csv")),
        }
    }
}

/// Loader settings (reference defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct LoadOptions {
    /// ECC bins of the covariate (32).
    pub topo_bins: usize,
    /// Drop SC scans without a morphology file (true). When false they get all-zero morphology.
    pub require_morph: bool,
    /// Morphology metrics, in order (Thickness, Area, Curv, GWC).
    pub metrics: Vec<String>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            topo_bins: 32,
            require_morph: true,
            metrics: DEFAULT_METRICS.iter().map(|m| m.to_string()).collect(),
        }
    }
}

/// One scan (visit) of a subject, preprocessed. Holds its symmetric N×N f32 matrix once, as the
/// upper triangle (0.32 MB at N = 400, [`SymMatrix`]); its log1p is computed where it is used
/// ([`Scan::a_log`], [`Scan::log_into`]).
#[derive(Debug, Clone)]
pub(crate) struct Scan {
    pub scan_id: String,
    pub session: String,
    pub sc_path: PathBuf,
    #[allow(dead_code)] // loaded with the scan; nothing reads it yet
    pub morph_path: Option<PathBuf>,
    /// Symmetrised SC with zero diagonal, N×N.
    pub a_raw: SymMatrix,
    /// Morphology, N×F, un-normalised (row r = r-th ROI in lexicographic order).
    pub x: Array2<f32>,
    /// Years (table value), or the visit index when the table has none (see `age_from_table`).
    pub age: f64,
    pub age_from_table: bool,
    /// ICV/TIV from the table, NaN if absent.
    #[allow(dead_code)] // loaded with the scan; nothing reads it yet
    pub icv: f64,
    pub s: f64,
    pub s_mean: f64,
    /// ECC of `log1p(a_raw)` with `topo_bins` bins (raw, not z-scored).
    pub ecc: Array1<f64>,
}

impl Scan {
    /// `log1p(a_raw)`, the model input and regression domain.
    #[cfg(test)]
    pub(crate) fn a_log(&self) -> Array2<f32> {
        self.a_raw.dense().mapv(f32::ln_1p)
    }

    /// Appends `log1p(a_raw)`, row-major, to `out`.
    pub(crate) fn log_into(&self, out: &mut Vec<f32>) {
        self.a_raw.log_into(out);
    }

    /// The model's numeric covariates for this visit: `[age, s, s_mean?, z-scored ECC…]`
    /// (35 values by default; `s_mean` left out with `include_s_mean = false`).
    pub(crate) fn numeric_covariates(
        &self,
        z_ecc: ArrayView1<f32>,
        include_s_mean: bool,
    ) -> Vec<f32> {
        let mut v = vec![self.age as f32, self.s as f32];
        if include_s_mean {
            v.push(self.s_mean as f32);
        }
        v.extend(z_ecc.iter().copied());
        v
    }
}

/// A subject and its ordered scans (at least one).
#[derive(Debug, Clone)]
pub(crate) struct Subject {
    pub id: String,
    /// First non-zero sex id along the scans (0 unknown, 1 male, 2 female).
    pub sex: usize,
    /// First non-zero site id along the scans (0 unknown, else 1..=K).
    pub site: usize,
    pub scans: Vec<Scan>,
}

/// A loaded cohort: subjects sorted by id, the shared node count and vocabularies.
#[derive(Debug, Clone)]
pub(crate) struct Cohort {
    pub subjects: Vec<Subject>,
    /// N, the node count of the first loaded SC file (every file must match).
    pub n_nodes: usize,
    /// Morphology ROI names of rows 0..N (lexicographic order, reference quirk).
    pub rois: Vec<String>,
    /// Morphology metrics present, F = `metrics.len()`.
    pub metrics: Vec<String>,
    pub topo_bins: usize,
    /// 3.
    pub sex_vocab: usize,
    /// K + 1, K = distinct sites of the whole subject table.
    pub site_vocab: usize,
    /// Site names; id i+1 ↔ `sites[i]`.
    pub sites: Vec<String>,
}

impl Cohort {
    /// F, the number of morphology metrics.
    pub(crate) fn n_metrics(&self) -> usize {
        self.metrics.len()
    }

    pub(crate) fn n_scans(&self) -> usize {
        self.subjects.iter().map(|s| s.scans.len()).sum()
    }

    /// `[subject]` the index of its first scan among all the cohort's, subjects in order (the
    /// scan indices of a cohort held on a device).
    pub(crate) fn scan_offsets(&self) -> Vec<usize> {
        self.subjects
            .iter()
            .scan(0, |next, s| {
                let first = *next;
                *next += s.scans.len();
                Some(first)
            })
            .collect()
    }

    /// Normalisation statistics from all scans of the given subjects (a fold's training
    /// subjects; indices into `subjects`). Error if the list is empty or out of range.
    pub(crate) fn norm_stats(&self, train_subjects: &[usize]) -> Result<NormStats> {
        if let Some(&bad) = train_subjects.iter().find(|&&i| i >= self.subjects.len()) {
            return Err(ConnectomeError::Split(format!(
                "subject index {bad} out of range ({} subjects)",
                self.subjects.len()
            )));
        }
        NormStats::from_scans(
            train_subjects
                .iter()
                .flat_map(|&i| self.subjects[i].scans.iter()),
            self.n_nodes,
            self.n_metrics(),
            self.topo_bins,
        )
    }

    /// z-scored morphology and ECC of every scan, indexed `[subject][scan]`.
    pub(crate) fn normalized(&self, stats: &NormStats) -> Vec<Vec<NormalizedScan>> {
        self.subjects
            .iter()
            .map(|subject| {
                subject
                    .scans
                    .iter()
                    .map(|scan| NormalizedScan {
                        x: stats.normalize_x(scan.x.view()),
                        ecc: stats.normalize_ecc(scan.ecc.view()),
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
