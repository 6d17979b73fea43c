//! The driver × backend × GPU matrix of CUDA's compatibility rules (`cluster::compat`), as a
//! run's preflight sees it: drivers 470 … 580, backends `tch` and `cuda` (the GPU image's NVRTC
//! 12.8), GPUs V100 … H200; each case with its exit code and the words of its message. The same
//! table is in containers/README.md and docs/guide/backends.md (checked below).

use super::*;
use crate::cluster::compat::{
    BackendNeeds, CUDA_LOADS_CUBIN, GpuBackend, Rule, TCH_CUDA_RUNTIME, driver_rule,
};
use crate::cluster::cuda::ComputeCapability;
use crate::cluster::exit_codes as code;
use crate::cluster::gpu::{DriverInfo, GpuInfo};

/// Driver branch, its full version and the CUDA version NVML reports for it.
const DRIVERS: &[(u32, &str, (u32, u32))] = &[
    (470, "470.256.02", (11, 4)),
    (515, "515.105.01", (11, 7)),
    (525, "525.147.05", (12, 0)),
    (535, "535.230.02", (12, 2)),
    (550, "550.163.01", (12, 4)),
    (570, "570.172.08", (12, 8)),
    (580, "580.95.05", (13, 0)),
];

/// The cluster's GPUs and the H100/H200 of the device checks.
const GPUS: &[(&str, (u32, u32))] = &[
    ("Tesla V100-SXM2-32GB", (7, 0)),
    ("NVIDIA A100-SXM4-80GB", (8, 0)),
    ("NVIDIA RTX 6000 Ada Generation", (8, 9)),
    ("NVIDIA H200", (9, 0)),
];

fn gpu(name: &str, cc: (u32, u32)) -> GpuInfo {
    GpuInfo {
        index: 0,
        name: name.into(),
        uuid: "GPU-0aaaaaaa-1111-2222-3333-444455556666".into(),
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

fn driver(version: &str, cuda: (u32, u32), g: GpuInfo) -> DriverProbe {
    DriverProbe::Present(DriverInfo {
        driver_version: version.into(),
        cuda_driver_version: Some(CudaVersion::new(cuda.0, cuda.1)),
        library: "libnvidia-ml.so.1".into(),
        gpus: vec![g],
        errors: Vec::new(),
    })
}

/// The GPU image's NVRTC (from PyTorch's wheel), or another version.
fn nvrtc(v: (u32, u32)) -> Option<NvrtcInfo> {
    Some(NvrtcInfo {
        library: format!("libnvrtc.so.{}", v.0),
        version: Some(CudaVersion::new(v.0, v.1)),
        path: None,
        cudarc_loads_it: true,
    })
}

/// A Slurm job on one GPU, as `sbatch --gres=gpu:1` gives it.
fn job() -> Vars {
    Vars::from_pairs([
        ("SLURM_JOB_ID", "77"),
        ("SLURM_JOB_NODELIST", "ai01"),
        ("SLURM_JOB_GPUS", "0"),
        ("CUDA_VISIBLE_DEVICES", "0"),
    ])
}

/// A run's preflight for `backend` on this driver and GPU.
fn preflight(backend: GpuBackend, drv: DriverProbe, rtc: Option<NvrtcInfo>) -> DoctorReport {
    diagnose_for(&job(), drv, rtc, None, true, &[backend], true)
}

/// The expected outcome of the image's `backend` on a driver of CUDA `d` (any of the four GPUs).
fn expected(d: (u32, u32)) -> (u8, Rule, &'static str) {
    match d {
        (11, _) => (
            code::RUNTIME_NEWER_THAN_DRIVER,
            Rule::DriverOfOlderMajor,
            "CUDA 12 family",
        ),
        (12, m) if m < 8 => (
            code::OK,
            Rule::MinorVersionCompatibility,
            "minor version compatibility",
        ),
        _ => (code::OK, Rule::RuntimeNotNewerThanDriver, "≤ driver"),
    }
}

#[test]
fn the_matrix_of_drivers_backends_and_gpus() {
    let mut cases = 0;
    for &(branch, version, cuda) in DRIVERS {
        for backend in [GpuBackend::Tch, GpuBackend::Cuda] {
            for &(name, cc) in GPUS {
                let r = preflight(
                    backend,
                    driver(version, cuda, gpu(name, cc)),
                    nvrtc((12, 8)),
                );
                let (exit, rule, words) = expected(cuda);
                let case = format!("R{branch} × {} × {name}\n{}", backend.name(), r.render());
                assert_eq!(r.exit_code, exit, "{case}");
                let check = &r.backends[0];
                assert_eq!(check.rule, Some(rule), "{case}");
                assert_eq!(check.runs, Some(exit == code::OK), "{case}");
                assert!(
                    r.findings.iter().any(|f| f.message.contains(words)),
                    "{case}"
                );
                if exit != code::OK {
                    let f = r.failures().next().expect("a failure");
                    let fix = f.fix.as_deref().unwrap_or("");
                    assert!(f.message.contains(version), "{case}");
                    assert!(
                        fix.contains("--device cpu") && fix.contains("q_cn"),
                        "the CPU queue is named: {case}"
                    );
                    assert!(fix.contains("R525"), "the driver needed: {case}");
                } else {
                    assert_eq!(r.failures().count(), 0, "{case}");
                    assert!(
                        r.findings
                            .iter()
                            .any(|f| f.message.contains("has kernels for it")),
                        "{case}"
                    );
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, DRIVERS.len() * 2 * GPUS.len());
}

#[test]
fn cuda_13_nvrtc_has_no_kernels_for_v100_but_tch_does() {
    let v100 = || driver("580.95.05", (13, 0), gpu(GPUS[0].0, GPUS[0].1));
    let r = preflight(GpuBackend::Cuda, v100(), nvrtc((13, 0)));
    assert_eq!(
        r.exit_code,
        code::UNSUPPORTED_COMPUTE_CAPABILITY,
        "{}",
        r.render()
    );
    let f = r.failures().next().expect("a failure");
    assert!(f.message.contains("CUDA 13 dropped"), "{}", f.message);
    assert!(f.fix.as_deref().unwrap_or("").contains("--backend tch"));
    // tch's own SASS covers sm_70 whatever NVRTC the node has.
    let r = preflight(GpuBackend::Tch, v100(), nvrtc((13, 0)));
    assert_eq!(r.exit_code, code::OK, "{}", r.render());
    // doctor checks both: the default (tch) decides, cuda's refusal is a warning naming it.
    let r = diagnose_for(
        &job(),
        v100(),
        nvrtc((13, 0)),
        None,
        true,
        &[GpuBackend::Tch, GpuBackend::Cuda],
        true,
    );
    assert_eq!(r.exit_code, code::OK, "{}", r.render());
    assert!(
        r.findings
            .iter()
            .any(|f| f.level == Level::Warn
                && f.message.contains("only `--backend cuda` is affected"))
    );
    assert_eq!(r.backends[1].runs, Some(false));
}

#[test]
fn a_cuda_13_nvrtc_on_a_cuda_12_driver_is_refused() {
    let r = preflight(
        GpuBackend::Cuda,
        driver("570.172.08", (12, 8), gpu(GPUS[3].0, GPUS[3].1)),
        nvrtc((13, 0)),
    );
    assert_eq!(
        r.exit_code,
        code::RUNTIME_NEWER_THAN_DRIVER,
        "{}",
        r.render()
    );
    assert_eq!(r.backends[0].rule, Some(Rule::DriverOfOlderMajor));
}

#[test]
fn gpus_outside_the_kernels_are_refused() {
    // Pascal (6.0) has no SASS in PyTorch 2.9's CUDA 12.8 wheel; NVRTC 12.8 still compiles
    // for it, so the cuda backend runs there.
    let p100 = || driver("535.230.02", (12, 2), gpu("Tesla P100-PCIE-16GB", (6, 0)));
    let r = preflight(GpuBackend::Tch, p100(), nvrtc((12, 8)));
    assert_eq!(
        r.exit_code,
        code::UNSUPPORTED_COMPUTE_CAPABILITY,
        "{}",
        r.render()
    );
    let f = r.failures().next().expect("a failure");
    assert!(f.message.contains("sm_70") && f.fix.as_deref().unwrap_or("").contains("--device cpu"));
    let r = preflight(GpuBackend::Cuda, p100(), nvrtc((12, 8)));
    assert_eq!(r.exit_code, code::OK, "{}", r.render());
    // Blackwell (12.0) needs NVRTC 12.8: an older one does not know it.
    let b = || {
        driver(
            "580.95.05",
            (13, 0),
            gpu("NVIDIA RTX PRO 6000 Blackwell", (12, 0)),
        )
    };
    assert_eq!(
        preflight(GpuBackend::Cuda, b(), nvrtc((12, 4))).exit_code,
        15
    );
    assert_eq!(preflight(GpuBackend::Tch, b(), nvrtc((12, 4))).exit_code, 0);
}

#[test]
fn a_backend_that_jits_ptx_is_refused_on_an_older_minor_driver() {
    // What the upstream cubecl-cuda does (PTX): refused on R535, naming tch; fine on R570.
    let ptx = BackendNeeds {
        ptx_jit: true,
        ..BackendNeeds::cuda(CudaVersion::new(12, 8), "test")
    };
    let v = driver_rule(&ptx, Some(CudaVersion::new(12, 2)), "535.230.02");
    assert!(!v.runs);
    assert_eq!(v.rule, Rule::PtxNewerThanDriver);
    assert_eq!(v.code, Some(code::RUNTIME_NEWER_THAN_DRIVER));
    assert!(v.fix.as_deref().unwrap_or("").contains("--backend tch"));
    assert!(driver_rule(&ptx, Some(CudaVersion::new(12, 8)), "570.172.08").runs);
    // Ours loads cubin.
    assert!(CUDA_LOADS_CUBIN && !BackendNeeds::cuda(TCH_CUDA_RUNTIME, "x").ptx_jit);
}

#[test]
fn a_driver_without_its_cuda_version_is_a_warning_not_a_refusal() {
    let mut d = driver("550.163.01", (12, 4), gpu(GPUS[1].0, GPUS[1].1));
    if let DriverProbe::Present(i) = &mut d {
        i.cuda_driver_version = None;
    }
    let r = preflight(GpuBackend::Tch, d, nvrtc((12, 8)));
    assert_eq!(r.exit_code, code::OK);
    assert_eq!(r.backends[0].rule, Some(Rule::DriverCudaUnknown));
    assert!(r.findings.iter().any(|f| f.level == Level::Warn));
}

/// The table as containers/README.md and docs/guide/backends.md print it.
fn markdown() -> String {
    let mut out = String::from(
        "| driver (CUDA) | `tch` on V100 / A100 / RTX 6000 Ada / H100–H200 | `cuda` (NVRTC 12.8) on the same |\n\
         | --- | --- | --- |\n",
    );
    for &(branch, _, cuda) in DRIVERS {
        let (exit, rule, _) = expected(cuda);
        let cell = match exit {
            0 => format!("runs ({})", rule.name()),
            _ => format!("exit {exit} ({}): `--device cpu` on q_cn", rule.name()),
        };
        out.push_str(&format!(
            "| R{branch} ({}.{}) | {cell} | {cell} |\n",
            cuda.0, cuda.1
        ));
    }
    out
}

#[test]
fn the_docs_print_the_tested_matrix() {
    let table = markdown();
    for doc in ["containers/README.md", "docs/guide/backends.md"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(doc);
        let text = std::fs::read_to_string(&path).expect("the doc");
        assert!(
            text.contains(&table),
            "{doc} does not hold the tested matrix; put this table in it:\n{table}"
        );
    }
}
