//! One training/evaluation batch of CLG-ODE: visit sampling (spec §3.3), augmentation (§3.4),
//! the forward passes of §3.5 batched over subjects, and the loss of §3.6 (minimal core).
//!
//! Batching: every encoder call of the batch (clean visit i, noisy visit i, and the observed
//! visits j/k needed by the velocity/acceleration terms) is one encoder pass over stacked
//! inputs; every forecast (i→j, i→k of every subject) is one RK4 integration over stacked
//! trajectories with per-trajectory Δt; every prediction (denoising reconstructions and
//! forecasts) is decoded and scored at once.

use burn::prelude::*;
use burn::tensor::TensorData;
use ndarray::Array2;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::data::connectome::{Cohort, NormStats, Scan};
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::loss::{bce_pos_weight, huber, kl_mean, topk_upper_mask};

/// Loss and sampling settings (reference CLI defaults; see the module docs of `gnn`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossSettings {
    pub lambda_kl: f64,
    pub lambda_vel: f64,
    pub lambda_acc: f64,
    /// First epoch (0-based) with the velocity term (`warmup_manifold_epochs`).
    pub vel_from_epoch: usize,
    /// First epoch (0-based) with the acceleration term (`warmup_vel_epochs`).
    pub acc_from_epoch: usize,
    pub edge_pos_weight: f64,
    pub lambda_weight: f64,
    /// Weight of the i→k forecast in the manifold loss.
    pub forecast_k_weight: f64,
    pub morph_noise_sigma: f64,
    pub sc_pos_edge_drop_prob: f64,
    pub adjacent_pair_prob: f64,
    /// λ_topo: the Betti-curve topology loss is not ported (reference default 1e-3).
    pub lambda_topo: f64,
}

impl Default for LossSettings {
    fn default() -> Self {
        Self {
            lambda_kl: 1e-4,
            lambda_vel: 0.2,
            lambda_acc: 0.1,
            vel_from_epoch: 10,
            acc_from_epoch: 20,
            edge_pos_weight: 5.0,
            lambda_weight: 1.0,
            forecast_k_weight: 0.5,
            morph_noise_sigma: 0.05,
            sc_pos_edge_drop_prob: 0.02,
            adjacent_pair_prob: 0.7,
            lambda_topo: 0.0,
        }
    }
}

impl LossSettings {
    pub fn vel_on(&self, epoch: usize) -> bool {
        epoch >= self.vel_from_epoch && self.lambda_vel > 0.0
    }
    pub fn acc_on(&self, epoch: usize) -> bool {
        epoch >= self.acc_from_epoch && self.lambda_acc > 0.0
    }
}

/// Per-fold host data: the cohort, its z-scored inputs and the per-scan numeric covariates.
pub struct FoldData<'a> {
    pub cohort: &'a Cohort,
    /// `[subject][scan]` z-scored morphology, N×F.
    pub x: Vec<Vec<Array2<f32>>>,
    /// `[subject][scan]` numeric covariates (age, s, s_mean, z-ECC).
    pub numeric: Vec<Vec<Vec<f32>>>,
    /// Upper-triangle indicator, N×N row-major.
    pub upper: Vec<f32>,
}

impl<'a> FoldData<'a> {
    pub fn new(cohort: &'a Cohort, stats: &NormStats) -> Self {
        let norm = cohort.normalized(stats);
        let mut x = Vec::with_capacity(norm.len());
        let mut numeric = Vec::with_capacity(norm.len());
        for (subject, scans) in cohort.subjects.iter().zip(norm) {
            let mut xs = Vec::with_capacity(scans.len());
            let mut cs = Vec::with_capacity(scans.len());
            for (scan, ns) in subject.scans.iter().zip(scans) {
                cs.push(scan.numeric_covariates(ns.ecc.view(), true));
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

    pub fn scans(&self, subject: usize) -> &'a [Scan] {
        &self.cohort.subjects[subject].scans
    }

    /// The numeric-covariate width (35 by default).
    pub fn numeric_dim(&self) -> usize {
        self.numeric.iter().flatten().next().map_or(0, |v| v.len())
    }
}

/// Δt between visits `a < b` of one subject (spec §2.5): age difference, or `b − a` when that
/// is not finite or ≤ 0; at least 1e-3.
pub fn delta_t(scans: &[Scan], a: usize, b: usize) -> f64 {
    let d = scans[b].age - scans[a].age;
    let d = if d.is_finite() && d > 0.0 {
        d
    } else {
        (b - a) as f64
    };
    d.max(1e-3)
}

/// The visits of one training example: start i, optional j and k (spec §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visits {
    pub i: usize,
    pub j: Option<usize>,
    pub k: Option<usize>,
}

/// Deterministic visits (validation/test loss): (0, 1, 2) truncated to the subject's length.
pub fn fixed_visits(len: usize) -> Visits {
    Visits {
        i: 0,
        j: (len >= 2).then_some(1),
        k: (len >= 3).then_some(2),
    }
}

/// Random visits of spec §3.3 for a subject with `len` scans.
pub fn sample_visits(len: usize, adjacent_prob: f64, rng: &mut impl Rng) -> Visits {
    if len < 3 {
        return fixed_visits(len);
    }
    let i = rng.random_range(0..=len - 3);
    if rng.random::<f64>() < adjacent_prob {
        Visits {
            i,
            j: Some(i + 1),
            k: Some(i + 2),
        }
    } else {
        let j = rng.random_range(i + 1..=len - 2);
        let k = rng.random_range(j + 1..=len - 1);
        Visits {
            i,
            j: Some(j),
            k: Some(k),
        }
    }
}

/// A standard normal draw (Box–Muller).
pub fn std_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// A velocity term: subject `b`, its i→j trajectory, the encoder row of visit j, Δt_ij.
#[derive(Debug, Clone, Copy)]
struct VelItem {
    b: usize,
    traj_j: usize,
    enc_j: usize,
    dt_ij: f32,
}

/// An acceleration term (subjects with a k visit).
#[derive(Debug, Clone, Copy)]
struct AccItem {
    b: usize,
    traj_j: usize,
    traj_k: usize,
    enc_j: usize,
    enc_k: usize,
    dt_ij: f32,
    dt_jk: f32,
}

/// Everything a batch needs, on the host.
pub struct HostBatch {
    pub nb: usize,
    n: usize,
    f: usize,
    /// Encoder inputs: rows `0..nb` clean visit i, then (training) noisy visit i, then observed
    /// visits j/k for the velocity/acceleration terms.
    enc_a: Vec<f32>,
    enc_x: Vec<f32>,
    enc_rows: usize,
    /// Encoder row decoded as the denoising reconstruction D_i of each subject.
    d_rows: Vec<i64>,
    sex: Vec<i64>,
    site: Vec<i64>,
    numeric: Vec<f32>,
    numeric_dim: usize,
    /// Forecast trajectories: source subject and Δt.
    traj_src: Vec<i64>,
    traj_dt: Vec<f32>,
    /// Per prediction (D rows first, then trajectories): weight in the manifold loss, target
    /// morphology, upper-triangle positive mask, log-domain target and positive count.
    pred_w: Vec<f32>,
    target_x: Vec<f32>,
    target_y: Vec<f32>,
    target_log: Vec<f32>,
    npos: Vec<usize>,
    vel: Vec<VelItem>,
    acc: Vec<AccItem>,
    upper: Vec<f32>,
}

/// How a batch is drawn.
pub enum Mode<'r, R: Rng> {
    /// Random visits and augmentation, one generator per subject (in batch order), so that a
    /// subject's draws do not depend on which batch or rank it lands in.
    Train(&'r mut [R]),
    /// Clean inputs and visits (0, 1, 2).
    Eval,
}

impl HostBatch {
    /// Builds the batch of `subjects` for `epoch` (which decides whether the velocity and
    /// acceleration encodings are needed).
    pub fn build<R: Rng>(
        data: &FoldData,
        subjects: &[usize],
        mut mode: Mode<'_, R>,
        epoch: usize,
        s: &LossSettings,
    ) -> Self {
        let n = data.n_nodes();
        let nn = n * n;
        let f = data.cohort.n_metrics();
        let nb = subjects.len();
        let numeric_dim = data.numeric_dim();
        if let Mode::Train(rngs) = &mode {
            assert_eq!(rngs.len(), nb, "one generator per subject");
        }
        let visits: Vec<Visits> = subjects
            .iter()
            .enumerate()
            .map(|(b, &sub)| {
                let len = data.scans(sub).len();
                match &mut mode {
                    Mode::Train(rngs) => sample_visits(len, s.adjacent_pair_prob, &mut rngs[b]),
                    Mode::Eval => fixed_visits(len),
                }
            })
            .collect();
        let mut hb = HostBatch {
            nb,
            n,
            f,
            enc_a: Vec::new(),
            enc_x: Vec::new(),
            enc_rows: 0,
            d_rows: Vec::new(),
            sex: Vec::new(),
            site: Vec::new(),
            numeric: Vec::new(),
            numeric_dim,
            traj_src: Vec::new(),
            traj_dt: Vec::new(),
            pred_w: Vec::new(),
            target_x: Vec::new(),
            target_y: Vec::new(),
            target_log: Vec::new(),
            npos: Vec::new(),
            vel: Vec::new(),
            acc: Vec::new(),
            upper: data.upper.clone(),
        };
        let push_enc = |hb: &mut HostBatch, a: &[f32], x: &[f32]| -> usize {
            hb.enc_a.extend_from_slice(a);
            hb.enc_x.extend_from_slice(x);
            hb.enc_rows += 1;
            hb.enc_rows - 1
        };
        // Clean visit i of every subject, and its covariates.
        for (&sub, v) in subjects.iter().zip(&visits) {
            let scans = data.scans(sub);
            let subject = &data.cohort.subjects[sub];
            push_enc(
                &mut hb,
                slice2(&scans[v.i].a_log),
                slice2(&data.x[sub][v.i]),
            );
            hb.sex.push(subject.sex as i64);
            hb.site.push(subject.site as i64);
            hb.numeric.extend_from_slice(&data.numeric[sub][v.i]);
        }
        // Denoising input of visit i (augmented in training; clean = row b in evaluation).
        for (b, (&sub, v)) in subjects.iter().zip(&visits).enumerate() {
            match &mut mode {
                Mode::Train(rngs) => {
                    let rng = &mut rngs[b];
                    let scan = &data.scans(sub)[v.i];
                    let mut a = slice2(&scan.a_log).to_vec();
                    if s.sc_pos_edge_drop_prob > 0.0 {
                        let raw = slice2(&scan.a_raw);
                        for i in 0..n {
                            for j in i + 1..n {
                                if raw[i * n + j] > 0.0
                                    && rng.random::<f64>() < s.sc_pos_edge_drop_prob
                                {
                                    a[i * n + j] = 0.0;
                                    a[j * n + i] = 0.0;
                                }
                            }
                        }
                    }
                    let x: Vec<f32> = slice2(&data.x[sub][v.i])
                        .iter()
                        .map(|&x| x + (s.morph_noise_sigma * std_normal(rng)) as f32)
                        .collect();
                    let row = push_enc(&mut hb, &a, &x);
                    hb.d_rows.push(row as i64);
                }
                Mode::Eval => hb.d_rows.push(b as i64),
            }
        }
        // Targets of the D predictions: visit i, clean.
        for (&sub, v) in subjects.iter().zip(&visits) {
            hb.push_target(data, sub, v.i, 1.0);
        }
        // Forecast trajectories i→j (weight 1) and i→k (weight 0.5).
        let mut traj_of: Vec<(Option<usize>, Option<usize>)> = vec![(None, None); nb];
        for (b, (&sub, v)) in subjects.iter().zip(&visits).enumerate() {
            let scans = data.scans(sub);
            if let Some(j) = v.j {
                traj_of[b].0 = Some(hb.traj_src.len());
                hb.traj_src.push(b as i64);
                hb.traj_dt.push(delta_t(scans, v.i, j) as f32);
                hb.push_target(data, sub, j, 1.0);
            }
            if let Some(k) = v.k {
                traj_of[b].1 = Some(hb.traj_src.len());
                hb.traj_src.push(b as i64);
                hb.traj_dt.push(delta_t(scans, v.i, k) as f32);
                hb.push_target(data, sub, k, s.forecast_k_weight as f32);
            }
        }
        // Observed encodings for the velocity / acceleration terms.
        let (vel_on, acc_on) = (s.vel_on(epoch), s.acc_on(epoch));
        if vel_on || acc_on {
            for (b, (&sub, v)) in subjects.iter().zip(&visits).enumerate() {
                let scans = data.scans(sub);
                let (Some(j), Some(tj)) = (v.j, traj_of[b].0) else {
                    continue;
                };
                let enc_j = push_enc(&mut hb, slice2(&scans[j].a_log), slice2(&data.x[sub][j]));
                let dt_ij = delta_t(scans, v.i, j) as f32;
                if vel_on {
                    hb.vel.push(VelItem {
                        b,
                        traj_j: tj,
                        enc_j,
                        dt_ij,
                    });
                }
                if acc_on && let (Some(k), Some(tk)) = (v.k, traj_of[b].1) {
                    let enc_k = push_enc(&mut hb, slice2(&scans[k].a_log), slice2(&data.x[sub][k]));
                    hb.acc.push(AccItem {
                        b,
                        traj_j: tj,
                        traj_k: tk,
                        enc_j,
                        enc_k,
                        dt_ij,
                        dt_jk: delta_t(scans, j, k) as f32,
                    });
                }
            }
        }
        debug_assert_eq!(hb.enc_a.len(), hb.enc_rows * nn);
        hb
    }

    fn push_target(&mut self, data: &FoldData, sub: usize, visit: usize, w: f32) {
        let n = self.n;
        let scan = &data.scans(sub)[visit];
        let raw = slice2(&scan.a_raw);
        let mut npos = 0;
        self.target_y.reserve(n * n);
        for (&r, &u) in raw.iter().zip(&data.upper) {
            let y = if r > 0.0 && u > 0.0 { 1.0 } else { 0.0 };
            npos += (y > 0.0) as usize;
            self.target_y.push(y);
        }
        self.target_log.extend_from_slice(slice2(&scan.a_log));
        self.target_x.extend_from_slice(slice2(&data.x[sub][visit]));
        self.pred_w.push(w);
        self.npos.push(npos);
    }

    /// Items of the velocity and acceleration terms.
    pub fn vel_items(&self) -> usize {
        self.vel.len()
    }
    pub fn acc_items(&self) -> usize {
        self.acc.len()
    }

    /// Number of predictions scored (D rows + forecasts).
    pub fn n_predictions(&self) -> usize {
        self.pred_w.len()
    }
}

fn slice2(a: &Array2<f32>) -> &[f32] {
    a.as_slice().expect("standard-layout array")
}

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
