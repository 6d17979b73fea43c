//! One training/evaluation batch of CLG-ODE: visit sampling (spec §3.3), augmentation (§3.4),
//! the forward passes of §3.5 batched over subjects, and the loss of §3.6 (minimal core).
//!
//! Batching: every encoder call of the batch (clean visit i, noisy visit i, and the observed
//! visits j/k needed by the velocity/acceleration terms) is one encoder pass over stacked
//! inputs; every forecast (i→j, i→k of every subject) is one RK4 integration over stacked
//! trajectories with per-trajectory Δt; every prediction (denoising reconstructions and
//! forecasts) is decoded and scored at once.

use ndarray::Array2;
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::fold_data::FoldData;
use crate::data::connectome::Scan;

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
pub(super) struct VelItem {
    pub(super) b: usize,
    pub(super) traj_j: usize,
    pub(super) enc_j: usize,
    pub(super) dt_ij: f32,
}

/// An acceleration term (subjects with a k visit).
#[derive(Debug, Clone, Copy)]
pub(super) struct AccItem {
    pub(super) b: usize,
    pub(super) traj_j: usize,
    pub(super) traj_k: usize,
    pub(super) enc_j: usize,
    pub(super) enc_k: usize,
    pub(super) dt_ij: f32,
    pub(super) dt_jk: f32,
}

/// Everything a batch needs, on the host.
pub struct HostBatch {
    pub nb: usize,
    pub(super) n: usize,
    pub(super) f: usize,
    /// Encoder inputs: rows `0..nb` clean visit i, then (training) noisy visit i, then observed
    /// visits j/k for the velocity/acceleration terms.
    pub(super) enc_a: Vec<f32>,
    pub(super) enc_x: Vec<f32>,
    pub(super) enc_rows: usize,
    /// Encoder row decoded as the denoising reconstruction D_i of each subject.
    pub(super) d_rows: Vec<i64>,
    pub(super) sex: Vec<i64>,
    pub(super) site: Vec<i64>,
    pub(super) numeric: Vec<f32>,
    pub(super) numeric_dim: usize,
    /// Forecast trajectories: source subject and Δt.
    pub(super) traj_src: Vec<i64>,
    pub(super) traj_dt: Vec<f32>,
    /// Per prediction (D rows first, then trajectories): weight in the manifold loss, target
    /// morphology, upper-triangle positive mask, log-domain target and positive count.
    pub(super) pred_w: Vec<f32>,
    pub(super) target_x: Vec<f32>,
    pub(super) target_y: Vec<f32>,
    pub(super) target_log: Vec<f32>,
    pub(super) npos: Vec<usize>,
    pub(super) vel: Vec<VelItem>,
    pub(super) acc: Vec<AccItem>,
    pub(super) upper: Vec<f32>,
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
