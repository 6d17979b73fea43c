//! What every epoch of a run shares ([`Ctx`]): built by [`super::run`], read by the epochs
//! ([`super::epoch`]).

use std::path::PathBuf;

use burn::tensor::backend::AutodiffBackend;

use super::graph::CaptureFactory;
use super::retention::Removed;
use super::{JobSpec, RunSettings};
use crate::dist::Collective;
use crate::outputs::metrics::MetricsFiles;
use crate::toolbox::ddp::CommStats;

/// What every epoch of a run shares.
pub(super) struct Ctx<'a, B: AutodiffBackend> {
    pub spec: JobSpec,
    pub tag: String,
    pub comm: &'a dyn Collective,
    pub device: &'a B::Device,
    pub run: &'a RunSettings,
    pub run_dir: PathBuf,
    pub metrics: MetricsFiles,
    /// The resolved configuration, stored in every checkpoint's metadata.
    pub config: String,
    pub comm_stats: CommStats,
    /// Optimiser steps taken by this process (for `--stop-after-steps`).
    pub steps_here: u64,
    /// The checkpoint this process resumed from (never removed).
    pub resumed_from: Option<PathBuf>,
    /// Epoch files removed by this process (`--keep-checkpoints best-last`).
    pub removed: Removed,
    /// `--cuda-graph`: the backend's capture of a step (`super::graph`).
    pub capture: Option<CaptureFactory<B::InnerBackend>>,
}

impl<B: AutodiffBackend> Ctx<'_, B> {
    pub(super) fn main(&self) -> bool {
        self.comm.rank() == 0
    }

    /// The device, as the inner (non-autodiff) backend names it (the same type).
    pub(super) fn device_inner(&self) -> &<B::InnerBackend as burn_backend::BackendTypes>::Device {
        self.device
    }
}
