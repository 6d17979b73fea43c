//! The run directory: where a run's args, metadata, metrics and checkpoints go.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

/// Where a run directory comes from: `--out`, `--run-name`, `--resume`, and the scheduler's
/// job id (for default names and for finding a requeued job's directory).
#[derive(Debug, Clone, Copy)]
pub struct Naming<'a> {
    pub out: Option<&'a Path>,
    pub run_name: Option<&'a str>,
    pub resume: Option<&'a str>,
    pub job_id: Option<&'a str>,
}

/// Picks the run directory. With `--resume auto` and no explicit name, the newest directory
/// under `root` ending in `_<job id>` is reused so that a requeued job finds its checkpoints.
pub fn resolve(n: &Naming<'_>, root: &Path) -> Result<PathBuf> {
    if let Some(out) = n.out {
        return Ok(out.to_path_buf());
    }
    if let Some(name) = n.run_name {
        return Ok(root.join(name));
    }
    if n.resume == Some("auto")
        && let Some(job) = n.job_id
        && let Some(existing) = newest_with_suffix(root, &format!("_{job}"))
    {
        return Ok(existing);
    }
    let stamp = chrono::Local::now().format("%Y%m%d_%H%M%S");
    Ok(root.join(format!("{stamp}_{}", n.job_id.unwrap_or("local"))))
}

fn newest_with_suffix(root: &Path, suffix: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found.pop()
}

/// Creates the run directory (and its `checkpoints/`), failing clearly when it is not writable.
pub fn create(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir.join("checkpoints"))
        .with_context(|| format!("cannot create run directory {}", dir.display()))?;
    let probe = dir.join(".write-test");
    File::create(&probe)
        .with_context(|| format!("run directory {} is not writable", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Host name, for run metadata.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// What `run_meta.json` records about every run.
#[derive(Serialize, Debug, Clone)]
pub struct RunMeta {
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
    pub fn new(
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

/// The checkpoint to resume from: a given file, or with `auto` the run directory's
/// `checkpoints/last.safetensors` when it exists.
pub fn resume_source(resume: Option<&str>, run_dir: &Path) -> Result<Option<PathBuf>> {
    match resume {
        None => Ok(None),
        Some("auto") => {
            let last = run_dir.join("checkpoints").join("last.safetensors");
            Ok(last.is_file().then_some(last))
        }
        Some(p) => {
            let p = PathBuf::from(p);
            if !p.is_file() {
                bail!("--resume {}: no such checkpoint file", p.display());
            }
            Ok(Some(p))
        }
    }
}

/// The run directory of a (possibly multi-rank) run: rank 0 resolves it under `default_root`
/// (the name may contain a timestamp), then tells the other ranks. Nothing is created here.
pub fn shared(
    comm: &dyn crate::dist::Collective,
    naming: &Naming<'_>,
    default_root: &Path,
) -> Result<PathBuf> {
    let mut bytes = Vec::new();
    if comm.rank() == 0 {
        let dir = resolve(naming, default_root)?;
        bytes = dir.to_string_lossy().into_owned().into_bytes();
    }
    comm.broadcast_bytes(&mut bytes, 0)?;
    Ok(PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()))
}
