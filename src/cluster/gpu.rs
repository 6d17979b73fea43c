//! The NVIDIA driver as NVML sees it, loaded at run time.
//!
//! `libnvidia-ml.so.1` is opened with `dlopen` through nvml-wrapper, so the binary starts and
//! reports cleanly on machines without a driver. [`DriverProbe`] is plain data: doctor's
//! diagnosis is unit-tested with hand-made probes, and only [`probe_driver`] talks to NVML.

use std::ffi::OsStr;

use nvml_wrapper::Nvml;
use serde::Serialize;

use super::cuda::{ComputeCapability, CudaVersion};
use super::vars::Vars;

/// Path or name of libnvidia-ml to load instead of the defaults.
pub(crate) const NVML_LIB_ENV: &str = "TRAINER_NVML_LIB";

/// Library names tried in order when [`NVML_LIB_ENV`] is unset (the `.so` link only exists
/// where the driver's development files are installed).
pub(crate) const NVML_LIB_NAMES: &[&str] = &["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// What the driver probe found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum DriverProbe {
    /// No usable driver: the library is missing or NVML would not start.
    Absent {
        /// Why, e.g. "libnvidia-ml.so.1: cannot open shared object file".
        reason: String,
    },
    /// NVML is up.
    Present(DriverInfo),
}

impl DriverProbe {
    /// The driver information when present.
    pub fn info(&self) -> Option<&DriverInfo> {
        match self {
            DriverProbe::Present(i) => Some(i),
            DriverProbe::Absent { .. } => None,
        }
    }
}

/// The driver and its GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriverInfo {
    /// Driver version, `550.54.15`.
    pub driver_version: String,
    /// Newest CUDA version the driver supports.
    pub cuda_driver_version: Option<CudaVersion>,
    /// Library that was loaded.
    pub library: String,
    /// Every GPU NVML enumerates (whatever `CUDA_VISIBLE_DEVICES` says).
    pub(crate) gpus: Vec<GpuInfo>,
    /// Queries that failed along the way (reported, never fatal).
    pub errors: Vec<String>,
}

/// One physical GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct GpuInfo {
    /// NVML index (PCI bus order; CUDA uses the same order with `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
    pub index: u32,
    /// Product name, `Tesla V100-SXM2-32GB`.
    pub name: String,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Total memory in bytes.
    pub memory_total_bytes: Option<u64>,
    /// Used memory in bytes.
    pub memory_used_bytes: Option<u64>,
    /// Compute capability.
    pub compute_capability: Option<ComputeCapability>,
    /// MIG state; `None` when the GPU does not support MIG.
    pub mig: Option<MigState>,
    /// Compute processes on the whole GPU, if NVML would say.
    pub compute_processes: Option<u32>,
}

/// MIG mode and instances of one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MigState {
    /// MIG is on now.
    pub enabled: bool,
    /// MIG will be on after the next GPU reset.
    pub pending_enabled: bool,
    /// MIG instances (empty when MIG is off).
    pub instances: Vec<MigInstance>,
}

/// One MIG instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MigInstance {
    /// Index under its parent GPU.
    pub index: u32,
    /// `MIG-...` UUID (or `MIG-GPU-<uuid>/<gi>/<ci>` on older drivers), for `CUDA_VISIBLE_DEVICES`.
    pub uuid: String,
    /// Total memory in bytes.
    pub memory_total_bytes: Option<u64>,
    /// Used memory in bytes.
    pub memory_used_bytes: Option<u64>,
    /// Compute processes in this instance, if NVML would say.
    pub compute_processes: Option<u32>,
}

/// Memory use above which an instance whose processes NVML cannot list counts as busy.
pub(crate) const MIG_BUSY_MEMORY_BYTES: u64 = 256 << 20;

impl MigInstance {
    /// Free when it runs no compute process (or, when processes cannot be listed, when its
    /// memory use is below [`MIG_BUSY_MEMORY_BYTES`]).
    pub(crate) fn is_free(&self) -> bool {
        match self.compute_processes {
            Some(n) => n == 0,
            None => self
                .memory_used_bytes
                .is_some_and(|m| m < MIG_BUSY_MEMORY_BYTES),
        }
    }
}

/// Loads NVML and reads the driver and every GPU. Never panics: any failure is `Absent` or an
/// entry in `errors`.
pub fn probe_driver(vars: &Vars) -> DriverProbe {
    let candidates: Vec<String> = match vars.get(NVML_LIB_ENV) {
        Some(p) => vec![p.to_string()],
        None => NVML_LIB_NAMES.iter().map(|s| s.to_string()).collect(),
    };
    std::panic::catch_unwind(|| probe(&candidates)).unwrap_or_else(|_| DriverProbe::Absent {
        reason: "NVML panicked while loading".into(),
    })
}

fn probe(candidates: &[String]) -> DriverProbe {
    let mut first_reason = None;
    for lib in candidates {
        match Nvml::builder().lib_path(OsStr::new(lib)).init() {
            Ok(nvml) => return DriverProbe::Present(read_driver(&nvml, lib)),
            Err(e) => {
                first_reason.get_or_insert_with(|| absent_reason(lib, &e));
            }
        }
    }
    let mut reason = first_reason.unwrap_or_else(|| "no NVML library to try".into());
    if candidates.len() > 1 {
        reason.push_str(&format!(" (also tried {})", candidates[1..].join(", ")));
    }
    DriverProbe::Absent { reason }
}

/// `libnvidia-ml.so.1: cannot open shared object file: ...` rather than the wrapper's
/// "a libloading error occurred: ..." chain.
fn absent_reason(lib: &str, e: &nvml_wrapper::error::NvmlError) -> String {
    let text = e.to_string();
    let text = text
        .strip_prefix("a libloading error occurred: ")
        .unwrap_or(&text);
    if text.starts_with(lib) {
        text.to_string()
    } else {
        format!("{lib}: {text}")
    }
}

fn read_driver(nvml: &Nvml, lib: &str) -> DriverInfo {
    let mut errors = Vec::new();
    let mut note =
        |what: &str, e: nvml_wrapper::error::NvmlError| errors.push(format!("{what}: {e}"));
    let driver_version = nvml.sys_driver_version().unwrap_or_else(|e| {
        note("driver version", e);
        "unknown".into()
    });
    let cuda_driver_version = match nvml.sys_cuda_driver_version() {
        Ok(v) => CudaVersion::from_int(v),
        Err(e) => {
            note("CUDA driver version", e);
            None
        }
    };
    let count = nvml.device_count().unwrap_or_else(|e| {
        note("device count", e);
        0
    });
    let mut gpus = Vec::new();
    for index in 0..count {
        match nvml.device_by_index(index) {
            Ok(dev) => gpus.push(read_gpu(index, &dev, &mut errors)),
            Err(e) => errors.push(format!("GPU {index}: {e}")),
        }
    }
    DriverInfo {
        driver_version,
        cuda_driver_version,
        library: lib.to_string(),
        gpus,
        errors,
    }
}

fn read_gpu(index: u32, dev: &nvml_wrapper::Device<'_>, errors: &mut Vec<String>) -> GpuInfo {
    let mut ok = |what: &str, r: Result<String, nvml_wrapper::error::NvmlError>| match r {
        Ok(v) => v,
        Err(e) => {
            errors.push(format!("GPU {index} {what}: {e}"));
            "unknown".into()
        }
    };
    let name = ok("name", dev.name());
    let uuid = ok("uuid", dev.uuid());
    let mem = dev.memory_info().ok();
    let compute_capability = dev.cuda_compute_capability().ok().and_then(|c| {
        Some(ComputeCapability {
            major: u32::try_from(c.major).ok()?,
            minor: u32::try_from(c.minor).ok()?,
        })
    });
    let mig = dev.mig_mode().ok().map(|m| {
        let enabled = m.current == 1;
        let instances = if enabled {
            read_mig(index, dev, errors)
        } else {
            Vec::new()
        };
        MigState {
            enabled,
            pending_enabled: m.pending == 1,
            instances,
        }
    });
    GpuInfo {
        index,
        name,
        uuid,
        memory_total_bytes: mem.as_ref().map(|m| m.total),
        memory_used_bytes: mem.as_ref().map(|m| m.used),
        compute_capability,
        mig,
        compute_processes: process_count(dev),
    }
}

fn read_mig(
    parent: u32,
    dev: &nvml_wrapper::Device<'_>,
    errors: &mut Vec<String>,
) -> Vec<MigInstance> {
    let max = match dev.mig_device_count() {
        Ok(n) => n,
        Err(e) => {
            errors.push(format!("GPU {parent} MIG device count: {e}"));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for index in 0..max {
        // Slots may be empty (NotFound); skip them.
        let Ok(mig) = dev.mig_device_by_index(index) else {
            continue;
        };
        let Ok(uuid) = mig.uuid() else {
            errors.push(format!("GPU {parent} MIG {index}: no UUID"));
            continue;
        };
        let mem = mig.memory_info().ok();
        out.push(MigInstance {
            index,
            uuid,
            memory_total_bytes: mem.as_ref().map(|m| m.total),
            memory_used_bytes: mem.as_ref().map(|m| m.used),
            compute_processes: process_count(&mig),
        });
    }
    out
}

fn process_count(dev: &nvml_wrapper::Device<'_>) -> Option<u32> {
    dev.running_compute_processes()
        .ok()
        .map(|p| u32::try_from(p.len()).unwrap_or(u32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_absent_not_a_panic() {
        let vars = Vars::from_pairs([(NVML_LIB_ENV, "/nonexistent/libnvidia-ml.so.1")]);
        match probe_driver(&vars) {
            DriverProbe::Absent { reason } => assert!(reason.contains("/nonexistent"), "{reason}"),
            DriverProbe::Present(_) => panic!("no driver at that path"),
        }
    }

    #[test]
    fn mig_instance_freedom() {
        let mut m = MigInstance {
            index: 0,
            uuid: "MIG-x".into(),
            memory_total_bytes: Some(10 << 30),
            memory_used_bytes: Some(13 << 20),
            compute_processes: Some(0),
        };
        assert!(m.is_free());
        m.compute_processes = Some(1);
        assert!(!m.is_free());
        m.compute_processes = None;
        assert!(m.is_free());
        m.memory_used_bytes = Some(5 << 30);
        assert!(!m.is_free());
    }
}
