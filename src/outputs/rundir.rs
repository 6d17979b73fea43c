//! The run directory: where a run's args, metadata, metrics and checkpoints go.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::RunDir;
pub(crate) use super::run_meta::RunMeta;

/// Where a run directory comes from: `--out`, `--run-name`, `--resume`, and the scheduler's
/// job id (for default names and for finding a requeued job's directory).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Naming<'a> {
    pub out: Option<&'a Path>,
    pub run_name: Option<&'a str>,
    pub resume: Option<&'a str>,
    pub job_id: Option<&'a str>,
}

/// Picks the run directory. With `--resume auto` and no explicit name, the newest directory
/// under `root` ending in `_<job id>` is reused so that a requeued job finds its checkpoints.
pub(crate) fn resolve(n: &Naming<'_>, root: &Path) -> Result<PathBuf> {
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
    Ok(root.join(default_name(n.job_id)))
}

/// `<YYYYmmdd_HHMMSS>_<milliseconds>_p<pid>_<job id or "local">`: unique among runs started on
/// one machine, even in the same second, and ending in the job id (for `--resume auto`).
pub(crate) fn default_name(job_id: Option<&str>) -> String {
    let now = chrono::Local::now();
    format!(
        "{}_{:03}_p{}_{}",
        now.format("%Y%m%d_%H%M%S"),
        now.timestamp_subsec_millis(),
        std::process::id(),
        job_id.unwrap_or("local")
    )
}

/// The newest directory under `root` whose name ends in `suffix`, preferring those that hold a
/// checkpoint to resume (a start that failed leaves none).
fn newest_with_suffix(root: &Path, suffix: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    let resumable = found
        .iter()
        .rev()
        .find(|p| {
            let run = RunDir::new(p.as_path());
            // A finished run may have dropped its resume checkpoint.
            run.last_checkpoint().is_file() || run.finished_json().is_file()
        })
        .cloned();
    resumable.or_else(|| found.pop())
}

/// A run's hold on its directory: an advisory lock on `<dir>/.lock`, released when the process
/// ends, however it ends (the kernel drops it with the file descriptor, so a dead run's lock
/// is never stale).
#[derive(Debug)]
pub(crate) struct RunLock {
    _file: File,
    dir: std::path::PathBuf,
}

impl Drop for RunLock {
    /// A start that failed before it wrote metrics or a checkpoint (a full disk, a bad flag)
    /// leaves no `.lock`, and no directory if nothing else is in it.
    fn drop(&mut self) {
        if !holds_a_run(&self.dir) {
            let run = RunDir::new(&self.dir);
            let _ = std::fs::remove_file(run.lock_file());
            let _ = std::fs::remove_dir(run.checkpoints());
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// Whether `dir` holds (part of) a run: metrics rows or checkpoints. A directory with only the
/// files a failed start writes (`args.json`, `config.toml`, `run_meta.json`) does not.
pub(crate) fn holds_a_run(dir: &Path) -> bool {
    let run = RunDir::new(dir);
    run.metrics_jsonl().is_file() || run.has_checkpoints()
}

/// Takes the run directory for this run: creates it (and `checkpoints/`), locks it, refuses a
/// directory another live run holds, and one that already holds a run unless `resuming`;
/// removes temporary files that dead processes left behind.
pub(crate) fn claim(dir: &Path, resuming: bool) -> Result<RunLock> {
    if let Some(other) = foreign_entry(dir) {
        bail!(
            "{}: exists and holds {other:?}, but is not a trainer run (no run_meta.json): this \
             run would overwrite it; give it a new --out; nothing was written",
            dir.display()
        );
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create run directory {}", dir.display()))?;
    let run = RunDir::new(dir);
    let lock_path = run.lock_file();
    let existed = lock_path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&lock_path)
        .with_context(|| format!("run directory {} is not writable", dir.display()))?;
    if !try_lock(&file) {
        let holder = std::fs::read_to_string(&lock_path).unwrap_or_default();
        bail!(
            "run directory {} is in use by another run (pid {}): give this run another --out \
             or --run-name, or wait for that one to end",
            dir.display(),
            holder.trim()
        );
    }
    if !resuming && holds_a_run(dir) {
        if !existed {
            let _ = std::fs::remove_file(&lock_path);
        }
        bail!(
            "run directory {} already holds a run (metrics or checkpoints): continue it with \
             --resume auto, or give this run another --out or --run-name",
            dir.display()
        );
    }
    use std::io::{Seek, Write};
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    let checkpoints = run.checkpoints();
    std::fs::create_dir_all(&checkpoints)
        .with_context(|| format!("cannot create {}", checkpoints.display()))?;
    remove_dead_temporaries(dir);
    // Not through a link: a folder other runs share may hold their live temporaries (a process
    // id names a process of one machine only).
    if !is_link(&checkpoints) {
        remove_dead_temporaries(&checkpoints);
    }
    Ok(RunLock {
        _file: file,
        dir: dir.to_path_buf(),
    })
}

/// A file of an existing `dir` that this run would overwrite although `dir` is not one of our
/// runs (no `run_meta.json`, which every run writes first): one of the names a run writes
/// (`config.toml`, `args.json`, `curves.svg`, metrics, results), a non-empty `checkpoints/` or
/// `tensorboard/`. Other files (a job script's own log or counters) are left alone and allowed.
fn foreign_entry(dir: &Path) -> Option<String> {
    use super::run_files as f;
    if RunDir::new(dir).run_meta_json().exists() {
        return None;
    }
    let ours: Vec<&str> = f::TOP_FILES
        .into_iter()
        .chain([f::EVAL_METRICS_JSON])
        .collect();
    let entries = std::fs::read_dir(dir).ok()?;
    entries.flatten().find_map(|e| {
        let name = e.file_name().to_string_lossy().into_owned();
        let full_dir = [f::CHECKPOINTS, f::TENSORBOARD_DIR].contains(&name.as_str())
            && std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_some());
        (ours.contains(&name.as_str()) || full_dir).then_some(name)
    })
}

/// A non-blocking exclusive `flock` on `file`.
/// The pid written by the live run that holds `dir`'s lock, or `None` when none holds it.
pub(crate) fn held_by(dir: &Path) -> Option<String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(RunDir::new(dir).lock_file())
        .ok()?;
    // Taking the lock for a moment: dropping the file releases it.
    if try_lock(&file) {
        return None;
    }
    let pid = std::fs::read_to_string(RunDir::new(dir).lock_file()).unwrap_or_default();
    Some(pid.trim().to_string())
}

fn try_lock(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a file descriptor this process owns; no memory is shared.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Removes `.<name>.tmp.<pid>` files (see [`crate::files::write_atomic`]) of processes that no
/// longer run.
fn remove_dead_temporaries(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .rsplit_once(".tmp.")
            .filter(|_| name.starts_with('.'))
            .and_then(|(_, pid)| pid.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) == 0 }
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM);
        if !alive && std::fs::remove_file(e.path()).is_ok() {
            eprintln!(
                "removed {}, left by process {pid}, which has ended",
                e.path().display()
            );
        }
    }
}

/// The checkpoint to resume from: a given file, or with `auto` the run directory's
/// `checkpoints/last.safetensors`. `auto` starts afresh where the directory holds no epoch yet,
/// gives none for a finished run without that file (its resume state is dropped at its end:
/// the engine says it is finished and does nothing), and is refused where it holds metrics rows
/// of an unfinished run without that file (a run started again at epoch 1 would append to its
/// metrics): nothing is written then.
pub(crate) fn resume_source(resume: Option<&str>, run_dir: &Path) -> Result<Option<PathBuf>> {
    match resume {
        None => Ok(None),
        Some("auto") => {
            let run = RunDir::new(run_dir);
            let last = run.last_checkpoint();
            if last.is_file() {
                return Ok(Some(last));
            }
            // Metrics rows (written after each epoch's checkpoint) or a finished run: a start
            // from epoch 1 would repeat them. Model files alone (a best model of the weights
            // before training) are rewritten as they were.
            let rows = std::fs::metadata(run.metrics_jsonl()).is_ok_and(|m| m.len() > 0);
            if !rows || run.finished_json().is_file() {
                return Ok(None);
            }
            let resumable: Vec<String> = run
                .epoch_files()
                .iter()
                .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
                .filter(|n| n.starts_with("epoch_"))
                .collect();
            let other = match resumable.last() {
                Some(n) => format!(
                    "resume from an epoch's checkpoint with --resume {}, ",
                    run.checkpoints().join(n).display()
                ),
                None => String::new(),
            };
            bail!(
                "--resume auto: {} holds a run (metrics rows) but not its resume file {}, so \
                 it cannot continue where it stopped (starting again at epoch 1 would append to \
                 its metrics.jsonl); {other}or start a new run (another --out or --run-name); \
                 nothing was written",
                run_dir.display(),
                last.display()
            )
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

/// Whether `p` is a symbolic link.
fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// The run directory of a (possibly multi-rank) run: rank 0 resolves it under `default_root`
/// (the name may contain a timestamp), then tells the other ranks. Nothing is created here.
pub(crate) fn shared(
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
