//! The forward pass over a batch: every encoder call at once, every forecast in one RK4
//! integration, every prediction decoded at once, the innovation module on forecasts, then the
//! terms of [`super::terms`], [`super::dynamics`], [`super::topology`] and the diagnostics.

use burn::prelude::*;
use burn::tensor::TensorData;

use super::diagnostics::mask_diagnostics;
use super::dynamics::{acceleration_sum, kl_sum, velocity_sum};
use super::innovation::{self, Plan};
use super::input::{ObjectiveInput, host, i1, t1, t3};
use super::stats::Stats;
use super::terms::PredTensors;
use super::topology;
use super::{Forward, LOSS_TERMS, Objective};
use crate::models::clg_ode::loss::topk_upper_mask;
use crate::models::clg_ode::{ClgOde, ConnOutput, Encoded, Start};

/// Whether the start visit of prediction `p` has a non-edge in the upper triangle.
fn has_pool(x: &ObjectiveInput, p: usize) -> bool {
    let (n, s) = (x.n, x.start(p));
    (0..n).any(|i| (i + 1..n).any(|j| s[i * n + j] <= 0.0))
}

/// Whether the innovation module acts on prediction `p` at `epoch` (host-known).
fn innovates(obj: &Objective, x: &ObjectiveInput, p: usize, epoch: usize) -> bool {
    let pr = &x.preds[p];
    obj.innovation_on(epoch)
        && pr.forecast
        && innovation::gate(pr.t as f64, &obj.cfg.innovation) > 0.0
        && has_pool(x, p)
}

/// How many forecasts of the batch the innovation module acts on.
pub fn innovation_plans_possible(obj: &Objective, x: &ObjectiveInput, epoch: usize) -> usize {
    (0..x.n_preds())
        .filter(|&p| innovates(obj, x, p, epoch))
        .count()
}

/// The model's outputs for every prediction of a batch.
pub struct Decoded<B: Backend> {
    pub enc: Encoded<B>,
    /// Every encoder row's z0, the start visits' z0, the forecasts' end states.
    pub z_all: Tensor<B, 3>,
    pub z_clean: Tensor<B, 3>,
    pub z_fore: Option<Tensor<B, 3>>,
    /// x̂ `[P,N,F]`.
    pub x_hat: Tensor<B, 3>,
    pub conn: ConnOutput<B>,
    /// The final prediction, after the innovation module `[P,N,N]`.
    pub a_pred: Tensor<B, 3>,
    /// The innovation plan of each prediction (forecasts it acts on).
    pub plans: Vec<Option<Plan>>,
}

/// Encodes, integrates and decodes every prediction of `x`, then applies the innovation module
/// (at `epoch`).
pub fn decode<B: Backend>(
    obj: &Objective,
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    epoch: usize,
    device: &B::Device,
) -> Decoded<B> {
    let (n, f, nb) = (x.n, x.f, x.nb);
    let r = x.enc_rows;
    let p = x.n_preds();
    let enc = model.encode(
        t3(x.enc_a.clone(), [r, n, n], device),
        t3(x.enc_x.clone(), [r, n, f], device),
    );
    let z_all = enc.z0();
    let z_clean = z_all.clone().narrow(0, 0, nb);
    let z_d = z_all.clone().select(0, i1(x.d_rows.clone(), device));
    let z_fore = (!x.traj_src.is_empty()).then(|| {
        let src = i1::<B>(x.traj_src.clone(), device);
        let cov = model.covariates(
            i1(x.sex.clone(), device),
            i1(x.site.clone(), device),
            Tensor::from_data(
                TensorData::new(x.numeric.clone(), [nb, x.numeric_dim]),
                device,
            ),
        );
        model.integrate(
            z_clean.clone().select(0, src.clone()),
            cov.select(0, src),
            t1(x.traj_dt.clone(), device),
        )
    });
    let z_pred = match &z_fore {
        Some(zf) => Tensor::cat(vec![z_d, zf.clone()], 0),
        None => z_d,
    };
    let start = Start {
        a0_log: t3(x.start_log.clone(), [p, n, n], device),
        t: t1(x.preds.iter().map(|q| q.t).collect(), device),
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
        for q in (0..p).filter(|&q| active[q]) {
            let start = x.start(q);
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
        enc,
        z_all,
        z_clean,
        z_fore,
        x_hat: dec.x_hat,
        conn,
        a_pred,
        plans,
    }
}

/// The symmetric top-k keep masks of every prediction (k = the target's edge count).
fn keep_masks(x: &ObjectiveInput, a_pred: &[f32]) -> Vec<f32> {
    let (n, nn) = (x.n, x.n * x.n);
    let mut keep = Vec::with_capacity(x.n_preds() * nn);
    for q in 0..x.n_preds() {
        let mut m = topk_upper_mask(&a_pred[q * nn..(q + 1) * nn], n, x.npos(q));
        for i in 0..n {
            for j in i + 1..n {
                m[j * n + i] = m[i * n + j];
            }
        }
        keep.extend(m);
    }
    keep
}

/// The batch forward of [`Objective::forward`].
pub fn forward<B: Backend>(
    obj: &Objective,
    model: &ClgOde<B>,
    x: &ObjectiveInput,
    epoch: usize,
    device: &B::Device,
) -> Forward<B> {
    let c = &obj.cfg;
    let (n, f, nb, p) = (x.n, x.f, x.nb, x.n_preds());
    let nn = n * n;
    let d = decode(obj, model, x, epoch, device);
    let a_host = host(d.a_pred.clone().detach());
    let keep = keep_masks(x, &a_host);
    let upper_host: Vec<f32> = (0..nn)
        .map(|ij| if ij / n < ij % n { 1.0 } else { 0.0 })
        .collect();
    let y: Vec<f32> = x
        .target_raw
        .iter()
        .enumerate()
        .map(|(k, &r)| {
            if r > 0.0 && upper_host[k % nn] > 0.0 {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    let target_log: Vec<f32> = x.target_raw.iter().map(|&r| r.max(0.0).ln_1p()).collect();
    let pt = PredTensors {
        n,
        logit: d.conn.logit.clone(),
        a_pred: d.a_pred.clone(),
        sparse: d.a_pred.clone() * t3(keep, [p, n, n], device),
        y: t3(y.clone(), [p, n, n], device),
        target_log: t3(target_log, [p, n, n], device),
        start_log: t3(x.start_log.clone(), [p, n, n], device),
        upper: Tensor::from_data(TensorData::new(upper_host, [1, nn]), device),
    };
    let w = t1::<B>(x.preds.iter().map(|q| q.weight).collect(), device);
    let weighted = |v: Tensor<B, 1>| (v * w.clone()).sum();

    let l_x = (d.x_hat.clone() - t3(x.target_x.clone(), [p, n, f], device))
        .square()
        .reshape([p, n * f])
        .mean_dim(1)
        .reshape([p]);
    let l_e = pt.edge(c, obj.fixed_support);
    let l_w = pt.weight(obj.fixed_support);
    let recon = l_x.clone() + l_e.clone() + l_w.clone().mul_scalar(c.lambda_weight);
    let counts = obj.counts(x, epoch);
    let zero = || Tensor::<B, 1>::zeros([1], device);
    let on = |i: usize| counts[i] > 0.0;
    let mut sums = vec![
        weighted(recon),
        kl_sum(&d.enc, nb),
        zero(),
        zero(),
        zero(),
        if on(5) {
            weighted(pt.full_log())
        } else {
            zero()
        },
        if on(6) {
            weighted(pt.zero_log())
        } else {
            zero()
        },
        if on(7) {
            weighted(pt.delta_log())
        } else {
            zero()
        },
        if on(8) {
            weighted(pt.density())
        } else {
            zero()
        },
        zero(),
        zero(),
        zero(),
    ];
    if let Some(zf) = &d.z_fore {
        if !x.vel.is_empty() {
            sums[2] = velocity_sum(x, zf, &d.z_clean, &d.z_all);
        }
        if !x.acc.is_empty() {
            sums[3] = acceleration_sum(x, zf, &d.z_clean, &d.z_all);
        }
    }

    // Topology: raw per prediction (weighted), normalised, summed.
    let mut topo_raw = vec![0.0f64; p];
    if c.topo_on() {
        let t = &c.topology;
        let probes = obj
            .fixed_probes
            .clone()
            .unwrap_or_else(|| topology::probes(obj.seed, t.probes, n));
        let probes64: Vec<f64> = probes.iter().map(|&v| v as f64).collect();
        let (mut rows, mut taus, mut target) = (Vec::new(), Vec::new(), Vec::new());
        for q in 0..p {
            if let Some(th) = topology::thresholds(x.target(q), n, t.loss_bins) {
                target.extend(topology::target_betti(x.target(q), n, &th, &probes64, t));
                taus.extend(th);
                rows.push(q);
            }
        }
        if !rows.is_empty() {
            // One prediction at a time: the backward pass of this loss holds several
            // [thresholds, N, N] temporaries, which would otherwise exist for all at once.
            let log_p = pt.sparse.clone().clamp_min(0.0).log1p();
            let k = t.loss_bins;
            let raw: Vec<Tensor<B, 1>> = rows
                .iter()
                .enumerate()
                .map(|(r, &q)| {
                    let one = log_p.clone().narrow(0, q, 1);
                    let range = r * k..(r + 1) * k;
                    topology::raw_loss(one, &taus[range.clone()], &target[range], &probes, t)
                        .mul_scalar(x.preds[q].weight)
                })
                .collect();
            let raw = Tensor::cat(raw, 0);
            for (&q, v) in rows.iter().zip(host(raw.clone().detach())) {
                topo_raw[q] = v as f64;
            }
            sums[4] = topology::normalize(raw, obj.state.topo_scale, t.log_compress()).sum();
        }
    }

    // Innovation terms of the forecasts it acts on.
    let mut q_means = Vec::new();
    if d.plans.iter().any(Option::is_some) {
        let l_new = d.conn.l_new.clone().reshape([p, nn]);
        let w_new = d.conn.w_new.clone().reshape([p, nn]);
        let factor = super::config::linear_factor(
            epoch,
            c.innovation.new_sparse_warmup_epochs,
            c.innovation.new_sparse_ramp_epochs,
        );
        for (q, plan) in d.plans.iter().enumerate() {
            let Some(plan) = plan else { continue };
            let row = |t: &Tensor<B, 2>| t.clone().narrow(0, q, 1).reshape([nn]);
            let terms = innovation::terms(
                plan,
                row(&l_new),
                row(&w_new),
                x.target(q),
                factor,
                &c.innovation,
            );
            let wq = x.preds[q].weight as f64;
            sums[9] = sums[9].clone() + terms.new_edge.mul_scalar(wq);
            sums[10] = sums[10].clone() + terms.new_sparse.mul_scalar(wq);
            sums[11] = sums[11].clone() + terms.new_reg.mul_scalar(wq);
            let qv = host(terms.q.detach());
            q_means.push((
                qv.iter().map(|&v| v as f64).sum::<f64>() / qv.len().max(1) as f64,
                plan.keep.len(),
            ));
        }
    }

    // Host values: every sum in one read, then the statistics.
    let parts: Vec<Tensor<B, 1>> = sums
        .iter()
        .cloned()
        .chain([l_x.sum(), l_e.sum(), l_w.sum()])
        .map(|t| t.detach())
        .collect();
    let values: Vec<f64> = host(Tensor::cat(parts, 0))
        .into_iter()
        .map(f64::from)
        .collect();
    let mut stats = Stats::default();
    for (i, name) in LOSS_TERMS.iter().enumerate() {
        stats.add(name, values[i], counts[i]);
    }
    for (k, name) in ["l_x", "l_e", "l_w"].iter().enumerate() {
        stats.add(name, values[LOSS_TERMS.len() + k], p as f64);
    }
    stats.add("topo_raw", topo_raw.iter().sum(), p as f64);
    for (qm, kept) in q_means {
        stats.add("new_q_mean", qm, 1.0);
        stats.add("new_kept_mean", kept as f64, 1.0);
    }
    diagnostics_into(
        &mut stats,
        x,
        &host(d.conn.logit.detach()),
        &y,
        c.compute_mask_auprc,
    );
    Forward {
        sums,
        stats,
        topo_raw,
    }
}

/// Adds every prediction's mask diagnostics (σ of the existence logits against the target's
/// edges) to `stats`.
fn diagnostics_into(stats: &mut Stats, x: &ObjectiveInput, logit: &[f32], y: &[f32], auprc: bool) {
    let (n, nn) = (x.n, x.n * x.n);
    for q in 0..x.n_preds() {
        let (mut p, mut edge) = (Vec::new(), Vec::new());
        for i in 0..n {
            for j in i + 1..n {
                // In f32 as the reference (saturated probabilities tie at 1).
                let l = logit[q * nn + i * n + j];
                p.push((1.0 / (1.0 + (-l).exp())) as f64);
                edge.push(y[q * nn + i * n + j] > 0.0);
            }
        }
        if let Some(m) = mask_diagnostics(&p, &edge, auprc) {
            for (name, v) in m.columns() {
                stats.add(name, v, 1.0);
            }
        }
    }
}
