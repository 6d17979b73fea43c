//! A batch's host values on the device in two uploads a step (issue 74, item 2): every float
//! input the objective reads (encoder inputs, start visits, targets, intervals, weights, the
//! topology loss's thresholds, target values and probes) in one tensor, every index list in
//! another, each input then a slice of them (a view on LibTorch: no copy, no launch). Made once a
//! step for the backend the forecasts are integrated on and wrapped, not uploaded again, for the
//! autodiff backend the parts are scored on ([`stage`]). Without a staged pack, each input is
//! uploaded on its own when first read; the values are the same either way.
//!
//! Each input is named here once ([`Floats`], [`Ints`]) with the host values it holds, so the
//! pack and a lone upload cannot disagree.

use std::sync::Arc;

use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use rayon::prelude::*;

use super::Objective;
use super::input::{ObjectiveInput, ScanIds};
use super::resident::{drop_edges, gather};
use super::topology;

/// A float input of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Floats {
    /// The encoder rows' log SC `[R,N,N]` and morphology `[R,N,F]`.
    EncA,
    EncX,
    /// Per prediction: the start visit's log SC, the target's morphology and raw SC.
    StartLog,
    TargetX,
    TargetRaw,
    /// `[nb, numeric_dim]` covariates of the start visits.
    Numeric,
    /// Per forecast trajectory, its Δt.
    TrajDt,
    /// Per prediction, its time since the start visit and its weight.
    PredT,
    PredWeight,
    /// Per velocity item its Δt; per acceleration item Δt_ij and Δt_jk.
    VelDt,
    AccDtIj,
    AccDtJk,
    /// The topology loss ([`TopoPlan`]): per prediction with thresholds and per threshold,
    /// sharpness × threshold and the target's β0 and β1; the predictions' weights; the probes.
    TopoShift,
    TopoBeta0,
    TopoBeta1,
    TopoWeight,
    Probes,
}

impl Floats {
    const ALL: [Floats; 17] = [
        Floats::EncA,
        Floats::EncX,
        Floats::StartLog,
        Floats::TargetX,
        Floats::TargetRaw,
        Floats::Numeric,
        Floats::TrajDt,
        Floats::PredT,
        Floats::PredWeight,
        Floats::VelDt,
        Floats::AccDtIj,
        Floats::AccDtJk,
        Floats::TopoShift,
        Floats::TopoBeta0,
        Floats::TopoBeta1,
        Floats::TopoWeight,
        Floats::Probes,
    ];

    /// The input's values. The topology's come from the batch's plan ([`topo_plan`], made
    /// before they are read); none without one.
    pub(crate) fn host(self, x: &ObjectiveInput) -> Vec<f32> {
        let plan = || x.held::<Option<Arc<TopoPlan>>>("topo_plan").flatten();
        let topo = |f: &dyn Fn(&TopoPlan) -> Vec<f32>| plan().map_or_else(Vec::new, |p| f(&p));
        match self {
            Floats::EncA => x.enc_a.clone(),
            Floats::EncX => x.enc_x.clone(),
            Floats::StartLog => x.start_log.clone(),
            Floats::TargetX => x.target_x.clone(),
            Floats::TargetRaw => x.target_raw.clone(),
            Floats::Numeric => x.numeric.clone(),
            Floats::TrajDt => x.traj_dt.clone(),
            Floats::PredT => x.preds.iter().map(|q| q.t).collect(),
            Floats::PredWeight => x.preds.iter().map(|q| q.weight).collect(),
            Floats::VelDt => x.vel.iter().map(|v| v.dt_ij).collect(),
            Floats::AccDtIj => x.acc.iter().map(|v| v.dt_ij).collect(),
            Floats::AccDtJk => x.acc.iter().map(|v| v.dt_jk).collect(),
            Floats::TopoShift => topo(&|p| p.sides.0.clone()),
            Floats::TopoBeta0 => topo(&|p| p.sides.1.clone()),
            Floats::TopoBeta1 => topo(&|p| p.sides.2.clone()),
            Floats::TopoWeight => topo(&|p| p.rows.iter().map(|&q| x.preds[q].weight).collect()),
            Floats::Probes => topo(&|p| p.probes.clone()),
        }
    }

    /// Whether the input is gathered from the scans held on the device when they are.
    fn by_scan(self) -> bool {
        matches!(self, Floats::EncA | Floats::StartLog | Floats::TargetRaw)
    }

    fn name(self) -> &'static str {
        match self {
            Floats::EncA => "enc_a",
            Floats::EncX => "enc_x",
            Floats::StartLog => "start_log",
            Floats::TargetX => "target_x",
            Floats::TargetRaw => "target_raw",
            Floats::Numeric => "numeric",
            Floats::TrajDt => "traj_dt",
            Floats::PredT => "t",
            Floats::PredWeight => "weights",
            Floats::VelDt => "vel_dt",
            Floats::AccDtIj => "acc_dt_ij",
            Floats::AccDtJk => "acc_dt_jk",
            Floats::TopoShift => "topo_shift",
            Floats::TopoBeta0 => "topo_beta0",
            Floats::TopoBeta1 => "topo_beta1",
            Floats::TopoWeight => "topo_weight",
            Floats::Probes => "probes",
        }
    }
}

/// An index list of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ints {
    /// The encoder row each reconstruction decodes.
    DecodeRows,
    Sex,
    Site,
    /// The subject of each forecast trajectory.
    TrajSubject,
    /// Per velocity item: its trajectory, subject and the encoder row of visit j.
    VelTraj,
    VelSubject,
    VelEnc,
    /// Per acceleration item: its trajectories j and k, subject, encoder rows of j and k.
    AccTrajJ,
    AccTrajK,
    AccSubject,
    AccEncJ,
    AccEncK,
    /// With the scans on the device ([`super::resident`]): the scan of every encoder row, the
    /// flat indices the edge dropout zeroes, the scan of every prediction's start and target.
    EncScan,
    Dropped,
    StartScan,
    TargetScan,
}

impl Ints {
    const ALL: [Ints; 16] = [
        Ints::DecodeRows,
        Ints::Sex,
        Ints::Site,
        Ints::TrajSubject,
        Ints::VelTraj,
        Ints::VelSubject,
        Ints::VelEnc,
        Ints::AccTrajJ,
        Ints::AccTrajK,
        Ints::AccSubject,
        Ints::AccEncJ,
        Ints::AccEncK,
        Ints::EncScan,
        Ints::Dropped,
        Ints::StartScan,
        Ints::TargetScan,
    ];

    /// Whether the list indexes the scans held on the device (staged only with them).
    fn by_scan(self) -> bool {
        matches!(
            self,
            Ints::EncScan | Ints::Dropped | Ints::StartScan | Ints::TargetScan
        )
    }

    pub(crate) fn host(self, x: &ObjectiveInput) -> Vec<i64> {
        let vel = |f: fn(&super::VelItem) -> usize| x.vel.iter().map(|v| f(v) as i64).collect();
        let acc = |f: fn(&super::AccItem) -> usize| x.acc.iter().map(|v| f(v) as i64).collect();
        let ids = |f: fn(&ScanIds) -> &Vec<i64>| {
            x.scan_ids.as_ref().map_or_else(Vec::new, |s| f(s).clone())
        };
        match self {
            Ints::DecodeRows => x.d_rows.clone(),
            Ints::Sex => x.sex.clone(),
            Ints::Site => x.site.clone(),
            Ints::TrajSubject => x.traj_src.clone(),
            Ints::VelTraj => vel(|v| v.traj_j),
            Ints::VelSubject => vel(|v| v.b),
            Ints::VelEnc => vel(|v| v.enc_j),
            Ints::AccTrajJ => acc(|v| v.traj_j),
            Ints::AccTrajK => acc(|v| v.traj_k),
            Ints::AccSubject => acc(|v| v.b),
            Ints::AccEncJ => acc(|v| v.enc_j),
            Ints::AccEncK => acc(|v| v.enc_k),
            Ints::EncScan => ids(|s| &s.enc),
            Ints::Dropped => ids(|s| &s.dropped),
            Ints::StartScan => ids(|s| &s.start),
            Ints::TargetScan => ids(|s| &s.target),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Ints::DecodeRows => "d_rows",
            Ints::Sex => "sex",
            Ints::Site => "site",
            Ints::TrajSubject => "traj_src",
            Ints::VelTraj => "vel_traj",
            Ints::VelSubject => "vel_subject",
            Ints::VelEnc => "vel_enc",
            Ints::AccTrajJ => "acc_traj_j",
            Ints::AccTrajK => "acc_traj_k",
            Ints::AccSubject => "acc_subject",
            Ints::AccEncJ => "acc_enc_j",
            Ints::AccEncK => "acc_enc_k",
            Ints::EncScan => "enc_scan",
            Ints::Dropped => "dropped",
            Ints::StartScan => "start_scan",
            Ints::TargetScan => "target_scan",
        }
    }
}

/// The topology loss's host side of a batch: the predictions whose targets have thresholds,
/// and for them, in order, per threshold: sharpness × threshold, the target's β0 and β1 (as f32,
/// what [`topology::raw_loss`] uploads), with the probes `[V,N]`.
#[derive(Debug)]
pub(crate) struct TopoPlan {
    pub rows: Vec<usize>,
    pub sides: (Vec<f32>, Vec<f32>, Vec<f32>),
    pub probes: Vec<f32>,
}

/// The batch's topology plan (`None` when the term is off or no target has thresholds), made
/// once a batch. The target sides are computed once a run ([`super::target_sides`]).
pub(crate) fn topo_plan(obj: &Objective, x: &ObjectiveInput) -> Option<Arc<TopoPlan>> {
    x.uploaded("topo_plan", || {
        if !obj.cfg.topo_on() {
            return None;
        }
        let (n, t) = (x.n, &obj.cfg.topology);
        let probes = obj
            .fixed_probes
            .clone()
            .unwrap_or_else(|| topology::probes(obj.seed, t.probes, n));
        let probes64: Vec<f64> = probes.iter().map(|&v| v as f64).collect();
        // Independent per prediction and per threshold, the longest serial stretch of a step
        // on the host (the Taylor series over N² per threshold), and the same every epoch.
        let sides: Vec<_> = (0..x.n_preds())
            .into_par_iter()
            .map(|q| obj.target_sides.side(x.target(q), n, &probes64, t))
            .collect();
        let (mut rows, mut taus, mut target) = (Vec::new(), Vec::new(), Vec::new());
        for (q, side) in sides.into_iter().enumerate() {
            if let Some(side) = side {
                taus.extend_from_slice(&side.0);
                target.extend_from_slice(&side.1);
                rows.push(q);
            }
        }
        (!rows.is_empty()).then(|| {
            Arc::new(TopoPlan {
                rows,
                sides: topology::raw_sides(&taus, &target, n, t),
                probes,
            })
        })
    })
}

/// Where each staged input sits in its pack.
#[derive(Debug, Default)]
struct Layout {
    floats: Vec<(Floats, usize, usize)>,
    ints: Vec<(Ints, usize, usize)>,
}

/// A batch's staged inputs on one backend.
#[derive(Clone)]
pub(crate) struct Pack<B: Backend> {
    floats: Tensor<B, 1>,
    ints: Option<Tensor<B, 1, Int>>,
    layout: Arc<Layout>,
}

impl<B: Backend> Pack<B> {
    pub(crate) fn floats(&self, which: Floats) -> Option<Tensor<B, 1>> {
        let &(_, at, len) = self.layout.floats.iter().find(|(w, ..)| *w == which)?;
        Some(self.floats.clone().narrow(0, at, len))
    }

    pub(crate) fn ints(&self, which: Ints) -> Option<Tensor<B, 1, Int>> {
        let &(_, at, len) = self.layout.ints.iter().find(|(w, ..)| *w == which)?;
        Some(self.ints.as_ref()?.clone().narrow(0, at, len))
    }
}

/// Stages `x`'s inputs (two uploads) on `B`'s inner backend and wraps them for `B`, when
/// [`Objective::targets_on_device`] (backends that score a batch in one pass); a no-op
/// otherwise or when already staged.
pub(crate) fn stage<B: AutodiffBackend>(obj: &Objective, x: &ObjectiveInput, device: &B::Device) {
    if !obj.targets_on_device || x.held::<Pack<B>>("pack").is_some() {
        return;
    }
    topo_plan(obj, x);
    let resident = obj.resident.as_ref().filter(|_| x.scan_ids.is_some());
    let mut layout = Layout::default();
    let mut floats = Vec::new();
    for which in Floats::ALL {
        if resident.is_some() && which.by_scan() {
            continue;
        }
        let v = which.host(x);
        if !v.is_empty() {
            layout.floats.push((which, floats.len(), v.len()));
            floats.extend_from_slice(&v);
        }
    }
    let mut ints = Vec::new();
    for which in Ints::ALL {
        if resident.is_none() && which.by_scan() {
            continue;
        }
        let v = which.host(x);
        if !v.is_empty() {
            layout.ints.push((which, ints.len(), v.len()));
            ints.extend_from_slice(&v);
        }
    }
    let (nf, ni) = (floats.len(), ints.len());
    let inner = Pack::<B::InnerBackend> {
        floats: Tensor::from_data(TensorData::new(floats, [nf]), device),
        ints: (ni > 0).then(|| Tensor::from_data(TensorData::new(ints, [ni]), device)),
        layout: Arc::new(layout),
    };
    let outer = Pack::<B> {
        floats: Tensor::from_inner(inner.floats.clone()),
        ints: inner.ints.clone().map(Tensor::from_inner),
        layout: inner.layout.clone(),
    };
    if let Some(resident) = resident {
        let scans = resident.scans::<B::InnerBackend>(device);
        let ids = |which| inner.ints(which);
        let gathered = [
            (
                Floats::EncA,
                ids(Ints::EncScan).map(|i| gather(&scans.log, i)),
            ),
            (
                Floats::StartLog,
                ids(Ints::StartScan).map(|i| gather(&scans.log, i)),
            ),
            (
                Floats::TargetRaw,
                ids(Ints::TargetScan).map(|i| gather(&scans.raw, i)),
            ),
        ];
        for (which, t) in gathered {
            // An empty list (no such rows) is not staged: its reader uploads nothing either.
            let Some(t) = t else { continue };
            let t = match which {
                Floats::EncA => drop_edges(t, ids(Ints::Dropped)),
                _ => t,
            };
            x.uploaded(which.name(), || t.clone());
            x.uploaded(which.name(), || Tensor::<B, 3>::from_inner(t));
        }
    }
    x.uploaded("pack", || inner);
    x.uploaded("pack", || outer);
}

impl ObjectiveInput {
    /// The float input `which` shaped `shape`: a slice of the staged pack ([`stage`]), else
    /// uploaded; once a batch either way.
    pub(crate) fn floats<B: Backend, const D: usize>(
        &self,
        which: Floats,
        shape: [usize; D],
        device: &B::Device,
    ) -> Tensor<B, D> {
        self.uploaded(which.name(), || {
            match self.held::<Pack<B>>("pack").and_then(|p| p.floats(which)) {
                Some(t) => t.reshape(shape),
                None => Tensor::from_data(TensorData::new(which.host(self), shape), device),
            }
        })
    }

    /// The index list `which`: a slice of the staged pack, else uploaded; once a batch.
    pub(crate) fn ints<B: Backend>(&self, which: Ints, device: &B::Device) -> Tensor<B, 1, Int> {
        self.uploaded(which.name(), || {
            match self.held::<Pack<B>>("pack").and_then(|p| p.ints(which)) {
                Some(t) => t,
                None => {
                    let v = which.host(self);
                    let n = v.len();
                    Tensor::from_data(TensorData::new(v, [n]), device)
                }
            }
        })
    }
}
