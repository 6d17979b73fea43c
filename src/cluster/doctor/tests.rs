//! Diagnoses from variable maps and hand-made driver probes.

use super::*;
use crate::cluster::cuda::ComputeCapability;
use crate::cluster::exit_codes as code;
use crate::cluster::gpu::{DriverInfo, GpuInfo, MigInstance, MigState};

fn vars(pairs: &[(&str, &str)]) -> Vars {
    Vars::from_pairs(pairs.iter().copied())
}

fn absent() -> DriverProbe {
    DriverProbe::Absent {
        reason: "libnvidia-ml.so.1: cannot open shared object file".into(),
    }
}

fn gpu(index: u32, name: &str, cc: (u32, u32)) -> GpuInfo {
    GpuInfo {
        index,
        name: name.into(),
        uuid: format!("GPU-{index}aaaaaaa-1111-2222-3333-444455556666"),
        memory_total_bytes: Some(32 << 30),
        memory_used_bytes: Some(0),
        compute_capability: Some(ComputeCapability {
            major: cc.0,
            minor: cc.1,
        }),
        mig: None,
        compute_processes: Some(0),
    }
}

fn present(cuda: (u32, u32), gpus: Vec<GpuInfo>) -> DriverProbe {
    DriverProbe::Present(DriverInfo {
        driver_version: "535.104.05".into(),
        cuda_driver_version: Some(CudaVersion::new(cuda.0, cuda.1)),
        library: "libnvidia-ml.so.1".into(),
        gpus,
        errors: Vec::new(),
    })
}

/// The preflight of a run on the `cuda` backend (NVRTC's version is its runtime).
fn diagnose_cuda(vars: &Vars, driver: DriverProbe, nvrtc: Option<NvrtcInfo>) -> DoctorReport {
    use crate::cluster::compat::GpuBackend;
    diagnose_for(vars, driver, nvrtc, None, true, &[GpuBackend::Cuda], true)
}

fn nvrtc(v: (u32, u32)) -> Option<NvrtcInfo> {
    Some(NvrtcInfo {
        library: "libnvrtc.so.12".into(),
        version: Some(CudaVersion::new(v.0, v.1)),
        path: None,
        cudarc_loads_it: true,
    })
}

const SLURM_GPU_JOB: &[(&str, &str)] = &[
    ("SLURM_JOB_ID", "4242"),
    ("SLURM_JOB_NODELIST", "ai03"),
    ("ENVIRONMENT", "BATCH"),
    ("SLURM_JOB_GPUS", "0"),
    ("SLURM_GPUS_ON_NODE", "1"),
    ("CUDA_VISIBLE_DEVICES", "0"),
];

#[test]
fn no_driver_is_fine_without_require_gpu() {
    let r = diagnose(&vars(&[]), absent(), None, false);
    assert_eq!(r.exit_code, code::OK);
    assert!(
        r.findings
            .iter()
            .any(|f| f.message.contains("no NVIDIA driver"))
    );
    assert!(r.findings.iter().any(|f| f.message == small_model_hint()));
    assert!(r.render().contains("no NVIDIA driver"));
}

/// A binary with `tch` and `cuda` says which to train with on an NVIDIA GPU; one with only
/// `cuda` (nothing to choose) does not.
#[test]
fn doctor_names_the_gpu_backend_when_there_is_a_choice() {
    use crate::cluster::compat::GpuBackend::{Cuda, Tch};
    let hint = |backends: &[_]| {
        let r = diagnose_for(&vars(&[]), absent(), None, None, false, backends, true);
        r.findings.iter().any(|f| f.message == GPU_BACKEND_HINT)
    };
    assert!(hint(&[Tch, Cuda]));
    assert!(!hint(&[Cuda]) && !hint(&[Tch]));
}

#[test]
fn no_driver_with_require_gpu_fails_with_its_code() {
    let r = diagnose(&vars(&[]), absent(), None, true);
    assert_eq!(r.exit_code, code::NO_DRIVER);
    let f = r.failures().next().expect("a failure");
    assert!(f.fix.as_deref().is_some_and(|x| x.contains("--device cpu")));
}

#[test]
fn apptainer_with_slurm_gpus_and_no_driver_means_missing_nv() {
    let mut v = SLURM_GPU_JOB.to_vec();
    v.push(("APPTAINER_CONTAINER", "/ibmgpfs/me/trainer.sif"));
    let r = diagnose(&vars(&v), absent(), None, false);
    assert_eq!(r.exit_code, code::CONTAINER_MISSING_NV);
    let f = r.failures().next().expect("a failure");
    assert!(f.message.contains("add --nv"), "{}", f.message);
    assert!(f.message.contains("SLURM_JOB_GPUS=0"), "{}", f.message);
    assert!(
        f.fix
            .as_deref()
            .is_some_and(|x| x.contains("apptainer exec --nv"))
    );
    let mut v = SLURM_GPU_JOB.to_vec();
    v.push(("SINGULARITY_CONTAINER", "/x.sif"));
    let r = diagnose(&vars(&v), absent(), None, true);
    assert_eq!(r.exit_code, code::CONTAINER_MISSING_NV);
}

#[test]
fn container_without_gpu_allocation_is_not_blamed_on_nv() {
    let r = diagnose(
        &vars(&[("APPTAINER_CONTAINER", "/x.sif")]),
        absent(),
        None,
        false,
    );
    assert_eq!(r.exit_code, code::OK);
    let r = diagnose(
        &vars(&[("APPTAINER_CONTAINER", "/x.sif")]),
        absent(),
        None,
        true,
    );
    assert_eq!(r.exit_code, code::NO_DRIVER);
}

#[test]
fn allocated_gpus_without_driver_outside_a_container() {
    let r = diagnose(&vars(SLURM_GPU_JOB), absent(), None, false);
    assert_eq!(r.exit_code, code::ALLOCATED_GPU_NOT_VISIBLE);
    let f = r.failures().next().expect("a failure");
    assert!(
        f.message.contains("CUDA_VISIBLE_DEVICES=0"),
        "{}",
        f.message
    );
    let r = diagnose(
        &vars(&[("GFLOW_ARRAY_TASK_ID", "0"), ("CUDA_VISIBLE_DEVICES", "1")]),
        absent(),
        None,
        false,
    );
    assert_eq!(r.exit_code, code::ALLOCATED_GPU_NOT_VISIBLE);
}

#[test]
fn healthy_v100_under_cuda_12() {
    let r = diagnose(
        &vars(SLURM_GPU_JOB),
        present((12, 2), vec![gpu(0, "Tesla V100-SXM2-32GB", (7, 0))]),
        nvrtc((12, 1)),
        true,
    );
    assert_eq!(r.exit_code, code::OK, "{}", r.render());
    assert_eq!(r.visible_gpus.len(), 1);
}

#[test]
fn runtime_newer_than_driver() {
    let r = diagnose_cuda(
        &vars(&[]),
        present((11, 8), vec![gpu(0, "Tesla V100", (7, 0))]),
        nvrtc((12, 4)),
    );
    assert_eq!(r.exit_code, code::RUNTIME_NEWER_THAN_DRIVER);
    let f = r.failures().next().expect("a failure");
    assert!(
        f.message.contains("12.4") && f.message.contains("11.8"),
        "{}",
        f.message
    );
}

#[test]
fn runtime_override_without_nvrtc() {
    let r = diagnose_cuda(
        &vars(&[("TRAINER_CUDA_RUNTIME", "13.0")]),
        present((13, 0), vec![gpu(0, "Tesla V100", (7, 0))]),
        None,
    );
    assert_eq!(r.runtime.effective, CudaVersion::new(13, 0));
    assert_eq!(r.exit_code, code::UNSUPPORTED_COMPUTE_CAPABILITY);
    assert!(r.findings.iter().any(|f| f.message.contains("NVRTC")));
}

#[test]
fn new_gpu_on_old_runtime() {
    let r = diagnose_cuda(
        &vars(&[]),
        present((12, 8), vec![gpu(0, "RTX 6000 Ada", (8, 9))]),
        nvrtc((11, 2)),
    );
    assert_eq!(r.exit_code, code::UNSUPPORTED_COMPUTE_CAPABILITY);
}

#[test]
fn cuda_visible_devices_hiding_everything() {
    let r = diagnose(
        &vars(&[("CUDA_VISIBLE_DEVICES", "-1")]),
        present((12, 4), vec![gpu(0, "A100", (8, 0))]),
        nvrtc((12, 4)),
        true,
    );
    assert_eq!(r.exit_code, code::NO_VISIBLE_GPU);
    let r = diagnose(
        &vars(&[("CUDA_VISIBLE_DEVICES", "5")]),
        present((12, 4), vec![gpu(0, "A100", (8, 0))]),
        nvrtc((12, 4)),
        false,
    );
    assert_eq!(r.exit_code, code::OK, "not required, not allocated");
}

#[test]
fn gpu_uuid_prefix_and_mig_uuid_select_gpus() {
    let mut a100 = gpu(1, "A100-SXM4-80GB", (8, 0));
    a100.mig = Some(MigState {
        enabled: true,
        pending_enabled: true,
        instances: vec![MigInstance {
            index: 0,
            uuid: "MIG-5c3a6f1e-1111-2222-3333-444455556666".into(),
            memory_total_bytes: Some(10 << 30),
            memory_used_bytes: Some(0),
            compute_processes: Some(0),
        }],
    });
    let gpus = vec![gpu(0, "A100-SXM4-80GB", (8, 0)), a100];
    let v = VisibleDevices::parse(Some("GPU-0aaa"));
    assert_eq!(visible_gpus(&v, &gpus).first().map(|g| g.index), Some(0));
    let v = VisibleDevices::parse(Some("MIG-5c3a6f1e-1111-2222-3333-444455556666"));
    assert_eq!(visible_gpus(&v, &gpus).first().map(|g| g.index), Some(1));
    let v = VisibleDevices::parse(Some("MIG-GPU-1aaaaaaa-1111-2222-3333-444455556666/1/0"));
    assert_eq!(visible_gpus(&v, &gpus).first().map(|g| g.index), Some(1));

    // Selecting a MIG-enabled GPU by index warns to use mig-pick.
    let r = diagnose(
        &vars(&[("CUDA_VISIBLE_DEVICES", "1")]),
        present((12, 4), gpus),
        nvrtc((12, 4)),
        true,
    );
    assert!(
        r.findings
            .iter()
            .any(|f| f.fix.as_deref() == Some("export CUDA_VISIBLE_DEVICES=$(trainer mig-pick)"))
    );
    let json = serde_json::to_string(&r).expect("serialises");
    assert!(json.contains("\"exit_code\":0"));
}

#[test]
fn contradictory_scheduler_variables_fail_with_their_code() {
    let r = diagnose(
        &vars(&[("RANK", "3"), ("WORLD_SIZE", "2")]),
        absent(),
        None,
        false,
    );
    assert_eq!(r.exit_code, code::BAD_CLUSTER_ENV);
    assert!(
        r.cluster_error
            .as_deref()
            .is_some_and(|e| e.contains("RANK=3"))
    );
}

#[test]
fn nvrtc_13_only_is_found_and_the_symlink_advised() {
    let only_13 = Some(NvrtcInfo {
        library: "libnvrtc.so.13".into(),
        version: Some(CudaVersion::new(13, 0)),
        path: Some("/usr/local/cuda-13.0/lib64/libnvrtc.so.13".into()),
        cudarc_loads_it: false,
    });
    let r = diagnose(
        &vars(SLURM_GPU_JOB),
        present((13, 0), vec![gpu(0, "NVIDIA H100", (9, 0))]),
        only_13,
        true,
    );
    let w = r
        .findings
        .iter()
        .find(|f| f.message.contains("libnvrtc.so.13"))
        .expect("a warning about libnvrtc.so.13");
    assert_eq!(w.level, Level::Warn);
    let fix = w.fix.as_deref().unwrap_or("");
    assert!(
        fix.contains("ln -sf /usr/local/cuda-13.0/lib64/libnvrtc.so.13"),
        "{fix}"
    );
    assert!(r.render().contains("not a name cudarc looks for"));
}
