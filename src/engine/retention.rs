//! Which checkpoints stay in `checkpoints/` (`--keep-checkpoints`), and their sizes in the log.
//!
//! A run removes only what it wrote. Every per-epoch file it writes (`--keep-checkpoints all`:
//! `epoch_NNN.safetensors`, `<stem>_epoch_NNN.safetensors`) is recorded, by name with its size
//! and modification time, in the run directory's `written_checkpoints.json` ([`record`]; in the
//! run directory, not in `checkpoints/`, which may be a link to a folder other runs share).
//! `best-last` (the default) writes no per-epoch file, and at each epoch's end, after the new
//! resume checkpoint is in place, removes the recorded files that are still the ones this run
//! wrote (same name, size and time; [`prune`]). It never lists `checkpoints/` to find what to
//! remove: a user's `backup_epoch_001.safetensors`, another run's or another fold's files, the
//! files of a shared folder that `checkpoints/` links to, and the epoch files of a run an older
//! trainer wrote (no record) stay, and the log says once that they were kept. While the run
//! can continue it never removes `last.safetensors` (what `--resume auto` reads), a best or
//! last model file, nor the file this process resumed from. `resume` prunes as `best-last`;
//! `all` removes nothing.
//!
//! When a run finishes (every stage done, the final scoring written), `best-last` drops its
//! resume state ([`FinishedResume`]): `last.safetensors` is removed where every stage's last
//! weights have their own model file, and rewritten as the last weights alone where it is their
//! only file. Only when it is this run's: a plain file (not a link) whose settings fingerprint
//! is this run's and whose run state has every stage done; anything else is kept and said.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::resume_file::{finished_job_state, weights_only};
use super::{JobSpec, KeepCheckpoints};
use crate::files::write_json;
use crate::outputs::RunDir;
use crate::outputs::run_files::{BEST_MODEL_SUFFIX, CHECKPOINT_EXT, is_epoch_file_name, read_json};
use crate::toolbox::checkpoint::Checkpoint;

/// Files removed by this process, and their bytes; whether the files it keeps were said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Removed {
    pub files: usize,
    pub bytes: u64,
    /// The epoch files this run did not record were said to be kept (once a process).
    pub told: bool,
    /// What the run's end did with its resume state (`best-last`).
    pub resume: Option<Dropped>,
}

/// What the end of a finished run did with its resume checkpoint `last.safetensors`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dropped {
    /// Removed (its bytes): every stage's last weights have their own model file.
    Removed(u64),
    /// Rewritten as the last weights alone, from `from` bytes to `to`: the run's only file of
    /// its last weights (`trainer eval --checkpoint …/last.safetensors`).
    Reduced { from: u64, to: u64 },
}

/// The resume checkpoint of a run that just finished, found to be this run's, and what its end
/// does with it ([`FinishedResume::drop_it`]).
#[derive(Debug)]
pub(super) struct FinishedResume {
    path: PathBuf,
    bytes: u64,
    /// Every stage's last weights have their own file: remove it (else reduce it to weights).
    remove: bool,
    /// The job's state at the end (its `job_state`), kept in `finished.json`.
    pub job_state: serde_json::Value,
}

/// `run`'s resume checkpoint at the end of the run of `spec`, when it is this run's: a plain
/// file (not a link) whose settings fingerprint is the run's and whose run state has every
/// stage done. `None` when there is none, or (said, the file kept) when it is not this run's.
/// `last_weights_elsewhere`: every stage's last weights have their own model file.
pub(super) fn finished_resume(
    run: &RunDir,
    spec: &JobSpec,
    last_weights_elsewhere: bool,
    tag: &str,
) -> Option<FinishedResume> {
    let path = run.last_checkpoint();
    let m = std::fs::symlink_metadata(&path).ok()?;
    let kept = |why: &str| {
        eprintln!(
            "{tag} checkpoints: {} kept ({why}): only this run's own resume state is dropped at \
             its end",
            path.display()
        );
    };
    if !m.file_type().is_file() {
        kept("not a plain file");
        return None;
    }
    let checked = Checkpoint::read_metadata(&path)
        .map_err(|e| format!("{e:#}"))
        .and_then(|meta| finished_job_state(&meta, spec));
    match checked {
        Ok(job_state) => Some(FinishedResume {
            bytes: m.len(),
            path,
            remove: last_weights_elsewhere,
            job_state,
        }),
        Err(why) => {
            kept(&why);
            None
        }
    }
}

impl FinishedResume {
    /// What the run's end does with the file, for `finished.json`.
    pub(super) fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "file": "checkpoints/last.safetensors",
            "bytes": self.bytes,
            "dropped": if self.remove { "removed" } else { "reduced to the last weights" },
            "keep_it": "--keep-checkpoints resume",
        })
    }

    /// Removes the file, or rewrites it (atomically) as the last weights alone. A failure is a
    /// warning (the file stays whole: it only costs space) and `None`.
    pub(super) fn drop_it(self, tag: &str) -> Option<Dropped> {
        let done = if self.remove {
            std::fs::remove_file(&self.path)
                .map(|()| Dropped::Removed(self.bytes))
                .map_err(anyhow::Error::from)
        } else {
            Checkpoint::load(&self.path)
                .and_then(|ck| weights_only(&ck).save(&self.path))
                .map(|()| Dropped::Reduced {
                    from: self.bytes,
                    to: size(&self.path),
                })
        };
        done.map_err(|e| {
            eprintln!(
                "{tag} warning: the finished run's resume state {} is kept: {e:#}",
                self.path.display()
            )
        })
        .ok()
    }
}

/// A file as this run wrote it: its size and modification time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    bytes: u64,
    modified_s: u64,
    modified_ns: u32,
}

impl Stamp {
    /// The stamp of a plain file (not a link); `None` for anything else or a file that is gone.
    fn of(path: &Path) -> Option<Self> {
        let m = std::fs::symlink_metadata(path).ok()?;
        if !m.file_type().is_file() {
            return None;
        }
        let t = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some(Self {
            bytes: m.len(),
            modified_s: t.as_secs(),
            modified_ns: t.subsec_nanos(),
        })
    }
}

/// `written_checkpoints.json`: the per-epoch files this run wrote into `checkpoints/`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Written {
    /// File name in `checkpoints/` → the file as written.
    files: BTreeMap<String, Stamp>,
}

impl Written {
    /// The record (empty when there is none: a new run, or one an older trainer wrote).
    fn read(run: &RunDir) -> Result<Self> {
        let path = run.written_checkpoints_json();
        if !path.exists() {
            return Ok(Self::default());
        }
        read_json(&path)
    }

    fn write(&self, run: &RunDir) -> Result<()> {
        write_json(&run.written_checkpoints_json(), self)
    }

    /// Whether `f` is a file of `checkpoints/` this run wrote and nobody changed since.
    fn holds(&self, f: &Path) -> bool {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        let stamp = name.and_then(|n| self.files.get(&n).copied());
        stamp.is_some() && stamp == Stamp::of(f)
    }
}

/// Records `file`, a per-epoch file this run just wrote into `checkpoints/`, in
/// `written_checkpoints.json` (written atomically). A record that cannot be read is started
/// anew (the files it named are then kept, never removed).
pub(super) fn record(run: &RunDir, file: &Path, tag: &str) -> Result<()> {
    let name = file
        .file_name()
        .with_context(|| format!("{}: no file name", file.display()))?
        .to_string_lossy()
        .into_owned();
    let stamp = Stamp::of(file)
        .with_context(|| format!("{}: just written, but not a readable file", file.display()))?;
    let mut written = Written::read(run).unwrap_or_else(|e| {
        eprintln!("{tag} warning: {e:#}; a new record is started (the files it named are kept)");
        Written::default()
    });
    written.files.insert(name, stamp);
    written.write(run)
}

/// Removes the per-epoch files this run recorded writing ([`record`]) but `resumed_from`, when
/// they are still as it wrote them; adds them to `removed`. Files it did not record are kept
/// (said once). A file that cannot be removed is a warning (it only costs space).
pub(super) fn prune(run: &RunDir, resumed_from: Option<&Path>, removed: &mut Removed, tag: &str) {
    let mut written = match Written::read(run) {
        Ok(w) => w,
        Err(e) => {
            if !removed.told {
                eprintln!("{tag} warning: {e:#}; no checkpoint is removed");
                removed.told = true;
            }
            return;
        }
    };
    let keep = resumed_from.and_then(|p| p.canonicalize().ok());
    let dir = run.checkpoints();
    let mut changed = false;
    let names: Vec<String> = written.files.keys().cloned().collect();
    for name in names {
        // Only a plain per-epoch name inside `checkpoints/` (the record may have been edited).
        if !is_epoch_file_name(&name) || Path::new(&name).file_name() != Some(name.as_ref()) {
            continue;
        }
        let f = dir.join(&name);
        if keep.is_some() && f.canonicalize().ok() == keep {
            continue;
        }
        if !written.holds(&f) {
            if f.exists() {
                eprintln!(
                    "{tag} warning: {} changed since this run wrote it: kept",
                    f.display()
                );
            }
            written.files.remove(&name);
            changed = true;
            continue;
        }
        let bytes = size(&f);
        match std::fs::remove_file(&f) {
            Ok(()) => {
                removed.files += 1;
                removed.bytes += bytes;
                written.files.remove(&name);
                changed = true;
            }
            Err(e) => eprintln!("{tag} warning: cannot remove {}: {e}", f.display()),
        }
    }
    if changed && let Err(e) = written.write(run) {
        eprintln!("{tag} warning: {e:#}");
    }
    if !removed.told {
        removed.told = true;
        let unrecorded = run.epoch_files().into_iter().filter(|f| !written.holds(f));
        let (n, bytes) = unrecorded.fold((0, 0), |(n, b), f| (n + 1, b + size(&f)));
        if n > 0 {
            eprintln!(
                "{tag} checkpoints: {n} epoch file(s) in {} ({}) that this run did not record \
                 writing (an older trainer's, a copy's, another run's) are kept; remove them by \
                 hand if they are not needed",
                dir.display(),
                human(bytes)
            );
        }
    }
}

/// `checkpoints (<policy>): best …, last …, resume …, N epoch files …, N unrecorded files …
/// (kept), removed N older (…); … in <dir>`: the checkpoint files of `run` by kind (`resume`:
/// `last.safetensors`, the last weights with the optimiser state; `epoch`: the per-epoch files
/// this run recorded writing; `unrecorded`: any other file); `None` when there are none.
pub(super) fn summary(run: &RunDir, policy: KeepCheckpoints, removed: Removed) -> Option<String> {
    let files: Vec<PathBuf> = std::fs::read_dir(run.checkpoints())
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.to_string_lossy().ends_with(CHECKPOINT_EXT))
        .collect();
    if files.is_empty() && removed.files == 0 && removed.resume.is_none() {
        return None;
    }
    let written = Written::read(run).unwrap_or_default();
    let name = |f: &PathBuf| f.file_name().map(|n| n.to_string_lossy().into_owned());
    let kind = |f: &PathBuf| {
        let n = name(f).unwrap_or_default();
        if written.holds(f) {
            "epoch"
        } else if n == "best.safetensors" || n.ends_with(BEST_MODEL_SUFFIX) {
            "best"
        } else if n.ends_with(&format!("_last{CHECKPOINT_EXT}")) {
            "last"
        } else if f == &run.last_checkpoint() {
            if matches!(removed.resume, Some(Dropped::Reduced { .. })) {
                // Reduced to the last weights at the run's end.
                "last"
            } else {
                // The last weights of a job without model files, and what `--resume auto` reads.
                "resume"
            }
        } else {
            "unrecorded"
        }
    };
    let total = |k: &str| -> (usize, u64) {
        files
            .iter()
            .filter(|f| kind(f) == k)
            .fold((0, 0), |(n, b), f| (n + 1, b + size(f)))
    };
    let mut parts = Vec::new();
    for k in ["best", "last", "resume"] {
        match total(k) {
            (0, _) => {}
            (1, b) => parts.push(format!("{k} {}", human(b))),
            (n, b) => parts.push(format!("{k} {} ({n} files)", human(b))),
        }
    }
    for (k, after) in [("epoch", ""), ("unrecorded", " (kept)")] {
        let (n, b) = total(k);
        if n > 0 {
            let s = if n == 1 { "" } else { "s" };
            parts.push(format!("{n} {k} file{s} {}{after}", human(b)));
        }
    }
    if removed.files > 0 {
        parts.push(format!(
            "removed {} older ({})",
            removed.files,
            human(removed.bytes)
        ));
    }
    match removed.resume {
        Some(Dropped::Removed(bytes)) => parts.push(format!(
            "removed the resume state ({}; --keep-checkpoints resume keeps it)",
            human(bytes)
        )),
        Some(Dropped::Reduced { from, to }) => parts.push(format!(
            "reduced the resume state to the last weights ({} to {}; --keep-checkpoints resume \
             keeps it whole)",
            human(from),
            human(to)
        )),
        None => {}
    }
    let all: u64 = files.iter().map(|f| size(f)).sum();
    Some(format!(
        "checkpoints ({}): {}; {} in {}",
        policy.name(),
        parts.join(", "),
        human(all),
        run.checkpoints().display()
    ))
}

fn size(f: &Path) -> u64 {
    std::fs::metadata(f).map_or(0, |m| m.len())
}

/// Bytes as `12.3 MB` (decimal units).
fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.1} kB", b / 1e3)
    }
}

#[cfg(test)]
#[path = "retention_tests.rs"]
mod tests;
