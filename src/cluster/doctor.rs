//! `trainer doctor`: is this process set up to train on a GPU, and if not, why and how to fix it.
//!
//! [`diagnose`] is pure: it takes the variables, a [`DriverProbe`] and the NVRTC probe, so every
//! diagnosis (missing `--nv`, runtime newer than the driver, V100 under CUDA 13, ...) is
//! unit-tested without a GPU. Only [`DoctorReport::collect`] probes the real machine.

use serde::Serialize;

use super::container::{Container, detect_container};
use super::cuda::{
    CudaVersion, RuntimeTarget, min_compute_capability, min_runtime_for, runtime_target,
};
use super::env::{AllocationVar, ClusterEnv, detect, gpu_allocation};
use super::exit_codes as code;
use super::gpu::{DriverProbe, GpuInfo, probe_driver};
use super::nvrtc::{NvrtcInfo, probe_nvrtc};
use super::vars::Vars;
use super::visible_devices::{DeviceId, VisibleDevices, VisibleForm};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A check that passed.
    Ok,
    /// Something worth knowing.
    Info,
    /// Likely a problem, but training can go on.
    Warn,
    /// Training on the GPU will not work; carries an exit code.
    Fail,
}

/// One line of the diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Severity.
    pub level: Level,
    /// Exit code for failures (see [`super::exit_codes`]).
    pub code: Option<u8>,
    /// What was found.
    pub message: String,
    /// One-line fix.
    pub fix: Option<String>,
}

/// A GPU that this process can see through `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VisibleGpu {
    /// NVML index of the physical GPU.
    pub index: u32,
    /// The `CUDA_VISIBLE_DEVICES` entry that selects it (`None` when the variable is unset).
    pub selected_by: Option<String>,
}

/// The CUDA runtime check: runtime ≤ driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeCheck {
    /// The version this build targets (constant, build-time `CUDARC_CUDA_VERSION`, or override).
    pub build_target: RuntimeTarget,
    /// The NVRTC library found at run time.
    pub nvrtc: Option<NvrtcInfo>,
    /// The version compared with the driver: NVRTC's if found, else the build target.
    pub effective: CudaVersion,
    /// Newest CUDA the driver supports.
    pub driver_supports: Option<CudaVersion>,
}

/// Everything doctor found, serialisable for `--json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoctorReport {
    /// The scheduler environment, when it could be read.
    pub cluster: Option<ClusterEnv>,
    /// Why it could not be read.
    pub cluster_error: Option<String>,
    /// Singularity/Apptainer, if inside one.
    pub container: Option<Container>,
    /// The driver probe.
    pub driver: DriverProbe,
    /// `CUDA_VISIBLE_DEVICES` as read.
    pub visible_devices: VisibleDevices,
    /// GPUs visible to this process.
    pub visible_gpus: Vec<VisibleGpu>,
    /// Scheduler variables showing GPUs were allocated.
    pub gpu_allocation: Vec<AllocationVar>,
    /// Runtime against driver.
    pub runtime: RuntimeCheck,
    /// A GPU was required (`--require-gpu`, or a train command with `--device cuda`).
    pub require_gpu: bool,
    /// Findings in order.
    pub findings: Vec<Finding>,
    /// Exit code: the first failure's, or 0.
    pub exit_code: u8,
}

/// The hint printed for every run: small models do not need a GPU.
pub const SMALL_MODEL_HINT: &str = "CPU is enough for small models (connectomes under ~1k nodes, graph metrics, MNIST smoke tests): `--device cpu` leaves the GPU queue to others";

impl DoctorReport {
    /// Probes this machine (process environment, NVML, NVRTC) and diagnoses.
    pub fn collect(require_gpu: bool) -> Self {
        let vars = Vars::from_process();
        let driver = probe_driver(&vars);
        let nvrtc = if driver.info().is_some() {
            probe_nvrtc()
        } else {
            None
        };
        diagnose(&vars, driver, nvrtc, require_gpu)
    }

    /// The failures.
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.level == Level::Fail)
    }

    /// Human-readable report.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: String| out.push_str(&format!("{k:<22} {v}\n"));
        match (&self.cluster, &self.cluster_error) {
            (Some(c), _) => line(
                "scheduler",
                format!(
                    "{} ({}), rank {}/{}, local rank {}/{}, job {}",
                    c.scheduler,
                    c.mode,
                    c.rank,
                    c.world_size,
                    c.local_rank,
                    c.local_world_size,
                    c.job_id.as_deref().unwrap_or("-")
                ),
            ),
            (None, Some(e)) => line("scheduler", format!("unreadable: {e}")),
            (None, None) => {}
        }
        line(
            "container",
            match &self.container {
                Some(c) => format!("{} {}", c.runtime, c.image.as_deref().unwrap_or("")),
                None => "none".into(),
            },
        );
        if !self.gpu_allocation.is_empty() {
            let alloc: Vec<String> = self
                .gpu_allocation
                .iter()
                .map(|a| format!("{}={}", a.var, a.value))
                .collect();
            line("GPU allocation", alloc.join(" "));
        }
        line("CUDA_VISIBLE_DEVICES", self.visible_devices.describe());
        match &self.driver {
            DriverProbe::Absent { reason } => {
                line("NVIDIA driver", format!("not found ({reason})"))
            }
            DriverProbe::Present(d) => {
                line(
                    "NVIDIA driver",
                    format!(
                        "{} (supports CUDA {}) via {}",
                        d.driver_version,
                        d.cuda_driver_version.map_or("?".into(), |v| v.to_string()),
                        d.library
                    ),
                );
                for g in &d.gpus {
                    let visible = self.visible_gpus.iter().any(|v| v.index == g.index);
                    line(&format!("GPU {}", g.index), describe_gpu(g, visible));
                    for m in g.mig.iter().flat_map(|m| &m.instances) {
                        line(
                            &format!("  MIG {}", m.index),
                            format!(
                                "{} {} {}",
                                m.uuid,
                                gib(m.memory_total_bytes),
                                if m.is_free() { "free" } else { "busy" }
                            ),
                        );
                    }
                }
                for e in &d.errors {
                    line("NVML error", e.clone());
                }
            }
        }
        let r = &self.runtime;
        line(
            "CUDA runtime",
            format!(
                "build targets {} ({}); NVRTC {}; driver supports {}",
                r.build_target.version,
                r.build_target.source,
                match &r.nvrtc {
                    Some(n) => format!(
                        "{} from {}",
                        n.version.map_or("?".into(), |v| v.to_string()),
                        n.library
                    ),
                    None => "not found".into(),
                },
                r.driver_supports.map_or("-".into(), |v| v.to_string())
            ),
        );
        out.push('\n');
        for f in &self.findings {
            let tag = match (f.level, f.code) {
                (Level::Fail, Some(c)) => format!("FAIL [{c}]"),
                (Level::Fail, None) => "FAIL".into(),
                (Level::Warn, _) => "warn".into(),
                (Level::Info, _) => "info".into(),
                (Level::Ok, _) => "ok".into(),
            };
            out.push_str(&format!("{tag:<9} {}\n", f.message));
            if let Some(fix) = &f.fix {
                out.push_str(&format!("{:<9} fix: {fix}\n", ""));
            }
        }
        out.push_str(&format!("exit code {}\n", self.exit_code));
        out
    }
}

fn gib(bytes: Option<u64>) -> String {
    bytes.map_or("? GiB".into(), |b| {
        format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
    })
}

fn describe_gpu(g: &GpuInfo, visible: bool) -> String {
    let mig = match &g.mig {
        None => "MIG n/a".to_string(),
        Some(m) if m.enabled => format!("MIG on, {} instances", m.instances.len()),
        Some(m) if m.pending_enabled => "MIG off (on after reset)".into(),
        Some(_) => "MIG off".into(),
    };
    format!(
        "{} {} cc {} {} {}{}",
        g.name,
        gib(g.memory_total_bytes),
        g.compute_capability.map_or("?".into(), |c| c.to_string()),
        mig,
        g.uuid,
        if visible { " [visible]" } else { " [hidden]" }
    )
}

/// Which physical GPUs `CUDA_VISIBLE_DEVICES` selects (all when unset; UUID prefixes match).
pub fn visible_gpus(visible: &VisibleDevices, gpus: &[GpuInfo]) -> Vec<VisibleGpu> {
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

struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, level: Level, code: Option<u8>, message: String, fix: Option<&str>) {
        self.0.push(Finding {
            level,
            code,
            message,
            fix: fix.map(str::to_string),
        });
    }
    fn fail(&mut self, code: u8, message: String, fix: &str) {
        self.push(Level::Fail, Some(code), message, Some(fix));
    }
}

/// Diagnoses from variables, a driver probe and an NVRTC probe. Pure: no I/O.
pub fn diagnose(
    vars: &Vars,
    driver: DriverProbe,
    nvrtc: Option<NvrtcInfo>,
    require_gpu: bool,
) -> DoctorReport {
    let mut f = Findings(Vec::new());
    let (cluster, cluster_error) = match detect(vars) {
        Ok(env) => (Some(env), None),
        Err(e) => {
            f.fail(
                code::BAD_CLUSTER_ENV,
                format!("scheduler variables: {e}"),
                "fix or unset the variable named above (see `trainer env`)",
            );
            (None, Some(e.to_string()))
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
            if let (false, Some(c)) = (allocation.is_empty(), &container) {
                f.fail(
                    code::CONTAINER_MISSING_NV,
                    format!(
                        "no NVIDIA driver inside the {} container although GPUs were allocated ({}): add --nv",
                        c.runtime,
                        alloc_text.join(" ")
                    ),
                    &format!("{} exec --nv IMAGE trainer ...", c.runtime),
                );
            } else if !allocation.is_empty() {
                f.fail(
                    code::ALLOCATED_GPU_NOT_VISIBLE,
                    format!(
                        "GPUs were allocated ({}) but no NVIDIA driver was found: {reason}",
                        alloc_text.join(" ")
                    ),
                    "run `nvidia-smi` on the node; if it fails the node's driver is broken, tell the admins",
                );
            } else if require_gpu {
                let fix = if container.is_some() {
                    "run on a GPU node with `--gres=gpu:1` and pass --nv to the container, or use --device cpu"
                } else {
                    "run on a GPU node (e.g. `sbatch -p q_ai4 --gres=gpu:1`) or use --device cpu"
                };
                f.fail(code::NO_DRIVER, format!("no NVIDIA driver: {reason}"), fix);
            } else {
                f.push(
                    Level::Info,
                    None,
                    "no NVIDIA driver: training runs on the CPU".into(),
                    None,
                );
            }
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
                        code::NO_VISIBLE_GPU,
                        msg,
                        "unset CUDA_VISIBLE_DEVICES or list GPUs that exist (`nvidia-smi -L`)",
                    );
                } else {
                    f.push(Level::Info, None, msg, None);
                }
            }
            if gpu_wanted {
                check_runtime(&mut f, effective, driver_supports, nvrtc.as_ref());
                for v in &visible_list {
                    if let Some(g) = info.gpus.iter().find(|g| g.index == v.index) {
                        check_gpu(&mut f, g, v, effective);
                    }
                }
            }
        }
    }
    f.push(Level::Info, None, SMALL_MODEL_HINT.into(), None);

    let exit_code =
        f.0.iter()
            .find(|x| x.level == Level::Fail)
            .and_then(|x| x.code)
            .unwrap_or(code::OK);
    DoctorReport {
        cluster,
        cluster_error,
        container,
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
        require_gpu,
        findings: f.0,
        exit_code,
    }
}

fn check_runtime(
    f: &mut Findings,
    effective: CudaVersion,
    driver: Option<CudaVersion>,
    nvrtc: Option<&NvrtcInfo>,
) {
    if nvrtc.is_none() {
        f.push(
            Level::Warn,
            None,
            "NVRTC (libnvrtc) not found: the CUDA backend compiles kernels with it at run time".into(),
            Some("load the CUDA module (`module load cuda/12.x`) or use an image that ships libnvrtc"),
        );
    }
    match driver {
        Some(d) if effective > d => f.fail(
            code::RUNTIME_NEWER_THAN_DRIVER,
            format!("CUDA runtime {effective} is newer than the driver supports ({d}); the rule is runtime ≤ driver"),
            "use a build or image for CUDA ≤ the driver's (e.g. CUDA 11.8/12.x), or ask for a newer driver",
        ),
        Some(d) => f.push(
            Level::Ok,
            None,
            format!("CUDA runtime {effective} ≤ driver's CUDA {d}"),
            None,
        ),
        None => f.push(
            Level::Warn,
            None,
            "the driver did not report its CUDA version; cannot check runtime ≤ driver".into(),
            None,
        ),
    }
}

fn check_gpu(f: &mut Findings, g: &GpuInfo, v: &VisibleGpu, runtime: CudaVersion) {
    if let Some(cc) = g.compute_capability {
        let min = min_compute_capability(runtime);
        let needs = min_runtime_for(cc);
        if cc < min {
            f.fail(
                code::UNSUPPORTED_COMPUTE_CAPABILITY,
                format!(
                    "GPU {} ({}, compute capability {cc}) is not targeted by CUDA {runtime}, whose oldest is {min}",
                    g.index, g.name
                ),
                "use a CUDA 12 build (CUDARC_CUDA_VERSION=12080) for Volta/V100, or another partition",
            );
        } else if runtime < needs {
            f.fail(
                code::UNSUPPORTED_COMPUTE_CAPABILITY,
                format!(
                    "GPU {} ({}, compute capability {cc}) needs CUDA ≥ {needs}, this runtime is {runtime}",
                    g.index, g.name
                ),
                "use a newer CUDA build or image",
            );
        } else {
            f.push(
                Level::Ok,
                None,
                format!(
                    "GPU {} {} (cc {cc}) is supported by CUDA {runtime}",
                    g.index, g.name
                ),
                None,
            );
        }
    }
    let selected_by_mig = v
        .selected_by
        .as_deref()
        .is_some_and(|s| s.starts_with("MIG-"));
    if let Some(m) = &g.mig
        && m.enabled
        && !selected_by_mig
    {
        f.push(
            Level::Warn,
            None,
            format!(
                "GPU {} has MIG on ({} instances): CUDA needs a MIG- UUID in CUDA_VISIBLE_DEVICES",
                g.index,
                m.instances.len()
            ),
            Some("export CUDA_VISIBLE_DEVICES=$(trainer mig-pick)"),
        );
    }
}

#[cfg(test)]
mod tests;
