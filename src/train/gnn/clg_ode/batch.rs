//! One CLG-ODE batch on the host: visit sampling (docs/clg-ode-model.md §3.3, porting note §2.9), augmentation
//! (§3.4) and the objective's input (every encoder call, forecast and prediction of the batch).

use ndarray::Array2;
use rand::Rng;

use super::super::protocol::fold_data::{FoldData, delta_t};
use super::super::settings::Sampling;
use crate::models::clg_ode::objective::input::ScanIds;
use crate::models::clg_ode::objective::{
    AccItem, FORECAST_K_WEIGHT, ObjectiveConfig, ObjectiveInput, Pred, VelItem,
};

/// The visits of one training example: start i, optional j and k (docs/clg-ode-model.md §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Visits {
    pub i: usize,
    pub j: Option<usize>,
    pub k: Option<usize>,
}

/// Deterministic visits (validation/test loss): (0, 1, 2) truncated to the subject's length.
pub(crate) fn fixed_visits(len: usize) -> Visits {
    Visits {
        i: 0,
        j: (len >= 2).then_some(1),
        k: (len >= 3).then_some(2),
    }
}

/// Random visits of docs/clg-ode-model.md §3.3 for a subject with `len` scans.
pub(crate) fn sample_visits(len: usize, adjacent_prob: f64, rng: &mut impl Rng) -> Visits {
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
pub(crate) fn std_normal(rng: &mut impl Rng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Visits of the innovation phase (backbone frozen): long intervals, (i, i+1, last) for
/// subjects with 4 or more visits.
pub(crate) fn long_visits(len: usize, rng: &mut impl Rng) -> Visits {
    if len < 4 {
        return fixed_visits(len);
    }
    let i = rng.random_range(0..=len - 3);
    Visits {
        i,
        j: Some(i + 1),
        k: Some(len - 1),
    }
}

/// How a batch is drawn.
pub(crate) enum Mode<'r, R: Rng> {
    /// Random visits and augmentation, one generator per subject (in batch order), so that a
    /// subject's draws do not depend on which batch or rank it lands in.
    Train(&'r mut [R]),
    /// Clean inputs and visits (0, 1, 2).
    Eval,
    /// Clean inputs, visits (0, 1): the forecast of visit 1 (and the reconstruction of visit 0).
    Forecast,
}

fn slice2(a: &Array2<f32>) -> &[f32] {
    a.as_slice().expect("standard-layout array")
}

/// Which matrices a batch holds on the host besides their scans' indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostRows {
    /// Every encoder input, start visit and target (a batch uploaded from the host).
    All,
    /// The targets only (host statistics read them): the encoder inputs and start visits are
    /// gathered from the scans held on the device (`objective::resident`), so their logs are
    /// not computed on the host; `enc_a` and `start_log` stay empty.
    ByScan,
}

/// Builds the objective's input for `subjects` at `epoch` (which decides whether the velocity
/// and acceleration encodings are needed and how visits are sampled).
pub(crate) fn build<R: Rng>(
    data: &FoldData,
    subjects: &[usize],
    mode: Mode<'_, R>,
    epoch: usize,
    obj: &ObjectiveConfig,
    s: &Sampling,
) -> ObjectiveInput {
    build_rows(data, subjects, mode, epoch, obj, s, HostRows::All)
}

/// [`build`], holding `rows` on the host (the same draws and indices either way).
pub(crate) fn build_rows<R: Rng>(
    data: &FoldData,
    subjects: &[usize],
    mut mode: Mode<'_, R>,
    epoch: usize,
    obj: &ObjectiveConfig,
    s: &Sampling,
    rows: HostRows,
) -> ObjectiveInput {
    let host = rows == HostRows::All;
    let n = data.n_nodes();
    let nb = subjects.len();
    if let Mode::Train(rngs) = &mode {
        assert_eq!(rngs.len(), nb, "one generator per subject");
    }
    let long = obj.innovation.frozen(epoch);
    let visits: Vec<Visits> = subjects
        .iter()
        .enumerate()
        .map(|(b, &sub)| {
            let len = data.scans(sub).len();
            match &mut mode {
                Mode::Train(rngs) if long => long_visits(len, &mut rngs[b]),
                Mode::Train(rngs) => sample_visits(len, s.adjacent_pair_prob, &mut rngs[b]),
                Mode::Eval => fixed_visits(len),
                Mode::Forecast => Visits {
                    k: None,
                    ..fixed_visits(len)
                },
            }
        })
        .collect();
    let mut x = ObjectiveInput {
        nb,
        n,
        f: data.cohort.n_metrics(),
        numeric_dim: data.numeric_dim(),
        scan_ids: Some(ScanIds::default()),
        ..Default::default()
    };
    let push_enc = |x: &mut ObjectiveInput, (sub, visit): (usize, usize)| -> usize {
        if host {
            data.scans(sub)[visit].log_into(&mut x.enc_a);
        }
        x.enc_x.extend_from_slice(slice2(&data.x[sub][visit]));
        ids(x).enc.push(data.scan_id(sub, visit));
        x.enc_rows += 1;
        x.enc_rows - 1
    };
    // Clean visit i of every subject, and its covariates.
    for (&sub, v) in subjects.iter().zip(&visits) {
        let subject = &data.cohort.subjects[sub];
        push_enc(&mut x, (sub, v.i));
        x.sex.push(subject.sex as i64);
        x.site.push(subject.site as i64);
        x.numeric.extend_from_slice(&data.numeric[sub][v.i]);
    }
    // Reconstruction input of visit i (augmented in training; the clean row otherwise).
    for (b, (&sub, v)) in subjects.iter().zip(&visits).enumerate() {
        match &mut mode {
            Mode::Train(rngs) => {
                let (a, m, dropped) = augmented(data, sub, v.i, &mut rngs[b], s, host);
                let row = (x.enc_rows * n * n) as i64;
                let ids = ids(&mut x);
                ids.enc.push(data.scan_id(sub, v.i));
                ids.dropped
                    .extend(dropped.into_iter().map(|k| row + k as i64));
                x.enc_a.extend(a);
                x.enc_x.extend(m);
                x.enc_rows += 1;
                x.d_rows.push(x.enc_rows as i64 - 1);
            }
            Mode::Eval | Mode::Forecast => x.d_rows.push(b as i64),
        }
    }
    // Reconstructions: targets are visit i, clean.
    for (b, (&sub, v)) in subjects.iter().zip(&visits).enumerate() {
        push_pred(
            &mut x,
            data,
            sub,
            v.i,
            v.i,
            Pred {
                b,
                weight: 1.0,
                t: 0.0,
                forecast: false,
            },
            host,
        );
    }
    // Forecast trajectories i→j (weight 1) and i→k (weight 0.5).
    let mut traj_of: Vec<(Option<usize>, Option<usize>)> = vec![(None, None); nb];
    for (b, (&sub, v)) in subjects.iter().zip(&visits).enumerate() {
        let scans = data.scans(sub);
        for (target, weight, slot) in [(v.j, 1.0, 0), (v.k, FORECAST_K_WEIGHT as f32, 1)] {
            let Some(t) = target else { continue };
            let dt = delta_t(scans, v.i, t) as f32;
            if slot == 0 {
                traj_of[b].0 = Some(x.traj_src.len());
            } else {
                traj_of[b].1 = Some(x.traj_src.len());
            }
            x.traj_src.push(b as i64);
            x.traj_dt.push(dt);
            push_pred(
                &mut x,
                data,
                sub,
                v.i,
                t,
                Pred {
                    b,
                    weight,
                    t: dt,
                    forecast: true,
                },
                host,
            );
        }
    }
    // Observed encodings for the velocity / acceleration terms.
    let (vel_on, acc_on) = (obj.vel_on(epoch), obj.acc_on(epoch));
    if vel_on || acc_on {
        for (b, (&sub, v)) in subjects.iter().zip(&visits).enumerate() {
            let scans = data.scans(sub);
            let (Some(j), Some(tj)) = (v.j, traj_of[b].0) else {
                continue;
            };
            let enc_j = push_enc(&mut x, (sub, j));
            let dt_ij = delta_t(scans, v.i, j) as f32;
            if vel_on {
                x.vel.push(VelItem {
                    b,
                    traj_j: tj,
                    enc_j,
                    dt_ij,
                });
            }
            if acc_on && let (Some(k), Some(tk)) = (v.k, traj_of[b].1) {
                let enc_k = push_enc(&mut x, (sub, k));
                x.acc.push(AccItem {
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
    x
}

/// The clean forecasts of every subject of `subjects` from its visit 0 over `dts[b]` years (any
/// Δt ≥ 0, also for one-scan subjects): the [`Mode::Forecast`] batch with its trajectories
/// replaced. The target of a forecast (used only by the innovation module's plan) is the visit
/// whose Δt it is, when `targets[b]` names one, else an empty matrix.
pub(crate) fn forecasts_at(
    data: &FoldData,
    subjects: &[usize],
    dts: &[f64],
    targets: &[Option<usize>],
    obj: &ObjectiveConfig,
    s: &Sampling,
) -> ObjectiveInput {
    let mut x = build::<rand_chacha::ChaCha8Rng>(data, subjects, Mode::Forecast, 0, obj, s);
    let nn = x.n * x.n;
    let (f, nb) = (x.f, x.nb);
    x.preds.truncate(nb);
    x.target_raw.truncate(nb * nn);
    x.target_x.truncate(nb * x.n * f);
    x.start_log.truncate(nb * nn);
    x.start_age.truncate(nb);
    x.traj_src.clear();
    x.traj_dt.clear();
    x.vel.clear();
    x.acc.clear();
    // A forecast without a target has a zero matrix for one: not a scan's.
    x.scan_ids = None;
    for (b, (&sub, (&dt, target))) in subjects.iter().zip(dts.iter().zip(targets)).enumerate() {
        let scans = data.scans(sub);
        x.traj_src.push(b as i64);
        x.traj_dt.push(dt as f32);
        match target {
            Some(t) => scans[*t].a_raw.dense_into(&mut x.target_raw),
            None => x.target_raw.extend(std::iter::repeat_n(0.0, nn)),
        }
        x.target_x.extend_from_slice(slice2(&data.x[sub][0]));
        scans[0].log_into(&mut x.start_log);
        x.start_age.push(scans[0].age);
        x.preds.push(Pred {
            b,
            weight: 1.0,
            t: dt as f32,
            forecast: true,
        });
    }
    x
}

/// The scan rows being recorded (a batch built by [`build`] records them).
fn ids(x: &mut ObjectiveInput) -> &mut ScanIds {
    x.scan_ids.get_or_insert_with(ScanIds::default)
}

/// The reconstruction input of visit `i` of subject `sub`: edge dropout on the log SC and
/// Gaussian noise on the z-scored morphology, with the flat indices (in the row) the dropout
/// zeroed (the log SC left empty unless `host`).
fn augmented(
    data: &FoldData,
    sub: usize,
    i: usize,
    rng: &mut impl Rng,
    s: &Sampling,
    host: bool,
) -> (Vec<f32>, Vec<f32>, Vec<usize>) {
    let n = data.n_nodes();
    let scan = &data.scans(sub)[i];
    let mut a = Vec::new();
    let mut dropped = Vec::new();
    if host {
        scan.log_into(&mut a);
    }
    if s.sc_pos_edge_drop_prob > 0.0 {
        let mut raw = scan.a_raw.upper().iter();
        for r in 0..n {
            for c in r + 1..n {
                let v = raw.next().copied().unwrap_or(0.0);
                if v > 0.0 && rng.random::<f64>() < s.sc_pos_edge_drop_prob {
                    dropped.extend([r * n + c, c * n + r]);
                }
            }
        }
    }
    for &k in &dropped {
        if let Some(v) = a.get_mut(k) {
            *v = 0.0;
        }
    }
    let m = slice2(&data.x[sub][i])
        .iter()
        .map(|&v| v + (s.morph_noise_sigma * std_normal(rng)) as f32)
        .collect();
    (a, m, dropped)
}

/// Adds a prediction of visit `target` of subject `sub` from its visit `start`.
fn push_pred(
    x: &mut ObjectiveInput,
    data: &FoldData,
    sub: usize,
    start: usize,
    target: usize,
    pred: Pred,
    host: bool,
) {
    let scans = data.scans(sub);
    if let Some(ids) = x.scan_ids.as_mut() {
        ids.start.push(data.scan_id(sub, start));
        ids.target.push(data.scan_id(sub, target));
    }
    scans[target].a_raw.dense_into(&mut x.target_raw);
    x.target_x.extend_from_slice(slice2(&data.x[sub][target]));
    if host {
        scans[start].log_into(&mut x.start_log);
    }
    x.start_age.push(scans[start].age);
    x.preds.push(pred);
}
