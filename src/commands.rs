//! The commands that are not training: `trainer env`, `trainer doctor`, `trainer mig-pick`
//! and `trainer synth-connectome`.

use std::process::ExitCode;

use anyhow::Result;

use crate::cluster::doctor::DoctorReport;
use crate::cluster::gpu::probe_driver;
use crate::cluster::mig::pick_free_mig;
use crate::cluster::vars::Vars;
use crate::cluster::visible_devices::VisibleDevices;
use crate::cluster::{detect_env, render_env};
use crate::data::connectome::{SynthOptions, write_synthetic_cohort_with};
use crate::exit::Exit;

/// `trainer env [--json]`: ranks, hosts, rendezvous, job ids and devices.
pub(crate) fn cmd_env(json: bool) -> anyhow::Result<()> {
    let env = detect_env()?;
    // The device line names the GPU a run would take; without a driver it would not get it.
    let no_driver = env
        .device
        .as_ref()
        .and_then(|_| match probe_driver(&Vars::from_process()) {
            crate::cluster::gpu::DriverProbe::Absent { reason } => Some(reason),
            crate::cluster::gpu::DriverProbe::Present(_) => None,
        });
    // With a driver: which of CUDA's compatibility rules decides for each GPU backend.
    let rules = gpu_rules();
    if json {
        let mut v = serde_json::to_value(&env)?;
        if let Some(m) = v.as_object_mut() {
            // Whether this binary can run several ranks (cargo feature `mpi`).
            m.insert("mpi".into(), crate::dist::MPI_BUILT.into());
            if !rules.is_empty() {
                m.insert("gpu_rules".into(), serde_json::to_value(&rules)?);
            }
            if let Some(reason) = &no_driver {
                m.insert("no_driver".into(), reason.clone().into());
            }
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render_env(&env));
        if let Some(reason) = &no_driver {
            println!(
                "driver                 none ({reason}): a run here stops with exit 10 instead \
                 of using that device; `trainer doctor` says more"
            );
        }
        for r in &rules {
            println!(
                "GPU rule               {}: {} ({}){}",
                r.needs.backend.name(),
                r.rule.map_or("-", |x| x.name()),
                match r.runs {
                    Some(true) => "runs",
                    Some(false) => "does not run: `trainer doctor` says why",
                    None => "not checked",
                },
                if r.in_binary { "" } else { ", the GPU image's" }
            );
        }
        println!(
            "mpi                    {}",
            if crate::dist::MPI_BUILT {
                "built in (srun --mpi=pmix / mpirun)"
            } else {
                "not built (cargo feature mpi)"
            }
        );
    }
    Ok(())
}

/// The GPU backends against this machine's driver (empty without a driver).
fn gpu_rules() -> Vec<crate::cluster::doctor::BackendCheck> {
    match probe_driver(&Vars::from_process()) {
        crate::cluster::gpu::DriverProbe::Present(_) => DoctorReport::collect(true).backends,
        crate::cluster::gpu::DriverProbe::Absent { .. } => Vec::new(),
    }
}

/// `trainer doctor [--require-gpu] [--json]`: the report, and its documented exit code.
///
/// With `TRAINER_CHECK_NCCL=1` and a usable GPU, it also runs one rank's NCCL all-reduce on the
/// first visible GPU (builds with `--features cuda,mpi`; `scripts/gpu-check.sh` uses this).
pub(crate) fn cmd_doctor(require_gpu: bool, json: bool) -> anyhow::Result<ExitCode> {
    let mut report = DoctorReport::collect(require_gpu);
    if std::env::var("TRAINER_CHECK_NCCL").is_ok_and(|v| v == "1")
        && report.exit_code == Exit::Ok.code()
    {
        report.check_nccl(crate::dist::nccl_self_test(0));
    }
    let adapters = crate::backend::wgpu::adapters();
    if json {
        let mut v = serde_json::to_value(&report)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("wgpu".into(), wgpu_record(&adapters));
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", report.render());
        print!("{}", render_wgpu(&adapters));
    }
    Ok(Exit::from_status(report.exit_code.into()).into())
}

/// The `wgpu` part of `trainer doctor --json`: built or not, Burn's settings, the adapters.
fn wgpu_record(adapters: &[crate::backend::wgpu::Adapter]) -> serde_json::Value {
    use crate::backend::BackendKind;
    serde_json::json!({
        "built": BackendKind::Wgpu.compiled(),
        "cubecl": BackendKind::Wgpu.cubecl_settings(),
        "cuda_cubecl": BackendKind::Cuda.cubecl_settings(),
        "adapters": adapters,
    })
}

/// The `wgpu` lines of `trainer doctor`.
fn render_wgpu(adapters: &[crate::backend::wgpu::Adapter]) -> String {
    use crate::backend::{BackendKind, wgpu};
    use std::fmt::Write;
    let on = |b: bool| if b { "on" } else { "off" };
    let mut out = String::from("\nwgpu backend (Vulkan/Metal/DX12):\n");
    if !BackendKind::Wgpu.compiled() {
        out.push_str("  not built (cargo feature wgpu)\n");
        return out;
    }
    let _ = writeln!(
        out,
        "  Burn fusion {} (wgpu-fusion: on), autotune {} (cuda: fusion off, autotune {})",
        on(wgpu::FUSION_DEFAULT),
        on(wgpu::AUTOTUNE),
        on(wgpu::AUTOTUNE)
    );
    if adapters.is_empty() {
        out.push_str(
            "  no adapter: no Vulkan driver (Debian: apt-get install mesa-vulkan-drivers for the \
             software one)\n",
        );
    }
    for a in adapters {
        let device = if a.is_gpu() {
            let n = adapters[..a.index].iter().filter(|b| b.is_gpu()).count();
            format!("--device gpu:{n}")
        } else if a.kind == "cpu" {
            "--device cpu (software, runs on the CPU)".to_string()
        } else {
            "not selectable".to_string()
        };
        let _ = writeln!(out, "  [{}] {}: {device}", a.index, a.describe());
    }
    out
}

/// `trainer mig-pick`: prints a free MIG UUID on stdout, or the reason on stderr with its code.
pub(crate) fn cmd_mig_pick() -> anyhow::Result<ExitCode> {
    let vars = Vars::from_process();
    let driver = probe_driver(&vars);
    match pick_free_mig(&driver, &VisibleDevices::from_vars(&vars)) {
        Ok(pick) => {
            println!("{}", pick.uuid);
            eprintln!(
                "mig-pick: {} on GPU {} ({})",
                pick.uuid, pick.gpu_index, pick.gpu_name
            );
            Ok(Exit::Ok.into())
        }
        Err(e) => {
            eprintln!("mig-pick: {e}");
            Ok(Exit::from_status(e.code.into()).into())
        }
    }
}

/// `trainer synth-connectome`.
pub(crate) fn synth(options: &SynthOptions, out: &std::path::Path) -> Result<()> {
    let summary = write_synthetic_cohort_with(out, options)?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}
