//! What the objective scores, on the host: the encoder inputs of a batch, the forecasts to
//! integrate, and for every prediction (reconstructions first, then forecasts) its target, its
//! start visit and its weight. The training layer builds it from the cohort.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use burn::prelude::*;
use burn::tensor::TensorData;

/// A velocity item: subject `b`, its i→j trajectory, the encoder row of visit j, Δt_ij.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VelItem {
    pub b: usize,
    pub traj_j: usize,
    pub enc_j: usize,
    pub dt_ij: f32,
}

/// An acceleration item (subjects with a visit k).
#[derive(Debug, Clone, Copy)]
pub(crate) struct AccItem {
    pub b: usize,
    pub traj_j: usize,
    pub traj_k: usize,
    pub enc_j: usize,
    pub enc_k: usize,
    pub dt_ij: f32,
    pub dt_jk: f32,
}

/// One prediction: a reconstruction of the start visit (`t` = 0) or a forecast.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Pred {
    /// The subject (batch row).
    pub b: usize,
    /// 1, or 0.5 for the i→k forecast.
    pub weight: f32,
    /// Time since the start visit (0 for a reconstruction), years.
    pub t: f32,
    pub forecast: bool,
}

/// A batch's rows by scan index, beside the host values they equal (the scans held on the
/// device: [`super::resident`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ScanIds {
    /// The scan of every encoder row (`enc_a`'s rows).
    pub enc: Vec<i64>,
    /// Flat indices into `enc_a` (`[rows·N·N]`) set to 0 by the edge dropout of an augmented
    /// reconstruction input (both halves of each dropped edge).
    pub dropped: Vec<i64>,
    /// Per prediction: the scan of its start visit and of its target.
    pub start: Vec<i64>,
    pub target: Vec<i64>,
}

/// A batch on the host.
#[derive(Debug, Clone, Default)]
pub(crate) struct ObjectiveInput {
    /// The tensors made of this batch so far ([`ObjectiveInput::uploaded`]).
    pub uploads: Uploads,
    pub nb: usize,
    pub n: usize,
    pub f: usize,
    /// Encoder inputs, `[rows, N, N]` and `[rows, N, F]`: rows `0..nb` are the clean start
    /// visits; then the (augmented) reconstruction inputs and the observed visits j/k of the
    /// velocity and acceleration terms.
    pub enc_a: Vec<f32>,
    pub enc_x: Vec<f32>,
    pub enc_rows: usize,
    /// The encoder row each reconstruction decodes (one per subject).
    pub d_rows: Vec<i64>,
    pub sex: Vec<i64>,
    pub site: Vec<i64>,
    /// `[nb, numeric_dim]` covariates of the start visits.
    pub numeric: Vec<f32>,
    pub numeric_dim: usize,
    /// Forecast trajectories: the subject and Δt of each.
    pub traj_src: Vec<i64>,
    pub traj_dt: Vec<f32>,
    /// Reconstructions (one per subject, in subject order), then the trajectories' forecasts.
    pub preds: Vec<Pred>,
    /// Per prediction: the target's z-scored morphology `[P,N,F]`, raw SC `[P,N,N]`, and the
    /// start visit's log-domain SC `[P,N,N]`.
    pub target_x: Vec<f32>,
    pub target_raw: Vec<f32>,
    pub start_log: Vec<f32>,
    /// Per prediction: the start visit's age (years; the visit index without a subject table).
    pub start_age: Vec<f64>,
    pub vel: Vec<VelItem>,
    pub acc: Vec<AccItem>,
    /// The scan behind every `enc_a`, `start_log` and `target_raw` row, where each is one
    /// ([`super::resident`]); none where a row is not a scan's.
    pub scan_ids: Option<ScanIds>,
}

/// The tensors of one batch, each uploaded once however many passes score it (GradNorm's
/// three parts and the kept integration of a step read the same inputs): keyed by what they
/// hold and their type (backend, rank, kind). A batch is scored on one device. A clone starts
/// empty.
#[derive(Default)]
pub(crate) struct Uploads(Mutex<HashMap<UploadKey, Box<dyn Any + Send>>>);

/// What a tensor holds, and its type.
type UploadKey = (&'static str, TypeId);

impl Clone for Uploads {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for Uploads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().map_or(0, |m| m.len());
        write!(f, "Uploads({held} tensors)")
    }
}

impl ObjectiveInput {
    /// The tensor `what` of this batch: made by `make` the first time it is asked for (with
    /// this type), then the same tensor again.
    pub(crate) fn uploaded<T: Clone + Send + 'static>(
        &self,
        what: &'static str,
        make: impl FnOnce() -> T,
    ) -> T {
        // The map holds finished values only, so one left by a panicking thread is whole.
        if let Some(t) = self.held::<T>(what) {
            return t;
        }
        let t = make();
        let mut map = self
            .uploads
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        map.insert((what, TypeId::of::<T>()), Box::new(t.clone()));
        t
    }

    /// The value `what` of type `T` made for this batch so far, if any.
    pub(crate) fn held<T: Clone + 'static>(&self, what: &'static str) -> Option<T> {
        self.uploads
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(what, TypeId::of::<T>()))
            .and_then(|t| t.downcast_ref::<T>())
            .cloned()
    }

    pub(crate) fn n_preds(&self) -> usize {
        self.preds.len()
    }

    /// The raw target of prediction `p`, row-major N×N.
    pub(crate) fn target(&self, p: usize) -> &[f32] {
        let nn = self.n * self.n;
        &self.target_raw[p * nn..(p + 1) * nn]
    }

    /// The start visit's log SC of prediction `p`, row-major N×N.
    pub(crate) fn start(&self, p: usize) -> &[f32] {
        let nn = self.n * self.n;
        &self.start_log[p * nn..(p + 1) * nn]
    }

    /// Positive upper-triangle entries of prediction `p`'s target (k of the top-k).
    pub(crate) fn npos(&self, p: usize) -> usize {
        let (n, t) = (self.n, self.target(p));
        (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .filter(|&(i, j)| t[i * n + j] > 0.0)
            .count()
    }
}

pub(crate) fn t1<B: Backend>(v: Vec<f32>, device: &B::Device) -> Tensor<B, 1> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

pub(crate) fn i1<B: Backend>(v: Vec<i64>, device: &B::Device) -> Tensor<B, 1, Int> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), device)
}

pub(crate) fn t3<B: Backend>(v: Vec<f32>, shape: [usize; 3], device: &B::Device) -> Tensor<B, 3> {
    Tensor::from_data(TensorData::new(v, shape), device)
}

/// A tensor's values on the host as f32.
#[track_caller]
pub(crate) fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    crate::host_reads::f32s(t)
}
