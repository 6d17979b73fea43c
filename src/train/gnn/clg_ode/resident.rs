//! Whether a CLG-ODE run holds the cohort's scans on its GPU (issue 74, item 2;
//! `models::clg_ode::objective::resident`), and the cohort as their source.
//!
//! The rule (`--scans-on-device auto`): on a CUDA GPU under `tch` (the backend that stages a batch as one pass), when the
//! scans' log and raw SC (`2 · scans · N² · 4` bytes: 2.8 GB for 1,000 subjects' 2,196 scans at
//! 400 nodes) take at most a quarter of the free memory NVML reports; the batch rule
//! (`cv/batch.rs`) sizes the batch to half of it. Otherwise each step uploads its batch's
//! matrices, as on a CPU, and the start line says why. The scans are the cohort's, the same for
//! every fold: uploaded at the first step, kept for the run.

use std::sync::Arc;

use anyhow::{Result, bail};

use super::super::settings::ScansOnDevice;
use crate::backend::{DeviceSpec, Placement};
use crate::cluster::Vars;
use crate::cluster::gpu_memory::free_memory;
use crate::data::connectome::dataset::Cohort;
use crate::models::clg_ode::objective::resident::{Resident, ScanSource};

/// The share of the GPU's free memory the scans may take.
pub(crate) const RESIDENT_SHARE: f64 = 0.25;

/// The cohort's scans in subject order (the indices of `FoldData::scan_id`).
pub(crate) struct CohortScans {
    cohort: Arc<Cohort>,
    /// `[subject]` its first scan's index.
    offsets: Vec<usize>,
    count: usize,
}

impl CohortScans {
    pub(crate) fn new(cohort: Arc<Cohort>) -> Self {
        Self {
            offsets: cohort.scan_offsets(),
            count: cohort.n_scans(),
            cohort,
        }
    }

    fn scan(&self, id: usize) -> &crate::data::connectome::Scan {
        let sub = self.offsets.partition_point(|&o| o <= id) - 1;
        &self.cohort.subjects[sub].scans[id - self.offsets[sub]]
    }
}

impl ScanSource for CohortScans {
    fn n(&self) -> usize {
        self.cohort.n_nodes
    }

    fn count(&self) -> usize {
        self.count
    }

    fn log_into(&self, id: usize, out: &mut Vec<f32>) {
        self.scan(id).log_into(out);
    }

    fn raw_into(&self, id: usize, out: &mut Vec<f32>) {
        self.scan(id).a_raw.dense_into(out);
    }
}

/// The scans held on the device of `placement` as `choice` says (`auto`: the rule above), or
/// none; `say`: print the decision (the main rank). `on` with a backend that does not stage a
/// batch as one pass is refused.
pub(crate) fn for_placement(
    cohort: &Arc<Cohort>,
    placement: Placement,
    choice: ScansOnDevice,
    say: bool,
) -> Result<Option<Arc<Resident>>> {
    let stages = placement.backend.sorts_on_device();
    if choice == ScansOnDevice::On && !stages {
        bail!(
            "--scans-on-device on applies to --backend tch (the backend that runs a batch as one \
             pass on its device), not to --backend {}",
            placement.backend.name()
        );
    }
    if !stages {
        return Ok(None);
    }
    let source = CohortScans::new(cohort.clone());
    let bytes = Resident::bytes(&source);
    let (held, why) = match (choice, placement.device) {
        (ScansOnDevice::Off, _) => (false, "--scans-on-device off".to_string()),
        (ScansOnDevice::On, _) => (
            true,
            format!("--scans-on-device on: {:.2} GB", bytes as f64 / 1e9),
        ),
        (ScansOnDevice::Auto, DeviceSpec::Cpu) => return Ok(None),
        (ScansOnDevice::Auto, DeviceSpec::Cuda(ordinal)) => {
            let ordinal = u32::try_from(ordinal).unwrap_or(u32::MAX);
            match free_memory(&Vars::from_process(), ordinal) {
                Ok(m) => (
                    bytes as f64 <= RESIDENT_SHARE * m.free as f64,
                    format!(
                        "{:.2} GB against a quarter of the {:.1} GB free on {}",
                        bytes as f64 / 1e9,
                        m.free as f64 / 1e9,
                        m.what
                    ),
                ),
                Err(reason) => (
                    false,
                    format!("the GPU's free memory is unknown ({reason})"),
                ),
            }
        }
    };
    if say {
        let (n, place) = (source.count, placement.device);
        if held {
            eprintln!(
                "[train-gnn] the cohort's {n} scans held on {place} ({why}): a step uploads its \
                 index lists, not its matrices"
            );
        } else {
            eprintln!(
                "[train-gnn] the cohort's {n} scans not held on {place} ({why}): each step \
                 uploads its batch's matrices"
            );
        }
    }
    Ok(held.then(|| Arc::new(Resident::new(Arc::new(source)))))
}
