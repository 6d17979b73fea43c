//! Sizes checked before anything is allocated or written (`--batch-size 1e8` or `--nodes 1e6`
//! would abort in the allocator, `--subjects 1e8` fill the disk), and the benchmark's temporary
//! cohort removed on every signal that ends the process.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use anyhow::Result;

use super::{BenchSettings, BenchTarget};
use crate::error::ExitError;
use crate::exit::Exit;

/// Bytes the MNIST CNN's training step holds per image (input, activations of both
/// convolutions, pooling, the dense layers and their gradients, in f32), rounded up.
const MNIST_BYTES_PER_IMAGE: u64 = 256 * 1024;

/// The largest connectome the benchmark generates (nodes): 20k nodes are 1.6 GB a matrix.
pub(super) const MAX_NODES: usize = 20_000;

/// Bytes of one scan: the SC matrix in memory (raw and log, f32) and its CSV on disk.
fn scan_bytes(nodes: usize) -> (u64, u64) {
    let n2 = (nodes as u64).saturating_mul(nodes as u64);
    (n2.saturating_mul(8), n2.saturating_mul(12))
}

/// `MemAvailable` of `/proc/meminfo`, in bytes (`None` when it cannot be read).
fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb.saturating_mul(1024))
}

/// Free bytes of the file system of `dir` (`None` when it cannot be read).
fn disk_free(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid C string and `s` a valid out-pointer for the call.
    (unsafe { libc::statvfs(c.as_ptr(), &mut s) } == 0)
        .then(|| s.f_bavail.saturating_mul(s.f_frsize))
}

fn refuse(message: String) -> anyhow::Error {
    ExitError::new(Exit::Usage, message).into()
}

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
}

/// Refuses (exit 2, the limit named) sizes that memory or the temporary directory's disk cannot
/// hold, before anything is allocated or written.
pub(super) fn check(s: &BenchSettings) -> Result<()> {
    let memory = memory_available();
    match s.target {
        BenchTarget::Mnist => {
            for &b in &s.batch_sizes {
                let need = (b as u64).saturating_mul(MNIST_BYTES_PER_IMAGE);
                if let Some(m) = memory
                    && need > m
                {
                    return Err(refuse(format!(
                        "--batch-size {b}: a training step of {b} images needs about {}, and \
                         {} of memory is available: at most {} images",
                        gib(need),
                        gib(m),
                        m / MNIST_BYTES_PER_IMAGE
                    )));
                }
            }
        }
        BenchTarget::Gnn => {
            if s.nodes == 0 || s.nodes > MAX_NODES {
                return Err(refuse(format!(
                    "--nodes {}: the benchmark generates connectomes of 1 to {MAX_NODES} nodes",
                    s.nodes
                )));
            }
            let (mem, disk) = scan_bytes(s.nodes);
            let tmp = std::env::temp_dir();
            for &subjects in &s.subjects {
                // Up to three scans a subject, as the synthetic generator makes.
                let scans = (subjects as u64).saturating_mul(3);
                let need = scans.saturating_mul(mem);
                if let Some(m) = memory
                    && need > m
                {
                    return Err(refuse(format!(
                        "--subjects {subjects} --nodes {}: the cohort needs about {} in memory, \
                         and {} is available",
                        s.nodes,
                        gib(need),
                        gib(m)
                    )));
                }
                let need = scans.saturating_mul(disk);
                if let Some(free) = disk_free(&tmp)
                    && need > free
                {
                    return Err(refuse(format!(
                        "--subjects {subjects} --nodes {}: the cohort's files need about {} in \
                         {} (TMPDIR), which has {} free",
                        s.nodes,
                        gib(need),
                        tmp.display(),
                        gib(free)
                    )));
                }
            }
            for &b in &s.gnn_batches() {
                let need = (b as u64).saturating_mul(mem).saturating_mul(16);
                if let Some(m) = memory
                    && need > m
                {
                    return Err(refuse(format!(
                        "--batch-size {b} --nodes {}: a step holds about {}, and {} of memory \
                         is available",
                        s.nodes,
                        gib(need),
                        gib(m)
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Temporary directories to remove when a signal ends the process.
static TEMP: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set by the signal handler before it removes them: what then fails in the main thread is
/// the removal's doing, and the process ends with the signal's code, not that failure's.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Waits for the signal handler to end the process when it has started to (a write into the
/// directory it removes failed because of it); returns at once otherwise.
pub(super) fn wait_if_interrupted() {
    while INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::park();
    }
}
static HANDLER: Once = Once::new();

/// A temporary directory of the benchmark: removed when dropped, and by a handler of SIGTERM,
/// SIGINT and SIGHUP, which then ends the process with 128 + the signal.
pub(super) struct TempDir(PathBuf);

impl TempDir {
    /// Registers `path` (not yet created) for removal.
    pub(super) fn new(path: PathBuf) -> Self {
        HANDLER.call_once(|| {
            use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
            if let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])
            {
                std::thread::spawn(move || {
                    if let Some(sig) = signals.forever().next() {
                        INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
                        // No cohort writer creates anything after this (one in flight ends
                        // first), so that nothing comes back after the removal below.
                        crate::data::connectome::synth::stop_writes();
                        let dirs = TEMP.lock().map(|d| d.clone()).unwrap_or_default();
                        for d in dirs {
                            // Moved aside first: the main thread, still writing into it, then
                            // fails instead of filling it again while it is removed.
                            let aside =
                                d.with_extension(format!("removing-{}", std::process::id()));
                            let gone = if std::fs::rename(&d, &aside).is_ok() {
                                aside
                            } else {
                                d
                            };
                            for _ in 0..10 {
                                if std::fs::remove_dir_all(&gone).is_ok() || !gone.exists() {
                                    break;
                                }
                            }
                        }
                        std::process::exit(128 + sig);
                    }
                });
            }
        });
        if let Ok(mut d) = TEMP.lock() {
            d.push(path.clone());
        }
        Self(path)
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        if let Ok(mut d) = TEMP.lock() {
            d.retain(|p| p != &self.0);
        }
    }
}
