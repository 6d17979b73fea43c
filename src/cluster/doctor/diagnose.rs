//! The decision tree of `trainer doctor`: scheduler, container, driver, visible GPUs, runtime.

use super::checks::{NoDriver, check_backend, check_mig, check_nvrtc, no_driver};
use super::{
    BackendCheck, DoctorReport, Findings, GPU_BACKEND_HINT, Level, RuntimeCheck, VisibleGpu,
    small_model_hint,
};
use crate::cluster::compat::{BackendNeeds, GpuBackend, TCH_RUNTIME_ENV};
use crate::cluster::container::{NvEvidence, detect_container};
use crate::cluster::cuda::CudaVersion;
use crate::cluster::cuda::runtime_target;
use crate::cluster::gpu::{DriverProbe, GpuInfo};
use crate::cluster::nvrtc::NvrtcInfo;
use crate::cluster::scheduler::{detect, gpu_allocation};
use crate::cluster::vars::Vars;
use crate::cluster::visible_devices::{DeviceId, VisibleDevices, VisibleForm};
use crate::error::chain_text;
use crate::exit::Exit;

/// Which physical GPUs `CUDA_VISIBLE_DEVICES` selects (all when unset; UUID prefixes match).
pub(crate) fn visible_gpus(visible: &VisibleDevices, gpus: &[GpuInfo]) -> Vec<VisibleGpu> {
    if visible.form == VisibleForm::Unset {
        return gpus
            .iter()
            .map(|g| VisibleGpu {
                index: g.index,
                selected_by: None,
            })
            .collect();
    }
    let mut out: Vec<VisibleGpu> = Vec::new();
    for d in &visible.devices {
        let found = gpus.iter().find(|g| match d {
            DeviceId::Index(i) => g.index == *i,
            DeviceId::GpuUuid(u) => g.uuid.starts_with(u.as_str()),
            DeviceId::MigUuid(u) => {
                g.mig
                    .iter()
                    .flat_map(|m| &m.instances)
                    .any(|m| m.uuid == *u)
                    || u.strip_prefix("MIG-")
                        .is_some_and(|rest| rest.starts_with(g.uuid.as_str()))
            }
        });
        if let Some(g) = found
            && !out.iter().any(|v| v.index == g.index)
        {
            out.push(VisibleGpu {
                index: g.index,
                selected_by: Some(d.to_string()),
            });
        }
    }
    out
}

/// Diagnoses from variables, a driver probe and an NVRTC probe. Pure: no I/O. Inside a
/// container nothing is known of `--nv` here (see [`diagnose_with`]).
pub fn diagnose(
    vars: &Vars,
    driver: DriverProbe,
    nvrtc: Option<NvrtcInfo>,
    require_gpu: bool,
) -> DoctorReport {
    diagnose_with(vars, driver, nvrtc, None, require_gpu)
}

/// [`diagnose`] with what the container shows of `--nv` (`None`: not probed), for the GPU
/// backends `trainer doctor` checks ([`GpuBackend::for_doctor`]). Pure: no I/O.
pub fn diagnose_with(
    vars: &Vars,
    driver: DriverProbe,
    nvrtc: Option<NvrtcInfo>,
    nv: Option<NvEvidence>,
    require_gpu: bool,
) -> DoctorReport {
    let (backends, in_binary) = GpuBackend::for_doctor();
    diagnose_for(vars, driver, nvrtc, nv, require_gpu, &backends, in_binary)
}

/// [`diagnose_with`] for the given GPU backends, the first one the run's (its refusal fails the
/// report; another's is a warning); `in_binary`: they are this binary's (else the GPU image's,
/// checked for information). Pure: no I/O.
pub(crate) fn diagnose_for(
    vars: &Vars,
    driver: DriverProbe,
    nvrtc: Option<NvrtcInfo>,
    nv: Option<NvEvidence>,
    require_gpu: bool,
    backends: &[GpuBackend],
    in_binary: bool,
) -> DoctorReport {
    let mut f = Findings(Vec::new());
    let (cluster, cluster_error) = match detect(vars) {
        Ok(env) => (Some(env), None),
        Err(e) => {
            let text = chain_text(&e);
            f.fail(
                Exit::BadClusterEnv,
                format!("scheduler variables: {text}"),
                "fix or unset the variable named above (see `trainer env`)",
            );
            (None, Some(text))
        }
    };
    let container = detect_container(vars);
    let visible = VisibleDevices::from_vars(vars);
    let allocation = gpu_allocation(vars);
    let alloc_text: Vec<String> = allocation
        .iter()
        .map(|a| format!("{}={}", a.var, a.value))
        .collect();
    let build_target = runtime_target(vars);
    let effective = nvrtc
        .as_ref()
        .and_then(|n| n.version)
        .unwrap_or(build_target.version);
    let driver_supports = driver.info().and_then(|d| d.cuda_driver_version);
    let tch_runtime = vars.get(TCH_RUNTIME_ENV).and_then(CudaVersion::parse);
    let needs: Vec<BackendNeeds> = backends
        .iter()
        .map(|b| match b {
            GpuBackend::Tch => BackendNeeds::tch(tch_runtime),
            GpuBackend::Cuda => {
                let source = match nvrtc.as_ref().and_then(|n| n.version) {
                    Some(_) => "NVRTC found".to_string(),
                    None => format!("no NVRTC found: {}", build_target.source),
                };
                BackendNeeds::cuda(effective, &source)
            }
        })
        .collect();
    let mut checks: Vec<BackendCheck> = needs
        .iter()
        .enumerate()
        .map(|(i, n)| BackendCheck {
            needs: n.clone(),
            primary: i == 0,
            in_binary,
            rule: None,
            runs: None,
        })
        .collect();

    if !visible.invalid.is_empty() {
        f.push(
            Level::Warn,
            None,
            format!("CUDA_VISIBLE_DEVICES: {}", visible.describe()),
            Some("list indices, GPU- or MIG- UUIDs separated by commas"),
        );
    }

    let mut visible_list = Vec::new();
    match driver.info() {
        None => {
            let reason = match &driver {
                DriverProbe::Absent { reason } => reason.as_str(),
                DriverProbe::Present(_) => "",
            };
            let ctx = NoDriver {
                reason,
                container: container.as_ref(),
                nv: nv.as_ref(),
                allocation: &alloc_text,
                require_gpu,
            };
            no_driver(&mut f, &ctx);
        }
        Some(info) => {
            f.push(
                Level::Ok,
                None,
                format!(
                    "NVIDIA driver {} with {} GPU(s)",
                    info.driver_version,
                    info.gpus.len()
                ),
                None,
            );
            visible_list = visible_gpus(&visible, &info.gpus);
            let gpu_wanted = require_gpu || !allocation.is_empty() || !visible_list.is_empty();
            if visible_list.is_empty() {
                let msg = format!(
                    "no GPU visible to this process (CUDA_VISIBLE_DEVICES: {}; the driver sees {})",
                    visible.describe(),
                    info.gpus.len()
                );
                if require_gpu || !allocation.is_empty() {
                    f.fail(
                        Exit::NoVisibleGpu,
                        msg,
                        "unset CUDA_VISIBLE_DEVICES or list GPUs that exist (`nvidia-smi -L`)",
                    );
                } else {
                    f.push(Level::Info, None, msg, None);
                }
            }
            if gpu_wanted {
                if !in_binary {
                    f.push(
                        Level::Info,
                        None,
                        "this binary has no GPU backend (cargo features tch, cuda): the checks \
                         below are the GPU image's (trainer-gpu.sif), for information"
                            .into(),
                        None,
                    );
                }
                if backends.contains(&GpuBackend::Cuda) {
                    check_nvrtc(&mut f, nvrtc.as_ref());
                }
                let shown: Vec<&GpuInfo> = visible_list
                    .iter()
                    .filter_map(|v| info.gpus.iter().find(|g| g.index == v.index))
                    .collect();
                for c in &mut checks {
                    let (rule, runs) = check_backend(&mut f, &c.needs, c.primary, info, &shown);
                    c.rule = Some(rule);
                    c.runs = Some(runs);
                }
                for v in &visible_list {
                    if let Some(g) = info.gpus.iter().find(|g| g.index == v.index) {
                        check_mig(&mut f, g, v);
                    }
                }
            }
        }
    }
    f.push(Level::Info, None, small_model_hint(), None);
    if backends.contains(&GpuBackend::Cuda) && backends.contains(&GpuBackend::Tch) {
        f.push(Level::Info, None, GPU_BACKEND_HINT.into(), None);
    }

    let exit_code =
        f.0.iter()
            .find(|x| x.level == Level::Fail)
            .and_then(|x| x.code)
            .unwrap_or(Exit::Ok.code());
    DoctorReport {
        cluster,
        cluster_error,
        container,
        nv,
        driver,
        visible_devices: visible,
        visible_gpus: visible_list,
        gpu_allocation: allocation,
        runtime: RuntimeCheck {
            build_target,
            nvrtc,
            effective,
            driver_supports,
        },
        backends: checks,
        require_gpu,
        findings: f.0,
        exit_code,
    }
}
