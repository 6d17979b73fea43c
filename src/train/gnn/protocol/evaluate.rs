//! Test-set SC metrics (docs/clg-ode-model.md §5.1): one prediction per subject from visit 0 with clean inputs —
//! a forecast of visit 1 over Δt_01 when the subject has ≥ 2 visits, else the reconstruction of
//! visit 0 — scored with [`sc_metrics`](crate::metrics::sc_metrics) and averaged over subjects;
//! next to it the identity baseline (visit 0 predicts visit 1).

use anyhow::Result;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::super::batch::{Mode, Sampling, build, forecasts_at};
use super::super::metric::GnnMetric;
use super::super::settings::GnnSettings;
use super::super::step::{Valid, eval_loss};
use super::super::versus::Versus;
use super::breakdown::{Predictions, SubjectScore, per_subject};
use super::columns::val_sc_columns;
use super::fold_data::FoldData;
use crate::data::connectome::par_map;
use crate::engine::{EpochCtx, JobMetric, Row};
use crate::metrics::Skill;
use crate::metrics::sc::ScMetrics;
use crate::metrics::topology::ExactTopology;
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::objective::predict::decode;
use crate::models::clg_ode::objective::{Objective, Stat, innovation};

/// Predicted A_pred (N×N) of every subject in `subjects`, in order, `chunk` subjects at a time:
/// the forecast of visit 1 from visit 0 when there is one, else the reconstruction of visit 0;
/// decoded as in training at epoch `epoch` (evaluation uses `max_epochs`); with the innovation
/// module, each forecast's new-edge scores (q of the kept candidates against the true new
/// edges, as the reference's `_evaluate_sc_metrics`).
#[allow(clippy::too_many_arguments)]
pub fn predict_visit1<B: Backend>(
    model: &ClgOde<B>,
    obj: &Objective,
    data: &FoldData,
    sampling: &Sampling,
    subjects: &[usize],
    chunk: usize,
    epoch: usize,
    device: &B::Device,
) -> Predictions {
    predict_with(model, obj, subjects, chunk, epoch, device, |part, _| {
        build::<ChaCha8Rng>(data, part, Mode::Forecast, epoch, &obj.cfg, sampling)
    })
}

/// The forecast of every subject of `subjects` from its visit 0 over `dts[i]` years (any
/// Δt ≥ 0; `targets[i]`: the visit it is scored against, if any), decoded at `epoch`.
#[allow(clippy::too_many_arguments)]
pub fn predict_at<B: Backend>(
    model: &ClgOde<B>,
    obj: &Objective,
    data: &FoldData,
    sampling: &Sampling,
    subjects: &[usize],
    dts: &[f64],
    targets: &[Option<usize>],
    epoch: usize,
    device: &B::Device,
) -> Predictions {
    predict_with(model, obj, subjects, 8, epoch, device, |part, at| {
        let range = at..at + part.len();
        forecasts_at(
            data,
            part,
            &dts[range.clone()],
            &targets[range],
            &obj.cfg,
            sampling,
        )
    })
}

/// Decodes the batches `input(part, offset)` builds for `subjects`, `chunk` at a time, and keeps
/// each subject's forecast (else its reconstruction) with its new-edge scores.
fn predict_with<B: Backend>(
    model: &ClgOde<B>,
    obj: &Objective,
    subjects: &[usize],
    chunk: usize,
    epoch: usize,
    device: &B::Device,
    input: impl Fn(&[usize], usize) -> crate::models::clg_ode::objective::ObjectiveInput,
) -> Predictions {
    let mut out = Predictions::default();
    for (c, part) in subjects.chunks(chunk.max(1)).enumerate() {
        let x = input(part, c * chunk.max(1));
        let nn = x.n * x.n;
        let n = x.n;
        let d = decode(obj, model, &x, epoch, device);
        let pred: Vec<f32> = crate::host_reads::data(d.a_pred)
            .convert::<f32>()
            .to_vec()
            .expect("f32");
        let l_new: Vec<f32> = if d.plans.iter().any(Option::is_some) {
            crate::host_reads::data(d.conn.l_new)
                .convert::<f32>()
                .to_vec()
                .expect("f32")
        } else {
            Vec::new()
        };
        for b in 0..part.len() {
            // The forecast of subject b if it has one, else its reconstruction (row b).
            let row = x
                .preds
                .iter()
                .position(|p| p.b == b && p.forecast)
                .unwrap_or(b);
            out.matrices.push(
                Array2::from_shape_vec((n, n), pred[row * nn..(row + 1) * nn].to_vec())
                    .expect("n×n"),
            );
            let cfg = &obj.cfg.innovation;
            out.new_edges.push(d.plans[row].as_ref().and_then(|plan| {
                let q = innovation::q_host(plan, &l_new[row * nn..(row + 1) * nn], cfg);
                innovation::new_edge_metrics(plan, &q, x.target(row), cfg.k_new)
            }));
        }
    }
    out
}

/// What a validation pass reports.
pub struct Validation {
    pub val_loss: f64,
    /// `val_loss`.
    pub head: Row,
    /// The `val_*` columns.
    pub detail: Row,
    /// The log line's part.
    pub summary: String,
}

/// One validation pass over `val`: the loss terms and, when `sc_due`, the SC metrics of the
/// forecasts beside the identity's and the skill.
pub fn validate<B: AutodiffBackend>(
    model: &Valid<B>,
    obj: &Objective,
    data: &FoldData,
    val: &[usize],
    args: &GnnSettings,
    sc_due: bool,
    ctx: &EpochCtx<'_, B>,
) -> Result<Validation> {
    let sampling = &args.sampling;
    let (stats, val_loss) = eval_loss(
        model,
        obj,
        data,
        sampling,
        val,
        args.batch_size,
        ctx.epoch,
        ctx.device,
        ctx.comm,
    )?;
    let mut head = Row::new();
    head.insert(
        GnnMetric::ValLoss.name().into(),
        serde_json::json!(val_loss),
    );
    let mut detail = Row::new();
    stats.columns("val", &mut detail);
    let mut summary = format!("val loss {val_loss:.4}");
    let sc = sc_due.then(|| {
        let preds = predict_visit1(
            model,
            obj,
            data,
            sampling,
            val,
            8,
            args.max_epochs,
            ctx.device,
        );
        let v = versus_identity(data, val, &preds, args.topo_bins);
        summary.push_str(&format!(
            ", val sc_log_mse {:.4} (identity {:.4}, skill {:+.3})",
            v.model.sc_log_mse, v.identity.sc_log_mse, v.skill.skill
        ));
        v
    });
    val_sc_columns(
        sc.as_ref(),
        stats.mean(Stat::Density),
        args.early_stop_density_weight,
        &mut detail,
    );
    Ok(Validation {
        val_loss,
        head,
        detail,
        summary,
    })
}

/// Scores `preds` (one per subject of `subjects`) and the identity forecast (visit 0 for visit
/// 1), averaged over subjects.
pub fn versus_identity(
    data: &FoldData,
    subjects: &[usize],
    preds: &Predictions,
    topo_bins: usize,
) -> Versus {
    let t = test_metrics(data, subjects, preds, topo_bins);
    Versus {
        n_subjects: subjects.len(),
        skill: Skill::of(&t.model, &t.identity_baseline),
        model: t.model,
        identity: t.identity_baseline,
    }
}

/// Test metrics of the model and of the identity baseline, over all test subjects and over the
/// subjects with a visit 1 (forecasts only).
#[derive(Debug, Clone, Serialize)]
pub struct TestMetrics {
    pub protocol: &'static str,
    pub n_subjects: usize,
    pub model: ScMetrics,
    pub identity_baseline: ScMetrics,
    /// The model against the identity baseline.
    pub skill: Skill,
    pub forecast_only: ForecastOnly,
}

#[derive(Debug, Clone, Serialize)]
pub struct ForecastOnly {
    pub n_subjects: usize,
    pub model: ScMetrics,
    pub identity_baseline: ScMetrics,
    pub skill: Skill,
}

/// Subject `sub`'s visit 0 (the identity forecast) and what a prediction is scored against:
/// visit 1 when there is one (`true`: a forecast), else visit 0 (a reconstruction).
fn start_and_truth(data: &FoldData, sub: usize) -> (&Array2<f32>, &Array2<f32>, bool) {
    let scans = data.scans(sub);
    let a0 = &scans[0].a_raw;
    match scans.get(1) {
        Some(s) => (a0, &s.a_raw, true),
        None => (a0, a0, false),
    }
}

/// Scores `preds` (one per subject of `subjects`, from [`predict_visit1`]).
pub fn test_metrics(
    data: &FoldData,
    subjects: &[usize],
    preds: &Predictions,
    topo_bins: usize,
) -> TestMetrics {
    TestMetrics::of(&per_subject(data, subjects, preds, topo_bins))
}

impl TestMetrics {
    /// The averages of per-subject scores.
    pub fn of(rows: &[SubjectScore]) -> TestMetrics {
        let scored: Vec<(bool, ScMetrics, ScMetrics)> = rows
            .iter()
            .map(|r| (r.forecast, r.model, r.identity))
            .collect();
        let subjects = rows;
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
            skill: Skill::of(&ScMetrics::mean(&all_m), &ScMetrics::mean(&all_b)),
            forecast_only: ForecastOnly {
                n_subjects: fo_m.len(),
                model: ScMetrics::mean(&fo_m),
                identity_baseline: ScMetrics::mean(&fo_b),
                skill: Skill::of(&ScMetrics::mean(&fo_m), &ScMetrics::mean(&fo_b)),
            },
        }
    }
}

/// Exact topology (Betti curves at `bins` thresholds, degree and strength correlations) of the
/// model's predictions and of the identity forecast, averaged over subjects.
#[derive(Debug, Clone, Serialize)]
pub struct ExactVersus {
    pub thresholds: usize,
    pub model: ExactTopology,
    pub identity_baseline: ExactTopology,
}

/// See [`ExactVersus`]; the truth is visit 1 when there is one, else visit 0 (as in
/// [`test_metrics`]).
pub fn exact_topology(
    data: &FoldData,
    subjects: &[usize],
    preds: &[Array2<f32>],
    bins: usize,
) -> ExactVersus {
    let items: Vec<(usize, &Array2<f32>)> = subjects.iter().copied().zip(preds).collect();
    let scored: Vec<(ExactTopology, ExactTopology)> = par_map(&items, |&(sub, pred)| {
        let (a0, truth, _) = start_and_truth(data, sub);
        (
            ExactTopology::of(pred.view(), truth.view(), bins),
            ExactTopology::of(a0.view(), truth.view(), bins),
        )
    });
    let (m, b): (Vec<_>, Vec<_>) = scored.into_iter().unzip();
    ExactVersus {
        thresholds: bins,
        model: ExactTopology::mean(&m),
        identity_baseline: ExactTopology::mean(&b),
    }
}
