//! The CLG-ODE batch objective (spec §3.6, minimal core): every encoder call, forecast and
//! decoding of a [`HostBatch`] at once, then the morphology, edge-existence, sparsified
//! log-weight, KL, velocity and acceleration terms.

use burn::prelude::*;
use burn::tensor::TensorData;
use serde::{Deserialize, Serialize};

use super::batch::{HostBatch, LossSettings};
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::loss::{bce_pos_weight, huber, kl_mean, topk_upper_mask};

fn t1<B: Backend>(v: Vec<f32>, device: &B::Device) -> Tensor<B, 1> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

fn i1<B: Backend>(v: Vec<i64>, device: &B::Device) -> Tensor<B, 1, Int> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

fn t3<B: Backend>(v: Vec<f32>, shape: [usize; 3], device: &B::Device) -> Tensor<B, 3> {
    Tensor::from_data(TensorData::new(v, shape), device)
}

/// Host values of a batch's loss terms.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Terms {
    pub total: f64,
    pub manifold: f64,
    pub kl: f64,
    pub vel: f64,
    pub acc: f64,
    /// Means over the batch's predictions.
    pub l_x: f64,
    pub l_e: f64,
    pub l_w: f64,
    pub vel_count: usize,
    pub acc_count: usize,
    pub predictions: usize,
}

impl Terms {
    /// `total` from the parts: manifold + λ_kl·KL, plus the velocity and acceleration terms
    /// where the batch had any.
    pub fn with_total(mut self, s: &LossSettings) -> Self {
        self.total = self.manifold + s.lambda_kl * self.kl;
        if self.vel_count > 0 {
            self.total += s.lambda_vel * self.vel;
        }
        if self.acc_count > 0 {
            self.total += s.lambda_acc * self.acc;
        }
        self
    }
}

/// Scales of a batch's loss parts in the tensor that is differentiated. A rank of a
/// data-parallel step scores its shard of the global batch with (its subjects / all subjects)
/// for the per-subject means and (its items / all items) for the velocity and acceleration
/// means, so that the gradients summed over ranks are those of the global batch's loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermWeights {
    pub subjects: f64,
    pub vel: f64,
    pub acc: f64,
}

impl TermWeights {
    pub const ONE: TermWeights = TermWeights {
        subjects: 1.0,
        vel: 1.0,
        acc: 1.0,
    };
}

/// The batch's loss, scaled by `w` (a 1-element tensor, differentiable on an autodiff backend),
/// and its unscaled terms on the host.
pub fn batch_loss<B: Backend>(
    model: &ClgOde<B>,
    hb: &HostBatch,
    s: &LossSettings,
    w: TermWeights,
    device: &B::Device,
) -> (Tensor<B, 1>, Terms) {
    let (n, f, nb) = (hb.n, hb.f, hb.nb);
    let r = hb.enc_rows;
    let enc = model.encode(
        t3(hb.enc_a.clone(), [r, n, n], device),
        t3(hb.enc_x.clone(), [r, n, f], device),
    );
    let z_all = enc.z0(); // [R,N,2L]
    let z_clean = z_all.clone().narrow(0, 0, nb);
    let kl = (kl_mean(enc.mu_m.narrow(0, 0, nb), enc.logvar_m.narrow(0, 0, nb))
        + kl_mean(enc.mu_c.narrow(0, 0, nb), enc.logvar_c.narrow(0, 0, nb)))
    .mean();

    // Predictions: D rows, then forecasts.
    let z_d = z_all.clone().select(0, i1(hb.d_rows.clone(), device));
    let n_traj = hb.traj_src.len();
    let z_fore = (n_traj > 0).then(|| {
        let src = i1::<B>(hb.traj_src.clone(), device);
        let cov = model.covariates(
            i1(hb.sex.clone(), device),
            i1(hb.site.clone(), device),
            Tensor::from_data(
                TensorData::new(hb.numeric.clone(), [nb, hb.numeric_dim]),
                device,
            ),
        );
        model.integrate(
            z_clean.clone().select(0, src.clone()),
            cov.select(0, src),
            t1(hb.traj_dt.clone(), device),
        )
    });
    let z_pred = match &z_fore {
        Some(zf) => Tensor::cat(vec![z_d, zf.clone()], 0),
        None => z_d,
    };
    let p = hb.n_predictions();
    let dec = model.decode(z_pred);

    // l_x: MSE over N×F per prediction.
    let l_x = (dec.x_hat - t3(hb.target_x.clone(), [p, n, f], device))
        .square()
        .reshape([p, n * f])
        .mean_dim(1)
        .reshape([p]);
    // l_e: BCE with positive weight over the upper triangle.
    let y = t3(hb.target_y.clone(), [p, n, n], device);
    let upper = Tensor::<B, 2>::from_data(TensorData::new(hb.upper.clone(), [1, n * n]), device);
    let m = (n * (n - 1) / 2).max(1) as f64;
    let l_e = (bce_pos_weight(dec.conn.logit, y.clone(), s.edge_pos_weight).reshape([p, n * n])
        * upper)
        .sum_dim(1)
        .reshape([p])
        .div_scalar(m);
    // l_w: log-Huber on positive edges of the top-k sparsified prediction.
    let a_pred = dec.conn.a_pred;
    let host_pred: Vec<f32> = a_pred
        .clone()
        .detach()
        .into_data()
        .convert::<f32>()
        .to_vec()
        .expect("f32 predictions");
    let mut keep = Vec::with_capacity(p * n * n);
    for (q, &k) in hb.npos.iter().enumerate() {
        keep.extend(topk_upper_mask(
            &host_pred[q * n * n..(q + 1) * n * n],
            n,
            k,
        ));
    }
    let keep = t3(keep, [p, n, n], device);
    let inv_pos = t1::<B>(
        hb.npos.iter().map(|&k| 1.0 / k.max(1) as f32).collect(),
        device,
    );
    let l_w = (huber((a_pred * keep).log1p() - t3(hb.target_log.clone(), [p, n, n], device)) * y)
        .reshape([p, n * n])
        .sum_dim(1)
        .reshape([p])
        * inv_pos;
    let recon = l_x.clone() + l_e.clone() + l_w.clone().mul_scalar(s.lambda_weight);
    let manifold = (recon * t1(hb.pred_w.clone(), device))
        .sum()
        .div_scalar(nb as f64);

    let mut total = (manifold.clone() + kl.clone().mul_scalar(s.lambda_kl)).mul_scalar(w.subjects);
    let zero = || Tensor::<B, 1>::zeros([1], device);
    let mut vel = zero();
    let mut acc = zero();
    if let Some(zf) = &z_fore {
        let sel = |t: &Tensor<B, 3>, idx: Vec<i64>| t.clone().select(0, i1(idx, device));
        let col = |v: Vec<f32>| t1::<B>(v, device).reshape([-1, 1, 1]);
        if !hb.vel.is_empty() {
            let it = &hb.vel;
            let zpj = sel(zf, it.iter().map(|v| v.traj_j as i64).collect());
            let zei = sel(&z_clean, it.iter().map(|v| v.b as i64).collect());
            let zej = sel(&z_all, it.iter().map(|v| v.enc_j as i64).collect()).detach();
            let dt = col(it.iter().map(|v| v.dt_ij).collect());
            let v_model = (zpj - zei.clone()) / dt.clone();
            let v_obs = ((zej - zei) / dt).detach();
            vel = huber(v_model - v_obs).mean();
            total = total + vel.clone().mul_scalar(s.lambda_vel * w.vel);
        }
        if !hb.acc.is_empty() {
            let it = &hb.acc;
            let zpj = sel(zf, it.iter().map(|v| v.traj_j as i64).collect());
            let zpk = sel(zf, it.iter().map(|v| v.traj_k as i64).collect());
            let zei = sel(&z_clean, it.iter().map(|v| v.b as i64).collect());
            let zej = sel(&z_all, it.iter().map(|v| v.enc_j as i64).collect()).detach();
            let zek = sel(&z_all, it.iter().map(|v| v.enc_k as i64).collect()).detach();
            let dij = col(it.iter().map(|v| v.dt_ij).collect());
            let djk = col(it.iter().map(|v| v.dt_jk).collect());
            let denom = (dij.clone() + djk.clone()).mul_scalar(0.5);
            let accel = |zi: Tensor<B, 3>, zj: Tensor<B, 3>, zk: Tensor<B, 3>| {
                let v_ij = (zj.clone() - zi) / dij.clone();
                let v_jk = (zk - zj) / djk.clone();
                (v_jk - v_ij) / denom.clone()
            };
            let a_model = accel(zei.clone(), zpj, zpk);
            let a_obs = accel(zei.detach(), zej, zek).detach();
            acc = huber(a_model - a_obs).mean();
            total = total + acc.clone().mul_scalar(s.lambda_acc * w.acc);
        }
    }

    let summary = Tensor::cat(
        vec![
            manifold,
            kl,
            vel,
            acc,
            l_x.mean().detach(),
            l_e.mean().detach(),
            l_w.mean().detach(),
        ],
        0,
    );
    let v: Vec<f64> = summary
        .detach()
        .into_data()
        .convert::<f64>()
        .to_vec()
        .unwrap_or_default();
    let g = |i: usize| v.get(i).copied().unwrap_or(f64::NAN);
    let terms = Terms {
        total: f64::NAN,
        manifold: g(0),
        kl: g(1),
        vel: g(2),
        acc: g(3),
        l_x: g(4),
        l_e: g(5),
        l_w: g(6),
        vel_count: hb.vel.len(),
        acc_count: hb.acc.len(),
        predictions: p,
    }
    .with_total(s);
    (total, terms)
}
