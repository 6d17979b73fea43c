//! Test-set SC metrics (spec §5.1): one prediction per subject from visit 0 with clean inputs —
//! a forecast of visit 1 over Δt_01 when the subject has ≥ 2 visits, else the reconstruction of
//! visit 0 — scored with [`sc_metrics`] and averaged over subjects; next to it the identity
//! baseline (visit 0 predicts visit 1).

use burn::prelude::*;
use burn::tensor::TensorData;
use ndarray::Array2;
use serde::Serialize;

use super::batch::delta_t;
use super::fold_data::FoldData;
use crate::data::connectome::par_map;
use crate::metrics::sc::{ScMetrics, sc_metrics};
use crate::models::clg_ode::ClgOde;

/// Predicted A_pred (N×N) of every subject in `subjects`, in order, `chunk` subjects at a time.
pub fn predict_visit1<B: Backend>(
    model: &ClgOde<B>,
    data: &FoldData,
    subjects: &[usize],
    chunk: usize,
    device: &B::Device,
) -> Vec<Array2<f32>> {
    let n = data.n_nodes();
    let f = data.cohort.n_metrics();
    let nc = data.numeric_dim();
    let mut out = Vec::with_capacity(subjects.len());
    for part in subjects.chunks(chunk.max(1)) {
        let b = part.len();
        let (mut a, mut x, mut sex, mut site, mut num) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut src, mut dts) = (Vec::new(), Vec::new());
        for (r, &sub) in part.iter().enumerate() {
            let scans = data.scans(sub);
            a.extend_from_slice(scans[0].a_log.as_slice().expect("standard layout"));
            x.extend_from_slice(data.x[sub][0].as_slice().expect("standard layout"));
            let subject = &data.cohort.subjects[sub];
            sex.push(subject.sex as i64);
            site.push(subject.site as i64);
            num.extend_from_slice(&data.numeric[sub][0]);
            if scans.len() >= 2 {
                src.push(r as i64);
                dts.push(delta_t(scans, 0, 1) as f32);
            }
        }
        let enc = model.encode(
            Tensor::from_data(TensorData::new(a, [b, n, n]), device),
            Tensor::from_data(TensorData::new(x, [b, n, f]), device),
        );
        let mut z = enc.z0();
        if !src.is_empty() {
            // Rows of cat([z0, z1]): the forecast for subjects with a visit 1, else z0.
            let mut pick: Vec<i64> = (0..b as i64).collect();
            for (q, &r) in src.iter().enumerate() {
                pick[r as usize] = (b + q) as i64;
            }
            let ns = src.len();
            let src = Tensor::<B, 1, Int>::from_data(TensorData::new(src, [ns]), device);
            let cov = model.covariates(
                Tensor::from_data(TensorData::new(sex, [b]), device),
                Tensor::from_data(TensorData::new(site, [b]), device),
                Tensor::from_data(TensorData::new(num, [b, nc]), device),
            );
            let z1 = model.integrate(
                z.clone().select(0, src.clone()),
                cov.select(0, src),
                Tensor::from_data(TensorData::new(dts, [ns]), device),
            );
            z = Tensor::cat(vec![z, z1], 0)
                .select(0, Tensor::from_data(TensorData::new(pick, [b]), device));
        }
        let pred: Vec<f32> = model
            .decode(z)
            .conn
            .a_pred
            .into_data()
            .convert::<f32>()
            .to_vec()
            .expect("f32");
        for r in 0..b {
            out.push(
                Array2::from_shape_vec((n, n), pred[r * n * n..(r + 1) * n * n].to_vec())
                    .expect("n×n"),
            );
        }
    }
    out
}

/// Test metrics of the model and of the identity baseline, over all test subjects and over the
/// subjects with a visit 1 (forecasts only).
#[derive(Debug, Clone, Serialize)]
pub struct TestMetrics {
    pub protocol: &'static str,
    pub n_subjects: usize,
    pub model: ScMetrics,
    pub identity_baseline: ScMetrics,
    pub forecast_only: ForecastOnly,
}

#[derive(Debug, Clone, Serialize)]
pub struct ForecastOnly {
    pub n_subjects: usize,
    pub model: ScMetrics,
    pub identity_baseline: ScMetrics,
}

/// Scores `preds` (one per subject of `subjects`, from [`predict_visit1`]).
pub fn test_metrics(
    data: &FoldData,
    subjects: &[usize],
    preds: &[Array2<f32>],
    topo_bins: usize,
) -> TestMetrics {
    let items: Vec<(usize, &Array2<f32>)> = subjects.iter().copied().zip(preds).collect();
    let scored: Vec<(bool, ScMetrics, ScMetrics)> = par_map(&items, |&(sub, pred)| {
        let scans = data.scans(sub);
        let a0 = &scans[0].a_raw;
        let truth = if scans.len() >= 2 {
            &scans[1].a_raw
        } else {
            a0
        };
        (
            scans.len() >= 2,
            sc_metrics(pred.view(), truth.view(), a0.view(), topo_bins),
            sc_metrics(a0.view(), truth.view(), a0.view(), topo_bins),
        )
    });
    let all_m: Vec<ScMetrics> = scored.iter().map(|s| s.1).collect();
    let all_b: Vec<ScMetrics> = scored.iter().map(|s| s.2).collect();
    let fo_m: Vec<ScMetrics> = scored.iter().filter(|s| s.0).map(|s| s.1).collect();
    let fo_b: Vec<ScMetrics> = scored.iter().filter(|s| s.0).map(|s| s.2).collect();
    TestMetrics {
        protocol: "one prediction per test subject from visit 0 (clean inputs, z0 = mu): \
                   forecast of visit 1 over dt_01 when the subject has >= 2 visits, else \
                   reconstruction of visit 0; metrics averaged over subjects. \
                   identity_baseline predicts visit 1 by visit 0's A_raw.",
        n_subjects: subjects.len(),
        model: ScMetrics::mean(&all_m),
        identity_baseline: ScMetrics::mean(&all_b),
        forecast_only: ForecastOnly {
            n_subjects: fo_m.len(),
            model: ScMetrics::mean(&fo_m),
            identity_baseline: ScMetrics::mean(&fo_b),
        },
    }
}
