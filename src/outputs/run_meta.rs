//! `run_meta.json`: what a run records about where and how it ran.

use std::path::Path;

use serde::Serialize;

/// Host name, for run metadata.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// What `run_meta.json` records about every run.
#[derive(Serialize, Debug, Clone)]
pub(crate) struct RunMeta {
    pub trainer_version: &'static str,
    pub git_commit: Option<&'static str>,
    pub run_dir: String,
    pub created_at: String,
    pub host: String,
    pub job_id: Option<String>,
    pub backend: String,
    pub device: String,
    pub world_size: usize,
    pub argv: Vec<String>,
    /// Scheduler environment seen at start (rank, job ids, hosts, devices, container).
    pub cluster: serde_json::Value,
    /// The CUDA preflight report (`trainer doctor`), when a CUDA device was requested.
    pub preflight: serde_json::Value,
    /// Whatever else the job wants to record (resume source, effective batch, …).
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl RunMeta {
    /// `cluster`: the scheduler environment seen at start; `preflight`: the CUDA preflight
    /// report, when a CUDA device was requested.
    pub(crate) fn new(
        run_dir: &Path,
        backend: &str,
        device: &str,
        job_id: Option<String>,
        cluster: serde_json::Value,
        preflight: Option<serde_json::Value>,
    ) -> Self {
        Self {
            trainer_version: env!("CARGO_PKG_VERSION"),
            git_commit: option_env!("TRAINER_GIT_COMMIT"),
            run_dir: run_dir.display().to_string(),
            created_at: chrono::Local::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
            host: hostname(),
            job_id,
            backend: backend.to_string(),
            device: device.to_string(),
            world_size: 1,
            argv: std::env::args().collect(),
            cluster,
            preflight: preflight.unwrap_or_else(|| serde_json::json!("not run (CPU device)")),
            extra: Default::default(),
        }
    }
}
