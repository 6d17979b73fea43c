//! CLG-ODE's forecasts and validation: the predictions of visit 1 (or of any Δt ahead) from
//! visit 0 with clean inputs, decoded as in training, and one validation pass (the loss terms,
//! and the SC metrics of the forecasts beside the identity's).

use anyhow::Result;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;
use rand_chacha::ChaCha8Rng;

use super::super::metric::GnnMetric;
use super::super::protocol::breakdown::Predictions;
use super::super::protocol::columns::val_sc_columns;
use super::super::protocol::evaluate::versus_identity;
use super::super::protocol::fold_data::FoldData;
use super::super::settings::{GnnSettings, Sampling};
use super::batch::{Mode, build, forecasts_at};
use super::step::{Valid, eval_loss};
use crate::engine::{EpochCtx, JobMetric, Row};
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::objective::predict::decode;
use crate::models::clg_ode::objective::{Objective, Stat, innovation};

/// Predicted A_pred (N×N) of every subject in `subjects`, in order, `chunk` subjects at a time:
/// the forecast of visit 1 from visit 0 when there is one, else the reconstruction of visit 0;
/// decoded as in training at epoch `epoch` (evaluation uses `max_epochs`); with the innovation
/// module, each forecast's new-edge scores (q of the kept candidates against the true new
/// edges, as the reference's `_evaluate_sc_metrics`).
#[allow(clippy::too_many_arguments)]
pub(super) fn predict_visit1<B: Backend>(
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
pub(super) fn predict_at<B: Backend>(
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
pub(super) struct Validation {
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
pub(super) fn validate<B: AutodiffBackend>(
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
        args.batch(),
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
