//! The findings of `trainer doctor`: no driver (inside or outside a container), CUDA runtime
//! against the driver, and each visible GPU.

use super::Findings;
use super::Level;
use super::VisibleGpu;
use crate::cluster::compat::{BackendNeeds, Rule, driver_rule, gpu_rule};
use crate::cluster::container::{Container, NV_LIBS_DIR, NvEvidence};
use crate::cluster::gpu::{DriverInfo, GpuInfo};
use crate::cluster::nvrtc::NvrtcInfo;
use crate::exit::Exit;

/// What is known when no NVIDIA driver loaded.
pub(super) struct NoDriver<'a> {
    /// Why NVML did not load.
    pub reason: &'a str,
    /// The container, if inside one.
    pub container: Option<&'a Container>,
    /// What the container shows of `--nv` (`None`: not probed).
    pub nv: Option<&'a NvEvidence>,
    /// Scheduler variables showing allocated GPUs, as `VAR=value`.
    pub allocation: &'a [String],
    /// A GPU was required.
    pub require_gpu: bool,
}

/// The finding when NVML did not load. Inside a container, the driver libraries bound into
/// `/.singularity.d/libs` tell that `--nv` was given, and `/dev/nvidia*` that the host has a
/// driver: "add --nv" is said only when it can help.
pub(super) fn no_driver(f: &mut Findings, c: &NoDriver<'_>) {
    let allocated = !c.allocation.is_empty();
    let alloc = c.allocation.join(" ");
    let wanted = allocated || c.require_gpu;
    // Allocated GPUs that cannot be used have their own code; a plain requirement is "no driver".
    let failing = if allocated {
        Exit::AllocatedGpuNotVisible
    } else {
        Exit::NoDriver
    };
    let since = if allocated {
        format!(" although GPUs were allocated ({alloc})")
    } else {
        String::new()
    };
    match (c.container, c.nv) {
        (Some(ct), Some(nv)) if wanted && nv.nv_bound() => f.fail(
            failing,
            format!(
                "--nv is given (the host's {} are bound into /{NV_LIBS_DIR}) but the NVIDIA \
                 driver does not load inside the {} container{since}: {}",
                nv.driver_libs.join(", "),
                ct.runtime,
                c.reason
            ),
            "run `nvidia-smi` on the node outside the container: if it fails the node's driver \
             is broken (tell the admins); if it works, the bound libraries do not match the \
             loaded kernel driver",
        ),
        (Some(ct), Some(nv)) if wanted && !nv.host_has_devices() => f.fail(
            failing,
            format!(
                "no NVIDIA driver inside the {} container{since}, and no /dev/nvidia* device \
                 either: this node shows no NVIDIA driver, so --nv cannot help",
                ct.runtime
            ),
            "run on a GPU node where `nvidia-smi` works (given --nv on a node without a driver, \
             Apptainer warns \"Could not find any nv files on this host!\"), or use --device cpu",
        ),
        (Some(ct), Some(nv)) if wanted => f.fail(
            if allocated {
                Exit::ContainerMissingNv
            } else {
                Exit::NoDriver
            },
            format!(
                "no NVIDIA driver inside the {} container{since} although the host's /dev/{} \
                 are there: add --nv",
                ct.runtime,
                nv.devices.join(", /dev/")
            ),
            &format!("{} exec --nv IMAGE trainer ...", ct.runtime),
        ),
        (Some(ct), None) if allocated => f.fail(
            Exit::ContainerMissingNv,
            format!(
                "no NVIDIA driver inside the {} container{since}: add --nv",
                ct.runtime
            ),
            &format!("{} exec --nv IMAGE trainer ...", ct.runtime),
        ),
        (None, _) if allocated => f.fail(
            Exit::AllocatedGpuNotVisible,
            format!(
                "GPUs were allocated ({alloc}) but no NVIDIA driver was found: {}",
                c.reason
            ),
            "run `nvidia-smi` on the node; if it fails the node's driver is broken, tell the admins",
        ),
        (ct, _) if c.require_gpu => f.fail(
            Exit::NoDriver,
            format!("no NVIDIA driver: {}", c.reason),
            if ct.is_some() {
                "run on a GPU node with `--gres=gpu:1` and pass --nv to the container, or use \
                 --device cpu"
            } else {
                "run on a GPU node (e.g. `sbatch -p q_ai4 --gres=gpu:1`) or use --device cpu"
            },
        ),
        _ => f.push(
            Level::Info,
            None,
            "no NVIDIA driver: training runs on the CPU".into(),
            None,
        ),
    }
}

/// The NVRTC findings of the `cuda` backend: none found, or found under a name cudarc skips.
pub(super) fn check_nvrtc(f: &mut Findings, nvrtc: Option<&NvrtcInfo>) {
    match nvrtc {
        None => f.push(
            Level::Warn,
            None,
            "NVRTC (libnvrtc) not found: the cuda backend compiles kernels with it at run time"
                .into(),
            Some("load the CUDA module (`module load cuda/12.x`) or use an image that ships libnvrtc"),
        ),
        Some(n) if !n.cudarc_loads_it => {
            let target = n.path.as_deref().unwrap_or(&n.library);
            f.push(
                Level::Warn,
                None,
                format!(
                    "NVRTC is there only as {} (CUDA {}), a name this build's CUDA {} bindings \
                     do not look for: the cuda backend will not find it",
                    n.library,
                    n.version.map_or("?".into(), |v| v.to_string()),
                    crate::cluster::nvrtc::cudarc_major()
                ),
                Some(&format!(
                    "mkdir -p ~/.trainer-nvrtc && ln -sf {target} ~/.trainer-nvrtc/libnvrtc.so && \
                     export LD_LIBRARY_PATH=~/.trainer-nvrtc:$LD_LIBRARY_PATH (scripts/gpu-check.sh \
                     does this); CUDA 13 no longer compiles for V100"
                )),
            );
        }
        Some(_) => {}
    }
}

/// One backend against the driver and the visible GPUs: the rule that decided, as a finding.
/// The primary backend's refusal fails the report; another's is a warning naming it alone.
pub(super) fn check_backend(
    f: &mut Findings,
    b: &BackendNeeds,
    primary: bool,
    driver: &DriverInfo,
    visible: &[&GpuInfo],
) -> (Rule, bool) {
    let v = driver_rule(b, driver.cuda_driver_version, &driver.driver_version);
    let mut runs = v.runs;
    let not_primary = |m: &str| {
        format!(
            "{m}; only `--backend {}` is affected, the default GPU backend runs",
            b.backend.name()
        )
    };
    match (v.runs, v.rule) {
        (true, Rule::RuntimeNotNewerThanDriver) => f.push(Level::Ok, None, v.message, None),
        (true, Rule::MinorVersionCompatibility) => f.push(Level::Info, None, v.message, None),
        (true, _) => f.push(Level::Warn, None, v.message, v.fix.as_deref()),
        (false, _) if primary => f.fail(
            Exit::RuntimeNewerThanDriver,
            v.message,
            v.fix.as_deref().unwrap_or_default(),
        ),
        (false, _) => f.push(Level::Warn, None, not_primary(&v.message), v.fix.as_deref()),
    }
    for g in visible {
        let Some(cc) = g.compute_capability else {
            continue;
        };
        match gpu_rule(b, g.index, &g.name, cc) {
            Ok(line) => f.push(Level::Ok, None, line, None),
            Err((code, message, fix)) => {
                runs = false;
                if primary {
                    f.fail(code, message, &fix);
                } else {
                    f.push(Level::Warn, None, not_primary(&message), Some(&fix));
                }
            }
        }
    }
    (v.rule, runs)
}

/// MIG on a GPU selected without a MIG UUID.
pub(super) fn check_mig(f: &mut Findings, g: &GpuInfo, v: &VisibleGpu) {
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
