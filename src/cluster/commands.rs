//! The `trainer env`, `trainer doctor` and `trainer mig-pick` entry points the CLI calls.

use std::process::ExitCode;

use super::doctor::DoctorReport;
use super::env::{ClusterEnv, detect};
use super::gpu::probe_driver;
use super::mig::pick_free_mig;
use super::vars::Vars;
use super::visible_devices::VisibleDevices;
use crate::error::ExitError;

/// The scheduler environment of this process (reads the process environment once). A bad
/// environment exits with [`super::exit_codes::BAD_CLUSTER_ENV`].
pub fn detect_env() -> anyhow::Result<ClusterEnv> {
    detect(&Vars::from_process()).map_err(|e| {
        ExitError::with_source(
            super::exit_codes::BAD_CLUSTER_ENV,
            "reading the scheduler environment",
            e,
        )
        .into()
    })
}

/// `trainer env [--json]`: ranks, hosts, rendezvous, job ids and devices.
pub fn cmd_env(json: bool) -> anyhow::Result<()> {
    let env = detect_env()?;
    if json {
        let mut v = serde_json::to_value(&env)?;
        if let Some(m) = v.as_object_mut() {
            // Whether this binary can run several ranks (cargo feature `mpi`).
            m.insert("mpi".into(), crate::dist::MPI_BUILT.into());
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render_env(&env));
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

/// Human-readable form of [`ClusterEnv`].
pub fn render_env(e: &ClusterEnv) -> String {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    let mut rows: Vec<(&str, String)> = vec![
        ("scheduler", format!("{} ({})", e.scheduler, e.mode)),
        ("rank", format!("{} of {}", e.rank, e.world_size)),
        (
            "local rank",
            format!("{} of {}", e.local_rank, e.local_world_size),
        ),
        ("node rank", format!("{} of {}", e.node_rank, e.num_nodes)),
        (
            "main address",
            format!("{}:{}", e.main_address, e.main_port),
        ),
        ("hosts", summarise_hosts(&e.hosts)),
        ("job id", opt(&e.job_id)),
        ("array job id", opt(&e.array_job_id)),
        (
            "array task id",
            e.array_task_id.map_or("-".into(), |t| t.to_string()),
        ),
        (
            "restart count",
            e.restart_count.map_or("-".into(), |t| t.to_string()),
        ),
        ("partition", opt(&e.partition)),
        ("CUDA_VISIBLE_DEVICES", e.visible_devices.describe()),
        (
            "device",
            match &e.device {
                Some(d) => match &d.visible_entry {
                    Some(entry) => format!(
                        "cuda:{} (CUDA_VISIBLE_DEVICES entry {entry})",
                        d.cuda_ordinal
                    ),
                    None => format!("cuda:{}", d.cuda_ordinal),
                },
                None => "cpu (every GPU hidden)".into(),
            },
        ),
    ];
    if !e.gpu_allocation.is_empty() {
        let a: Vec<String> = e
            .gpu_allocation
            .iter()
            .map(|a| format!("{}={}", a.var, a.value))
            .collect();
        rows.push(("GPU allocation", a.join(" ")));
    }
    let mut out: String = rows.iter().map(|(k, v)| format!("{k:<22} {v}\n")).collect();
    for n in &e.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

fn summarise_hosts(hosts: &[String]) -> String {
    const SHOWN: usize = 8;
    if hosts.len() <= SHOWN {
        hosts.join(" ")
    } else {
        format!("{} ... ({} hosts)", hosts[..SHOWN].join(" "), hosts.len())
    }
}

/// `trainer doctor [--require-gpu] [--json]`: the report, and its documented exit code.
///
/// With `TRAINER_CHECK_NCCL=1` and a usable GPU, it also runs one rank's NCCL all-reduce on the
/// first visible GPU (builds with `--features cuda,mpi`; `scripts/gpu-check.sh` uses this).
pub fn cmd_doctor(require_gpu: bool, json: bool) -> anyhow::Result<ExitCode> {
    let mut report = DoctorReport::collect(require_gpu);
    if std::env::var("TRAINER_CHECK_NCCL").is_ok_and(|v| v == "1") && report.exit_code == 0 {
        report.check_nccl(crate::dist::nccl_self_test(0));
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(ExitCode::from(report.exit_code))
}

/// `trainer mig-pick`: prints a free MIG UUID on stdout, or the reason on stderr with its code.
pub fn cmd_mig_pick() -> anyhow::Result<ExitCode> {
    let vars = Vars::from_process();
    let driver = probe_driver(&vars);
    match pick_free_mig(&driver, &VisibleDevices::from_vars(&vars)) {
        Ok(pick) => {
            println!("{}", pick.uuid);
            eprintln!(
                "mig-pick: {} on GPU {} ({})",
                pick.uuid, pick.gpu_index, pick.gpu_name
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("mig-pick: {e}");
            Ok(ExitCode::from(e.code))
        }
    }
}
