//! Which NVIDIA drivers and GPUs each GPU backend runs on, by CUDA's own rules (NVIDIA's CUDA
//! Compatibility guide):
//!
//! * **runtime ≤ driver**: a driver runs every runtime up to the CUDA version it reports, of its
//!   own major version and of older ones (backward compatibility: a CUDA 13 driver runs CUDA 12).
//! * **minor version compatibility**: within one major version, a runtime newer than the driver
//!   still runs (CUDA 12.x on any driver of the 12 family, R525 and newer), with one limit that
//!   matters here: the driver cannot JIT-compile PTX newer than itself. A backend whose kernels
//!   are compiled machine code (SASS, cubin) runs; one that hands the driver new PTX does not.
//! * **an older major** (a CUDA 11 driver, below R525, under a CUDA 12 runtime) runs nothing.
//! * **the GPU**: a backend runs on a GPU only if it has kernels for its compute capability.
//!
//! The two GPU backends differ in what they load. `tch` is LibTorch from PyTorch's CUDA 12.8
//! wheel, which carries SASS for sm_70 … sm_120 ([`TCH_SASS`]), so it needs no PTX JIT. `cuda`
//! compiles CubeCL's kernels at run time with NVRTC for the device's own architecture and loads
//! the resulting cubin (our copy of cubecl-cuda, `crates/cubecl-cuda`, which upstream loads as
//! PTX): no PTX JIT either ([`CUDA_LOADS_CUBIN`]); its runtime is NVRTC's version, and NVRTC
//! decides which compute capabilities it can compile for.
//!
//! Everything here is pure: [`driver_rule`] and [`gpu_rule`] take versions and capabilities,
//! so the whole driver × backend × GPU matrix is tested without a GPU (`doctor/tests_matrix.rs`).

use serde::Serialize;

use super::cuda::{ComputeCapability, CudaVersion, min_compute_capability, min_runtime_for};
use crate::exit::Exit;

/// A backend that trains on an NVIDIA GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuBackend {
    /// LibTorch (cargo feature `tch`), the default on a GPU.
    Tch,
    /// CubeCL's CUDA runtime (cargo feature `cuda`).
    Cuda,
}

impl GpuBackend {
    /// Its `--backend` name.
    pub fn name(self) -> &'static str {
        match self {
            GpuBackend::Tch => "tch",
            GpuBackend::Cuda => "cuda",
        }
    }

    /// Whether this binary was built with it.
    pub fn compiled(self) -> bool {
        match self {
            GpuBackend::Tch => cfg!(feature = "tch"),
            GpuBackend::Cuda => cfg!(feature = "cuda"),
        }
    }

    /// The GPU backends `trainer doctor` checks, the one a GPU run takes by default first: those
    /// of this binary, or, in a binary with none (the CPU build), those of the GPU image, so
    /// that doctor on a GPU node still says whether the GPU image would run there.
    pub fn for_doctor() -> (Vec<GpuBackend>, bool) {
        let built: Vec<GpuBackend> = [GpuBackend::Tch, GpuBackend::Cuda]
            .into_iter()
            .filter(|b| b.compiled())
            .collect();
        if built.is_empty() {
            (vec![GpuBackend::Tch, GpuBackend::Cuda], false)
        } else {
            (built, true)
        }
    }
}

/// The CUDA runtime of PyTorch 2.9.0's wheel on PyPI (`torch.version.cuda`), the LibTorch the
/// `tch` backend links and the GPU image ships.
pub(crate) const TCH_CUDA_RUNTIME: CudaVersion = CudaVersion::new(12, 8);

/// Run-time override of [`TCH_CUDA_RUNTIME`] (`12.4`, `12040`), for a binary linked against
/// another LibTorch.
pub(crate) const TCH_RUNTIME_ENV: &str = "TRAINER_TCH_CUDA_RUNTIME";

/// The architectures PyTorch 2.9.0+cu128 carries SASS for (`torch._C._cuda_getArchFlags()`:
/// sm_70 sm_75 sm_80 sm_86 sm_90 sm_100 sm_120). SASS for sm_XY runs on a GPU of compute
/// capability X.Z for Z ≥ Y (same major), so 8.9 (Ada) runs sm_86's and 10.3 sm_100's.
pub(crate) const TCH_SASS: &[(u32, u32)] =
    &[(7, 0), (7, 5), (8, 0), (8, 6), (9, 0), (10, 0), (12, 0)];

/// The `cuda` backend loads NVRTC's cubin, built for the device's compute capability, not PTX
/// (`crates/cubecl-cuda/src/compute/context.rs`): it needs no PTX JIT by the driver.
pub(crate) const CUDA_LOADS_CUBIN: bool = true;

/// What a GPU backend needs of the driver and the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendNeeds {
    pub backend: GpuBackend,
    /// The CUDA runtime its kernels were built with (tch: LibTorch's; cuda: NVRTC's).
    pub runtime: CudaVersion,
    /// Where [`Self::runtime`] came from.
    pub runtime_source: String,
    /// Whether the driver must JIT-compile PTX (as new as the runtime) to run it.
    pub ptx_jit: bool,
    /// The compute capabilities it has kernels for, in words.
    pub kernels: String,
}

impl BackendNeeds {
    /// The `tch` backend: LibTorch's runtime (or [`TCH_RUNTIME_ENV`]) and its SASS.
    pub fn tch(runtime_override: Option<CudaVersion>) -> Self {
        let (runtime, runtime_source) = match runtime_override {
            Some(v) => (v, TCH_RUNTIME_ENV.to_string()),
            None => (
                TCH_CUDA_RUNTIME,
                "PyTorch 2.9.0+cu128 (LibTorch)".to_string(),
            ),
        };
        let archs: Vec<String> = TCH_SASS.iter().map(|(a, b)| format!("sm_{a}{b}")).collect();
        Self {
            backend: GpuBackend::Tch,
            runtime,
            runtime_source,
            ptx_jit: false,
            kernels: format!("SASS for {}", archs.join(" ")),
        }
    }

    /// The `cuda` backend with NVRTC of version `runtime` (found, or assumed from `source`).
    pub fn cuda(runtime: CudaVersion, source: &str) -> Self {
        let min = min_compute_capability(runtime);
        Self {
            backend: GpuBackend::Cuda,
            runtime,
            runtime_source: source.to_string(),
            ptx_jit: !CUDA_LOADS_CUBIN,
            kernels: format!(
                "compiled at run time by NVRTC {runtime} for the GPU's own architecture \
                 (compute capability {min} and newer that NVRTC {runtime} knows)"
            ),
        }
    }

    /// Whether it has kernels for a GPU of compute capability `cc`.
    pub fn has_kernels_for(&self, cc: ComputeCapability) -> bool {
        match self.backend {
            GpuBackend::Tch => TCH_SASS
                .iter()
                .any(|&(major, minor)| cc.major == major && cc.minor >= minor),
            GpuBackend::Cuda => {
                cc >= min_compute_capability(self.runtime) && self.runtime >= min_runtime_for(cc)
            }
        }
    }
}

/// The rule that decided whether a backend runs on the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rule {
    /// The driver's CUDA is at least the runtime's (same or newer major).
    RuntimeNotNewerThanDriver,
    /// Same major, older driver, compiled kernels: CUDA's minor version compatibility.
    MinorVersionCompatibility,
    /// Same major, older driver, but the backend needs PTX newer than the driver can JIT.
    PtxNewerThanDriver,
    /// The driver is of an older major version than the runtime.
    DriverOfOlderMajor,
    /// The driver did not say which CUDA it supports.
    DriverCudaUnknown,
}

impl Rule {
    /// Its name in reports (`doctor --json`, `run_meta.json`).
    pub fn name(self) -> &'static str {
        match self {
            Rule::RuntimeNotNewerThanDriver => "runtime-not-newer-than-driver",
            Rule::MinorVersionCompatibility => "minor-version-compatibility",
            Rule::PtxNewerThanDriver => "ptx-newer-than-driver",
            Rule::DriverOfOlderMajor => "driver-of-older-major",
            Rule::DriverCudaUnknown => "driver-cuda-unknown",
        }
    }
}

/// The oldest driver of a CUDA major version's family (Linux), for messages.
pub(crate) fn family_driver(major: u32) -> &'static str {
    match major {
        0..=10 => "R418",
        11 => "R450 (450.80.02)",
        12 => "R525 (525.60.13)",
        _ => "R580 (580.65.06)",
    }
}

/// The oldest driver that supports a runtime fully (no compatibility rule needed), for messages.
pub(crate) fn full_driver(runtime: CudaVersion) -> String {
    let branch = match (runtime.major, runtime.minor) {
        (11, m) => 450 + 5 * m.min(8),
        (12, 0) => 525,
        (12, 1) => 530,
        (12, 2) => 535,
        (12, 3) => 545,
        (12, 4) => 550,
        (12, 5) => 555,
        (12, 6) => 560,
        (12, 7) => 565,
        (12, 8) => 570,
        (12, _) => 575,
        (13, _) => 580,
        _ => return format!("a driver for CUDA {runtime}"),
    };
    format!("R{branch}")
}

/// What the CPU queue offers instead, said with every refusal.
pub(crate) const CPU_INSTEAD: &str = "train on the CPU instead: `--device cpu` on the CPU queue \
     (`sbatch -p q_cn`, no `--gres`) with the CPU image (trainer-cpu.sif)";

/// The outcome of [`driver_rule`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Verdict {
    pub backend: GpuBackend,
    pub rule: Rule,
    /// Whether the backend runs on this driver.
    pub runs: bool,
    /// The exit code when it does not.
    pub code: Option<u8>,
    pub message: String,
    pub fix: Option<String>,
}

/// Whether backend `b` runs on a driver that supports CUDA `driver` (`None`: unknown), and the
/// rule that says so. `driver_version` (`535.183.01`) is only named in messages.
pub(crate) fn driver_rule(
    b: &BackendNeeds,
    driver: Option<CudaVersion>,
    driver_version: &str,
) -> Verdict {
    let name = b.backend.name();
    let rt = b.runtime;
    let verdict =
        |rule: Rule, runs: bool, code: Option<Exit>, message: String, fix: Option<String>| {
            Verdict {
                backend: b.backend,
                rule,
                runs,
                code: code.map(Exit::code),
                message,
                fix,
            }
        };
    let Some(d) = driver else {
        return verdict(
            Rule::DriverCudaUnknown,
            true,
            None,
            format!(
                "backend {name} (CUDA {rt}): driver {driver_version} did not report its CUDA \
                 version; the compatibility rules cannot be checked"
            ),
            None,
        );
    };
    if d >= rt {
        return verdict(
            Rule::RuntimeNotNewerThanDriver,
            true,
            None,
            format!("backend {name}: CUDA runtime {rt} ≤ driver {driver_version}'s CUDA {d}"),
            None,
        );
    }
    if d.major < rt.major {
        return verdict(
            Rule::DriverOfOlderMajor,
            false,
            Some(Exit::RuntimeNewerThanDriver),
            format!(
                "backend {name} needs a driver of the CUDA {} family ({} or newer; {} for \
                 CUDA {rt} in full), and driver {driver_version} supports CUDA {d} only: \
                 CUDA {} applications do not run on a CUDA {} driver",
                rt.major,
                family_driver(rt.major),
                full_driver(rt),
                rt.major,
                d.major
            ),
            Some(format!(
                "{CPU_INSTEAD}; or a node with driver {} or newer (ask the admins)",
                family_driver(rt.major)
            )),
        );
    }
    if b.ptx_jit {
        return verdict(
            Rule::PtxNewerThanDriver,
            false,
            Some(Exit::RuntimeNewerThanDriver),
            format!(
                "backend {name} hands the driver PTX of CUDA {rt}, which driver \
                 {driver_version} (CUDA {d}) cannot JIT-compile: minor version compatibility \
                 covers compiled kernels only"
            ),
            Some(format!(
                "use `--backend tch` (compiled kernels: runs on this driver), or a driver {} or \
                 newer",
                full_driver(rt)
            )),
        );
    }
    verdict(
        Rule::MinorVersionCompatibility,
        true,
        None,
        format!(
            "backend {name}: CUDA runtime {rt} on driver {driver_version} (CUDA {d}) runs under \
             CUDA's minor version compatibility (same major version, compiled kernels, no PTX \
             JIT); features that need a newer driver are unavailable, none of which {name} uses"
        ),
        None,
    )
}

/// Whether backend `b` has kernels for GPU `index` (`name`, compute capability `cc`): `Ok` with
/// a line, or the exit code, message and fix.
pub(crate) fn gpu_rule(
    b: &BackendNeeds,
    index: u32,
    name: &str,
    cc: ComputeCapability,
) -> Result<String, (Exit, String, String)> {
    let backend = b.backend.name();
    if b.has_kernels_for(cc) {
        return Ok(format!(
            "GPU {index} {name} (cc {cc}): backend {backend} has kernels for it"
        ));
    }
    let why = match b.backend {
        GpuBackend::Tch => format!("LibTorch's kernels are {}", b.kernels),
        GpuBackend::Cuda if cc < min_compute_capability(b.runtime) => format!(
            "NVRTC {} compiles for compute capability {} and newer{}",
            b.runtime,
            min_compute_capability(b.runtime),
            if b.runtime.major >= 13 {
                " (CUDA 13 dropped Maxwell, Pascal and Volta)"
            } else {
                ""
            }
        ),
        GpuBackend::Cuda => format!(
            "NVRTC {} does not know it (compute capability {cc} needs CUDA {} or newer)",
            b.runtime,
            min_runtime_for(cc)
        ),
    };
    let other = match b.backend {
        GpuBackend::Cuda => "`--backend tch` (SASS for sm_70 to sm_120), ",
        GpuBackend::Tch => "",
    };
    Err((
        Exit::UnsupportedComputeCapability,
        format!(
            "GPU {index} {name} (compute capability {cc}): backend {backend} has no kernels for it: {why}"
        ),
        format!("{other}a partition with supported GPUs, or {CPU_INSTEAD}"),
    ))
}
