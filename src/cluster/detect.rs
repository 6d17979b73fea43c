//! The scheduler environment of this process, and its human-readable form.

use super::scheduler::{ClusterEnv, detect};
use super::vars::Vars;
use crate::error::ExitError;

/// The scheduler environment of this process (reads the process environment once). A bad
/// environment exits with [`super::exit_codes::BAD_CLUSTER_ENV`].
pub(crate) fn detect_env() -> anyhow::Result<ClusterEnv> {
    detect(&Vars::from_process()).map_err(|e| {
        ExitError::with_source(
            super::exit_codes::BAD_CLUSTER_ENV,
            "reading the scheduler environment",
            e,
        )
        .into()
    })
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
