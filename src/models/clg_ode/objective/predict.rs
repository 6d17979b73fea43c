//! The model's part of a batch: every encoder call at once, every forecast in one RK4
//! integration, every prediction decoded at once, and the innovation module's plans on
//! forecasts. The terms are scored from it in `super::forward`.

use burn::prelude::*;

use super::Objective;
use super::innovation::{self, Plan};
use super::input::{ObjectiveInput, host, t3};
use super::resident::start_logs;
use super::staged::{Floats, Ints};
use crate::models::clg_ode::shared_ode::SharedOde;
use crate::models::clg_ode::{ClgOde, ConnOutput, Encoded, Start};

/// Whether the start visit of prediction `p` has a non-edge in the upper triangle.
fn has_pool(obj: &Objective, x: &ObjectiveInput, p: usize) -> bool {
    let (n, starts) = (x.n, start_logs(obj, x));
    let s = starts.row(p);
    (0..n).any(|i| (i + 1..n).any(|j| s[i * n + j] <= 0.0))
}

/// Whether the innovation module acts on prediction `p` at `epoch` (host-known).
fn innovates(obj: &Objective, x: &ObjectiveInput, p: usize, epoch: usize) -> bool {
    let pr = &x.preds[p];
    obj.innovation_on(epoch)
        && pr.forecast
        && innovation::gate(pr.t as f64, &obj.cfg.innovation) > 0.0
        && has_pool(obj, x, p)
}

/// How many forecasts of the batch the innovation module acts on.
pub(crate) fn innovation_plans_possible(
    obj: &Objective,
    x: &ObjectiveInput,
    epoch: usize,
) -> usize {
    (0..x.n_preds())
        .filter(|&p| innovates(obj, x, p, epoch))
        .count()
}

/// The latent part of a batch: every encoder row's encoding and z0, the start visits' z0, the
/// forecasts' end states.
pub(crate) struct Latent<B: Backend> {
    pub enc: Encoded<B>,
    pub z_all: Tensor<B, 3>,
    pub z_clean: Tensor<B, 3>,
    pub z_fore: Option<Tensor<B, 3>>,
}

/// The model's outputs for every prediction of a batch.
pub(crate) struct Decoded<B: Backend> {
    /// x̂ `[P,N,F]`.
    pub x_hat: Tensor<B, 3>,
    pub conn: ConnOutput<B>,
    /// The final prediction, after the innovation module `[P,N,N]`.
    pub a_pred: Tensor<B, 3>,
    /// The innovation plan of each prediction (forecasts it acts on).
    pub plans: Vec<Option<Plan>>,
}

/// The start visits' log SC of every prediction `[P,N,N]` (uploaded once a batch).
pub(crate) fn start_log<B: Backend>(x: &ObjectiveInput, device: &B::Device) -> Tensor<B, 3> {
    let (n, p) = (x.n, x.n_preds());
    x.floats(Floats::StartLog, [p, n, n], device)
}

/// Encodes, integrates and decodes every prediction of `x`, then applies the innovation module
/// (at `epoch`).
pub(crate) fn decode<B: Backend>(
    obj: &Objective,
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    epoch: usize,
    device: &B::Device,
) -> Decoded<B> {
    outputs(
        obj,
        model,
        x,
        &latent(model, x, device, None),
        epoch,
        device,
    )
}

/// Encodes every encoder row of `x` and integrates every forecast: what the latent terms (KL,
/// velocity, acceleration) read, without the decoders. With `shared`, the integration kept of
/// the same batch ([`ode_kept`]) is replayed where the backend shares it.
pub(crate) fn latent<B: Backend>(
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    device: &B::Device,
    shared: Option<&SharedOde>,
) -> Latent<B> {
    let (enc, z_all) = encoded(model, x, device);
    let z_clean = z_all.clone().narrow(0, 0, x.nb);
    let z_fore = ode_inputs(model, x, &z_clean, device)
        .map(|(z0, cov, dt)| model.integrate_shared(z0, cov, dt, shared));
    Latent {
        enc,
        z_all,
        z_clean,
        z_fore,
    }
}

/// The forecasts' integration of `x` run once with its stages kept, for the graphs of
/// `Autodiff<B>` to replay ([`crate::models::clg_ode::shared_ode`]): the same inputs as
/// [`latent`]'s (`None` without forecasts).
pub(crate) fn ode_kept<B: Backend>(
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    device: &B::Device,
) -> Option<SharedOde> {
    let (_, z_all) = encoded(model, x, device);
    let z_clean = z_all.narrow(0, 0, x.nb);
    let (z0, cov, dt) = ode_inputs(model, x, &z_clean, device)?;
    Some(model.integrate_kept(z0, cov, dt))
}

/// Every encoder row's encoding and z0.
fn encoded<B: Backend>(
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    device: &B::Device,
) -> (Encoded<B>, Tensor<B, 3>) {
    let (n, f, r) = (x.n, x.f, x.enc_rows);
    let enc = model.encode(
        x.floats(Floats::EncA, [r, n, n], device),
        x.floats(Floats::EncX, [r, n, f], device),
    );
    let z_all = enc.z0();
    (enc, z_all)
}

/// The forecasts' start states, covariates and intervals (`None` without forecasts).
fn ode_inputs<B: Backend>(
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    z_clean: &Tensor<B, 3>,
    device: &B::Device,
) -> Option<(Tensor<B, 3>, Tensor<B, 2>, Tensor<B, 1>)> {
    if x.traj_src.is_empty() {
        return None;
    }
    let src = x.ints::<B>(Ints::TrajSubject, device);
    let cov = model.covariates(
        x.ints(Ints::Sex, device),
        x.ints(Ints::Site, device),
        x.floats(Floats::Numeric, [x.nb, x.numeric_dim], device),
    );
    Some((
        z_clean.clone().select(0, src.clone()),
        cov.select(0, src),
        x.floats(Floats::TrajDt, [x.traj_dt.len()], device),
    ))
}

/// Decodes every prediction of `x` from its latent part `lat`, then applies the innovation
/// module (at `epoch`).
pub(crate) fn outputs<B: Backend>(
    obj: &Objective,
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    lat: &Latent<B>,
    epoch: usize,
    device: &B::Device,
) -> Decoded<B> {
    let (n, p) = (x.n, x.n_preds());
    let z_d = (lat.z_all.clone()).select(0, x.ints(Ints::DecodeRows, device));
    let z_pred = match &lat.z_fore {
        Some(zf) => Tensor::cat(vec![z_d, zf.clone()], 0),
        None => z_d,
    };
    let start = Start {
        a0_log: start_log(x, device),
        t: x.floats(Floats::PredT, [p], device),
        drift: obj
            .population_drift
            .as_ref()
            .map(|d| t3(d.clone(), [1, n, n], device)),
        eb_base: obj.eb_forecaster.as_ref().map(|eb| {
            let starts = start_logs(obj, x);
            let mut base = Vec::with_capacity(p * n * n);
            for (q, pr) in x.preds.iter().enumerate() {
                let age0 = x.start_age[q];
                if pr.forecast {
                    let sex = usize::try_from(x.sex[pr.b]).unwrap_or(0);
                    base.extend(eb.forecast_log(starts.row(q), age0, age0 + f64::from(pr.t), sex));
                } else {
                    base.extend_from_slice(starts.row(q));
                }
            }
            t3(base, [p, n, n], device)
        }),
    };
    let dec = model.decode(z_pred, Some(&start));
    let conn = dec.conn;

    let active: Vec<bool> = (0..p).map(|q| innovates(obj, x, q, epoch)).collect();
    let mut plans = vec![None; p];
    let mut a_pred = conn.a_pred.clone();
    if active.iter().any(|&a| a) {
        let l_new = host(conn.l_new.clone().detach());
        let nn = n * n;
        let mut mask = vec![0.0f32; p * nn];
        let starts = start_logs(obj, x);
        for q in (0..p).filter(|&q| active[q]) {
            let start = starts.row(q);
            let plan = innovation::plan(
                &l_new[q * nn..(q + 1) * nn],
                |ij| start[ij] > 0.0,
                x.target(q),
                n,
                x.preds[q].t as f64,
                &obj.cfg.innovation,
            );
            if let Some(plan) = &plan {
                for &ij in &plan.keep {
                    let (i, j) = (ij / n, ij % n);
                    mask[q * nn + i * n + j] = 1.0;
                    mask[q * nn + j * n + i] = 1.0;
                }
            }
            plans[q] = plan;
        }
        a_pred = a_pred + t3::<B>(mask, [p, n, n], device) * conn.w_new.clone().clamp_min(0.0);
    }
    Decoded {
        x_hat: dec.x_hat,
        conn,
        a_pred,
        plans,
    }
}
