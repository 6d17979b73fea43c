//! `trainer mig-pick`: the UUID of a free MIG instance on the visible GPUs, for
//! `export CUDA_VISIBLE_DEVICES=$(trainer mig-pick)` in LSF jobs that share a MIG-cut A100.

use serde::Serialize;

use super::doctor::visible_gpus;
use super::exit_codes as code;
use super::gpu::DriverProbe;
use super::visible_devices::{DeviceId, VisibleDevices, VisibleForm};

/// The instance that was picked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct MigPick {
    /// Its UUID, ready for `CUDA_VISIBLE_DEVICES`.
    pub uuid: String,
    /// NVML index of the parent GPU.
    pub gpu_index: u32,
    /// Parent GPU name.
    pub gpu_name: String,
}

/// Why no instance was picked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}\n  fix: {fix}")]
pub(crate) struct MigPickError {
    /// Exit code from [`super::exit_codes`].
    pub code: u8,
    /// What is wrong.
    pub reason: String,
    /// One-line fix.
    pub fix: String,
}

/// Picks the first free MIG instance (no compute process) on the visible GPUs. When
/// `CUDA_VISIBLE_DEVICES` already lists MIG UUIDs, only those are candidates.
pub(crate) fn pick_free_mig(
    driver: &DriverProbe,
    visible: &VisibleDevices,
) -> Result<MigPick, MigPickError> {
    let err = |code, reason: String, fix: &str| MigPickError {
        code,
        reason,
        fix: fix.to_string(),
    };
    let info = match driver {
        DriverProbe::Absent { reason } => {
            return Err(err(
                code::NO_DRIVER,
                format!("no NVIDIA driver: {reason}"),
                "run on the GPU node (inside a container pass --nv)",
            ));
        }
        DriverProbe::Present(info) => info,
    };
    // A list of MIG UUIDs names instances, not GPUs: look at every GPU, filter instances below.
    let candidates: Vec<u32> = if visible.form == VisibleForm::MigUuids {
        info.gpus.iter().map(|g| g.index).collect()
    } else {
        visible_gpus(visible, &info.gpus)
            .iter()
            .map(|v| v.index)
            .collect()
    };
    let allowed = |uuid: &str| {
        visible.form != VisibleForm::MigUuids
            || visible
                .devices
                .iter()
                .any(|d| matches!(d, DeviceId::MigUuid(u) if u == uuid))
    };
    let mut any_mig = false;
    let mut busy = 0usize;
    for g in info.gpus.iter().filter(|g| candidates.contains(&g.index)) {
        let Some(m) = g.mig.as_ref().filter(|m| m.enabled) else {
            continue;
        };
        any_mig = true;
        for inst in m.instances.iter().filter(|i| allowed(&i.uuid)) {
            if inst.is_free() {
                return Ok(MigPick {
                    uuid: inst.uuid.clone(),
                    gpu_index: g.index,
                    gpu_name: g.name.clone(),
                });
            }
            busy += 1;
        }
    }
    if !any_mig {
        return Err(err(
            code::MIG_DISABLED,
            format!(
                "MIG is off on every visible GPU ({} GPU(s); CUDA_VISIBLE_DEVICES {})",
                candidates.len(),
                visible.describe()
            ),
            "use a whole GPU (leave CUDA_VISIBLE_DEVICES as the scheduler set it)",
        ));
    }
    Err(err(
        code::MIG_NONE_FREE,
        format!("all {busy} MIG instance(s) on the visible GPUs run a compute process"),
        "wait and retry, or submit to another node",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::gpu::{DriverInfo, GpuInfo, MigInstance, MigState};

    fn inst(i: u32, procs: u32) -> MigInstance {
        MigInstance {
            index: i,
            uuid: format!("MIG-{i}0000000-aaaa-bbbb-cccc-dddddddddddd"),
            memory_total_bytes: Some(10 << 30),
            memory_used_bytes: Some(0),
            compute_processes: Some(procs),
        }
    }

    fn a100(index: u32, mig: Option<Vec<MigInstance>>) -> GpuInfo {
        GpuInfo {
            index,
            name: "NVIDIA A100-SXM4-80GB".into(),
            uuid: format!("GPU-{index}"),
            memory_total_bytes: Some(80 << 30),
            memory_used_bytes: Some(0),
            compute_capability: None,
            mig: Some(MigState {
                enabled: mig.is_some(),
                pending_enabled: mig.is_some(),
                instances: mig.unwrap_or_default(),
            }),
            compute_processes: None,
        }
    }

    fn driver(gpus: Vec<GpuInfo>) -> DriverProbe {
        DriverProbe::Present(DriverInfo {
            driver_version: "535".into(),
            cuda_driver_version: None,
            library: "x".into(),
            gpus,
            errors: vec![],
        })
    }

    #[test]
    fn picks_the_first_free_instance() {
        let d = driver(vec![
            a100(0, None),
            a100(1, Some(vec![inst(0, 1), inst(1, 0)])),
        ]);
        let p = pick_free_mig(&d, &VisibleDevices::parse(None)).expect("free");
        assert_eq!(p.uuid, inst(1, 0).uuid);
        assert_eq!(p.gpu_index, 1);
    }

    #[test]
    fn none_free_mig_off_and_no_driver_have_their_codes() {
        let d = driver(vec![a100(1, Some(vec![inst(0, 1)]))]);
        let e = pick_free_mig(&d, &VisibleDevices::parse(None)).expect_err("busy");
        assert_eq!(e.code, code::MIG_NONE_FREE);
        let d = driver(vec![a100(0, None)]);
        let e = pick_free_mig(&d, &VisibleDevices::parse(None)).expect_err("off");
        assert_eq!(e.code, code::MIG_DISABLED);
        let e = pick_free_mig(
            &DriverProbe::Absent { reason: "x".into() },
            &VisibleDevices::parse(None),
        )
        .expect_err("absent");
        assert_eq!(e.code, code::NO_DRIVER);
    }

    #[test]
    fn respects_cuda_visible_devices() {
        let d = driver(vec![
            a100(0, Some(vec![inst(0, 0)])),
            a100(1, Some(vec![inst(1, 0)])),
        ]);
        let p = pick_free_mig(&d, &VisibleDevices::parse(Some("1"))).expect("free");
        assert_eq!(p.gpu_index, 1);
        let listed = inst(1, 0).uuid;
        let p = pick_free_mig(&d, &VisibleDevices::parse(Some(&listed))).expect("free");
        assert_eq!(p.uuid, listed);
        let e = pick_free_mig(&d, &VisibleDevices::parse(Some("-1"))).expect_err("hidden");
        assert_eq!(e.code, code::MIG_DISABLED);
    }
}
