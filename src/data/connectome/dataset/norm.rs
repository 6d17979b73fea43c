//! Per-fold normalisation statistics and the z-scored inputs they give.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use serde::{Deserialize, Serialize};

use super::Scan;
use crate::data::connectome::{ConnectomeError, Result};

/// z-scored inputs of one scan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NormalizedScan {
    /// N×F.
    pub x: Array2<f32>,
    /// `topo_bins`.
    pub ecc: Array1<f32>,
}

/// Per-fold normalisation statistics (docs/clg-ode-model.md §1.4): per (ROI, metric) element of the morphology and
/// per ECC bin, mean = Σv/n and var = Σv²/n − mean² accumulated in f64, std = sqrt(max(var,
/// 1e-6)). Serialisable so that it can be saved next to a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct NormStats {
    pub n_nodes: usize,
    pub n_metrics: usize,
    /// Number of scans the statistics were computed from.
    pub n_scans: usize,
    /// Row-major N×F.
    pub x_mean: Vec<f64>,
    pub x_std: Vec<f64>,
    pub ecc_mean: Vec<f64>,
    pub ecc_std: Vec<f64>,
}

impl NormStats {
    /// Statistics over `scans`. Error if there is none.
    pub(crate) fn from_scans<'a>(
        scans: impl IntoIterator<Item = &'a Scan>,
        n_nodes: usize,
        n_metrics: usize,
        topo_bins: usize,
    ) -> Result<Self> {
        let nx = n_nodes * n_metrics;
        let (mut xs, mut xs2) = (vec![0.0f64; nx], vec![0.0f64; nx]);
        let (mut es, mut es2) = (vec![0.0f64; topo_bins], vec![0.0f64; topo_bins]);
        let mut n = 0usize;
        for scan in scans {
            for ((v, s1), s2) in scan.x.iter().zip(&mut xs).zip(&mut xs2) {
                let v = f64::from(*v);
                *s1 += v;
                *s2 += v * v;
            }
            for ((v, s1), s2) in scan.ecc.iter().zip(&mut es).zip(&mut es2) {
                *s1 += v;
                *s2 += v * v;
            }
            n += 1;
        }
        if n == 0 {
            return Err(ConnectomeError::Split(
                "normalisation statistics need at least one training scan".into(),
            ));
        }
        let finish = |s1: Vec<f64>, s2: Vec<f64>| -> (Vec<f64>, Vec<f64>) {
            s1.iter()
                .zip(&s2)
                .map(|(a, b)| {
                    let mean = a / n as f64;
                    let var = b / n as f64 - mean * mean;
                    (mean, var.max(1e-6).sqrt())
                })
                .unzip()
        };
        let (x_mean, x_std) = finish(xs, xs2);
        let (ecc_mean, ecc_std) = finish(es, es2);
        Ok(Self {
            n_nodes,
            n_metrics,
            n_scans: n,
            x_mean,
            x_std,
            ecc_mean,
            ecc_std,
        })
    }

    /// `(x − mean)/std` per element; `x` must be `n_nodes × n_metrics` (panics otherwise).
    pub(crate) fn normalize_x(&self, x: ArrayView2<f32>) -> Array2<f32> {
        let f = self.n_metrics;
        Array2::from_shape_fn(x.dim(), |(r, m)| {
            let k = r * f + m;
            ((f64::from(x[(r, m)]) - self.x_mean[k]) / self.x_std[k]) as f32
        })
    }

    /// `(ecc − mean)/std` per bin; `ecc` must have the statistics' bin count.
    pub(crate) fn normalize_ecc(&self, ecc: ArrayView1<f64>) -> Array1<f32> {
        Array1::from_shape_fn(ecc.len(), |q| {
            ((ecc[q] - self.ecc_mean[q]) / self.ecc_std[q]) as f32
        })
    }
}
