//! The cohort's scans held on the device for a fold (issue 74, item 2): every scan's log SC
//! and raw SC, `[S,N,N]` each, uploaded once, so that a step's encoder inputs, start visits and
//! targets are gathered there by scan index instead of being copied into the step's upload.
//! A batch then uploads its index lists and small values only ([`super::staged`]).
//!
//! Exact: a gathered row is the scan's matrix as the host builds it (its log computed on the
//! host, `f32::ln_1p`, as [`crate::data::connectome::SymMatrix::log_into`]); an augmented
//! encoder row's dropped edges are set to +0.0 on the device (`x + (−x)` at their flat
//! indices), as the host's edge dropout writes them (the log of a positive edge is finite).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use burn::prelude::*;
use burn::tensor::{IndexingUpdateOp, TensorData};

use super::Objective;
use super::input::ObjectiveInput;

/// Where the scans come from: the training layer's cohort, by scan index.
pub(crate) trait ScanSource: Send + Sync {
    /// N.
    fn n(&self) -> usize;
    /// How many scans (indices `0..count`).
    fn count(&self) -> usize;
    /// Appends scan `id`'s log SC (`log1p` of the raw), N×N row-major.
    fn log_into(&self, id: usize, out: &mut Vec<f32>);
    /// Appends scan `id`'s raw SC, N×N row-major.
    fn raw_into(&self, id: usize, out: &mut Vec<f32>);
}

/// A fold's scans on the device, made on first use per backend (two uploads), then reused.
pub(crate) struct Resident {
    source: Arc<dyn ScanSource>,
    made: Mutex<HashMap<TypeId, Box<dyn Any + Send>>>,
}

impl std::fmt::Debug for Resident {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Resident({} scans of N = {})",
            self.source.count(),
            self.source.n()
        )
    }
}

/// The log and raw SC of every scan `[S,N,N]`, on one backend.
#[derive(Clone)]
pub(crate) struct Scans<B: Backend> {
    pub log: Tensor<B, 3>,
    pub raw: Tensor<B, 3>,
}

impl Resident {
    pub(crate) fn new(source: Arc<dyn ScanSource>) -> Self {
        Self {
            source,
            made: Mutex::default(),
        }
    }

    /// Bytes held on a device: two `[S,N,N]` f32 tensors.
    pub(crate) fn bytes(source: &dyn ScanSource) -> u64 {
        let n = source.n() as u64;
        2 * source.count() as u64 * n * n * 4
    }

    /// The scans on `B` (uploaded the first time `B` asks; one device per backend type).
    pub(crate) fn scans<B: Backend>(&self, device: &B::Device) -> Scans<B> {
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = made
            .get(&TypeId::of::<Scans<B>>())
            .and_then(|s| s.downcast_ref::<Scans<B>>())
        {
            return s.clone();
        }
        let (n, count) = (self.source.n(), self.source.count());
        let upload = |into: &dyn Fn(usize, &mut Vec<f32>)| {
            let mut v = Vec::with_capacity(count * n * n);
            for id in 0..count {
                into(id, &mut v);
            }
            Tensor::<B, 3>::from_data(TensorData::new(v, [count, n, n]), device)
        };
        let s = Scans {
            log: upload(&|id, v| self.source.log_into(id, v)),
            raw: upload(&|id, v| self.source.raw_into(id, v)),
        };
        made.insert(TypeId::of::<Scans<B>>(), Box::new(s.clone()));
        s
    }
}

/// The rows `ids` of `scans` (`[S,N,N]` → `[len,N,N]`).
pub(crate) fn gather<B: Backend>(scans: &Tensor<B, 3>, ids: Tensor<B, 1, Int>) -> Tensor<B, 3> {
    scans.clone().select(0, ids)
}

/// `rows` with the entries at the flat indices `dropped` set to +0.0 (finite values).
pub(crate) fn drop_edges<B: Backend>(
    rows: Tensor<B, 3>,
    dropped: Option<Tensor<B, 1, Int>>,
) -> Tensor<B, 3> {
    let Some(dropped) = dropped else {
        return rows;
    };
    let shape = rows.dims();
    let flat = rows.reshape([shape.iter().product::<usize>()]);
    let minus = flat.clone().select(0, dropped.clone()).neg();
    flat.select_assign(0, dropped, minus, IndexingUpdateOp::Add)
        .reshape(shape)
}

/// The start visits' log SC on the host, row `p` for prediction `p`.
pub(crate) enum StartLogs<'a> {
    /// The batch's own copy.
    Batch(&'a ObjectiveInput),
    /// Made from the scans once a batch (`[P·N·N]`, N), for a batch built without its copy
    /// (its encoder inputs and start visits gathered on the device).
    Scans(Arc<Vec<f32>>, usize),
}

impl StartLogs<'_> {
    pub(crate) fn row(&self, p: usize) -> &[f32] {
        match self {
            StartLogs::Batch(x) => x.start(p),
            StartLogs::Scans(v, n) => &v[p * n * n..(p + 1) * n * n],
        }
    }
}

/// The start visits' log SC on the host: the batch's copy, or the scans' logs, made the first
/// time a pass of the batch asks and kept with its uploads.
pub(crate) fn start_logs<'a>(obj: &Objective, x: &'a ObjectiveInput) -> StartLogs<'a> {
    if !x.start_log.is_empty() || x.n_preds() == 0 {
        return StartLogs::Batch(x);
    }
    let (Some(held), Some(ids)) = (obj.resident.as_ref(), x.scan_ids.as_ref()) else {
        unreachable!("a batch without host start visits is built only with the scans held")
    };
    let logs = x.uploaded("start_log_host", || {
        let mut v = Vec::with_capacity(ids.start.len() * x.n * x.n);
        for &id in &ids.start {
            held.source.log_into(id as usize, &mut v);
        }
        Arc::new(v)
    });
    StartLogs::Scans(logs, x.n)
}
