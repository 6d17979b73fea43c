//! The free memory of the GPU a run's `cuda:N` lands on, as NVML reports it: what a job sizes
//! its default batch from (`train-gnn --model clg-ode` on a GPU, docs/guide/forecasts.md).
//!
//! `cuda:N` is the N-th entry of `CUDA_VISIBLE_DEVICES` (every GPU when it is unset). An entry
//! named by UUID (`GPU-…`, or `MIG-…` for a MIG instance) is matched exactly; an index is
//! taken as NVML's index, which is CUDA's order under `CUDA_DEVICE_ORDER=PCI_BUS_ID` (Slurm's
//! and LSF's lists are written so). Where CUDA might order the GPUs otherwise (no
//! `PCI_BUS_ID`, GPUs of different sizes), the smallest free memory among the visible GPUs is
//! taken: a batch sized for the smaller GPU also fits the larger.

use super::gpu::{DriverInfo, DriverProbe, GpuInfo, probe_driver};
use super::vars::Vars;
use super::visible_devices::{DeviceId, VisibleDevices, VisibleForm};

/// The memory of one GPU (or MIG instance), and which it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GpuMemory {
    /// Free bytes (total − used) when it was read.
    pub free: u64,
    /// Total bytes.
    pub total: u64,
    /// Which device, for the log: `GPU 0 (NVIDIA H200)`.
    pub what: String,
}

/// The free memory behind `cuda:<ordinal>` on this machine, or why it is not known.
pub(crate) fn free_memory(vars: &Vars, ordinal: u32) -> Result<GpuMemory, String> {
    match probe_driver(vars) {
        DriverProbe::Absent { reason } => Err(format!("NVML is not available ({reason})")),
        DriverProbe::Present(info) => {
            let same_order = vars.get("CUDA_DEVICE_ORDER") == Some("PCI_BUS_ID");
            memory_of(&info, &VisibleDevices::from_vars(vars), ordinal, same_order)
        }
    }
}

/// [`free_memory`] from a probe already read (unit-tested with hand-made probes).
/// `pci_order`: CUDA numbers the GPUs as NVML does (`CUDA_DEVICE_ORDER=PCI_BUS_ID`).
pub(crate) fn memory_of(
    info: &DriverInfo,
    visible: &VisibleDevices,
    ordinal: u32,
    pci_order: bool,
) -> Result<GpuMemory, String> {
    let whole = |g: &GpuInfo| -> Result<GpuMemory, String> {
        if g.mig.as_ref().is_some_and(|m| m.enabled) {
            return Err(format!(
                "GPU {} is in MIG mode and CUDA_VISIBLE_DEVICES does not name an instance",
                g.index
            ));
        }
        match (g.memory_total_bytes, g.memory_used_bytes) {
            (Some(total), Some(used)) => Ok(GpuMemory {
                free: total.saturating_sub(used),
                total,
                what: format!("GPU {} ({})", g.index, g.name),
            }),
            _ => Err(format!("NVML did not report GPU {}'s memory", g.index)),
        }
    };
    let by_index = |i: u32| {
        info.gpus
            .iter()
            .find(|g| g.index == i)
            .ok_or_else(|| format!("NVML lists no GPU {i}"))
    };
    // The smallest of `candidates` when CUDA's order may not be NVML's.
    let smallest = |candidates: Vec<&GpuInfo>| -> Result<GpuMemory, String> {
        let all: Vec<GpuMemory> = candidates
            .into_iter()
            .map(whole)
            .collect::<Result<_, _>>()?;
        let mut it = all.into_iter();
        let first = it.next().ok_or("NVML lists no GPU")?;
        let same = |a: &GpuMemory, b: &GpuMemory| a.total == b.total;
        Ok(it.fold(first, |min, g| {
            let uneven = !same(&min, &g);
            let mut m = if g.free < min.free { g } else { min };
            if uneven && !m.what.contains("smallest") {
                m.what.push_str(", the smallest free of the visible GPUs");
            }
            m
        }))
    };
    let position = usize::try_from(ordinal).unwrap_or(usize::MAX);
    match visible.form {
        VisibleForm::Hidden => Err("CUDA_VISIBLE_DEVICES hides every GPU".into()),
        VisibleForm::Unset if pci_order => whole(by_index(ordinal)?),
        VisibleForm::Unset => smallest(info.gpus.iter().collect()),
        _ => match visible.devices.get(position) {
            None => Err(format!(
                "cuda:{ordinal} is not among CUDA_VISIBLE_DEVICES ({})",
                visible.describe()
            )),
            Some(DeviceId::Index(i)) if pci_order || visible.devices.len() == 1 => {
                whole(by_index(*i)?)
            }
            Some(DeviceId::Index(_)) => {
                let listed: Vec<&GpuInfo> = visible
                    .devices
                    .iter()
                    .filter_map(|d| match d {
                        DeviceId::Index(i) => info.gpus.iter().find(|g| g.index == *i),
                        _ => None,
                    })
                    .collect();
                smallest(listed)
            }
            Some(DeviceId::GpuUuid(u)) => {
                let g = info
                    .gpus
                    .iter()
                    .find(|g| g.uuid.starts_with(u.as_str()))
                    .ok_or_else(|| format!("NVML lists no GPU {u}"))?;
                whole(g)
            }
            Some(DeviceId::MigUuid(u)) => info
                .gpus
                .iter()
                .filter_map(|g| Some((g, g.mig.as_ref()?)))
                .flat_map(|(g, m)| m.instances.iter().map(move |i| (g, i)))
                .find(|(_, i)| &i.uuid == u || u.ends_with(&i.uuid) || i.uuid.ends_with(u))
                .ok_or_else(|| format!("NVML lists no MIG instance {u}"))
                .and_then(|(g, i)| match (i.memory_total_bytes, i.memory_used_bytes) {
                    (Some(total), Some(used)) => Ok(GpuMemory {
                        free: total.saturating_sub(used),
                        total,
                        what: format!("MIG {} of GPU {} ({})", i.index, g.index, g.name),
                    }),
                    _ => Err(format!("NVML did not report MIG instance {u}'s memory")),
                }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::gpu::{MigInstance, MigState};

    const GB: u64 = 1 << 30;

    fn gpu(index: u32, total: u64, used: u64) -> GpuInfo {
        GpuInfo {
            index,
            name: format!("G{total}"),
            uuid: format!("GPU-{index}abc"),
            memory_total_bytes: Some(total * GB),
            memory_used_bytes: Some(used * GB),
            compute_capability: None,
            mig: None,
            compute_processes: Some(0),
        }
    }

    fn driver(gpus: Vec<GpuInfo>) -> DriverInfo {
        DriverInfo {
            driver_version: "580.0".into(),
            cuda_driver_version: None,
            library: "libnvidia-ml.so.1".into(),
            gpus,
            errors: Vec::new(),
        }
    }

    fn free(info: &DriverInfo, visible: Option<&str>, ordinal: u32, pci: bool) -> u64 {
        memory_of(info, &VisibleDevices::parse(visible), ordinal, pci)
            .unwrap()
            .free
            / GB
    }

    #[test]
    fn the_listed_gpu_by_index_uuid_or_mig_instance() {
        let mut info = driver(vec![gpu(0, 16, 1), gpu(1, 32, 2), gpu(2, 32, 30)]);
        assert_eq!(free(&info, None, 1, true), 30);
        assert_eq!(free(&info, Some("2,1"), 1, true), 30);
        assert_eq!(
            free(&info, Some("2"), 0, false),
            2,
            "one listed GPU is that GPU"
        );
        assert_eq!(free(&info, Some("GPU-2abc,GPU-0a"), 1, false), 15);
        info.gpus[1].mig = Some(MigState {
            enabled: true,
            pending_enabled: true,
            instances: vec![MigInstance {
                index: 3,
                uuid: "MIG-xyz".into(),
                memory_total_bytes: Some(10 * GB),
                memory_used_bytes: Some(GB),
                compute_processes: Some(0),
            }],
        });
        assert_eq!(free(&info, Some("MIG-xyz"), 0, false), 9);
        let by_index = memory_of(&info, &VisibleDevices::parse(Some("1")), 0, true);
        assert!(by_index.unwrap_err().contains("MIG mode"));
    }

    #[test]
    fn without_pci_order_the_smallest_visible_gpu() {
        let info = driver(vec![gpu(0, 16, 1), gpu(1, 32, 2), gpu(2, 32, 30)]);
        assert_eq!(free(&info, None, 1, false), 2);
        assert_eq!(free(&info, Some("0,1"), 1, false), 15);
        let m = memory_of(&info, &VisibleDevices::parse(Some("0,1")), 1, false).unwrap();
        assert!(m.what.contains("smallest"), "{}", m.what);
    }

    #[test]
    fn what_cannot_be_known_says_why() {
        let info = driver(vec![gpu(0, 16, 1)]);
        let err = |v: Option<&str>, o: u32| {
            memory_of(&info, &VisibleDevices::parse(v), o, true).unwrap_err()
        };
        assert!(err(Some("-1"), 0).contains("hides"));
        assert!(err(Some("0"), 1).contains("not among"));
        assert!(err(Some("5"), 0).contains("no GPU 5"));
        assert!(err(Some("GPU-zzz"), 0).contains("no GPU GPU-zzz"));
        let mut unknown = driver(vec![gpu(0, 16, 1)]);
        unknown.gpus[0].memory_used_bytes = None;
        let e = memory_of(&unknown, &VisibleDevices::parse(None), 0, true).unwrap_err();
        assert!(e.contains("did not report"), "{e}");
    }
}
