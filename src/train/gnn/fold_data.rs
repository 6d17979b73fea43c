//! One fold's host data: the cohort with the fold's normalisation applied (z-scored
//! morphology and the numeric covariates of every scan).

use std::sync::Arc;

use ndarray::Array2;

use crate::data::connectome::{Cohort, NormStats, Scan};

/// Per-fold host data: the cohort, its z-scored inputs and the per-scan numeric covariates.
pub struct FoldData {
    pub cohort: Arc<Cohort>,
    /// `[subject][scan]` z-scored morphology, N×F.
    pub x: Vec<Vec<Array2<f32>>>,
    /// `[subject][scan]` numeric covariates (age, s, s_mean, z-ECC).
    pub numeric: Vec<Vec<Vec<f32>>>,
    /// Upper-triangle indicator, N×N row-major.
    pub upper: Vec<f32>,
}

impl FoldData {
    pub fn new(cohort: Arc<Cohort>, stats: &NormStats, include_s_mean: bool) -> Self {
        let norm = cohort.normalized(stats);
        let mut x = Vec::with_capacity(norm.len());
        let mut numeric = Vec::with_capacity(norm.len());
        for (subject, scans) in cohort.subjects.iter().zip(norm) {
            let mut xs = Vec::with_capacity(scans.len());
            let mut cs = Vec::with_capacity(scans.len());
            for (scan, ns) in subject.scans.iter().zip(scans) {
                cs.push(scan.numeric_covariates(ns.ecc.view(), include_s_mean));
                xs.push(ns.x);
            }
            x.push(xs);
            numeric.push(cs);
        }
        let n = cohort.n_nodes;
        let mut upper = vec![0.0f32; n * n];
        for i in 0..n {
            for j in i + 1..n {
                upper[i * n + j] = 1.0;
            }
        }
        Self {
            cohort,
            x,
            numeric,
            upper,
        }
    }

    pub fn n_nodes(&self) -> usize {
        self.cohort.n_nodes
    }

    pub fn scans(&self, subject: usize) -> &[Scan] {
        &self.cohort.subjects[subject].scans
    }

    /// The numeric-covariate width (35 by default).
    pub fn numeric_dim(&self) -> usize {
        self.numeric.iter().flatten().next().map_or(0, |v| v.len())
    }
}
