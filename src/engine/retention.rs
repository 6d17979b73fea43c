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
//! trainer wrote (no record) stay, and the log says once that they were kept. It never removes
//! `last.safetensors` (what `--resume auto` reads), a best or last model file, nor the file this
//! process resumed from. `all` removes nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::KeepCheckpoints;
use crate::files::write_json;
use crate::outputs::RunDir;
use crate::outputs::run_files::{BEST_MODEL_SUFFIX, CHECKPOINT_EXT, is_epoch_file_name, read_json};

/// Files removed by this process, and their bytes; whether the files it keeps were said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Removed {
    pub files: usize,
    pub bytes: u64,
    /// The epoch files this run did not record were said to be kept (once a process).
    pub told: bool,
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
    if files.is_empty() && removed.files == 0 {
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
            // The last weights of a job without model files, and what `--resume auto` reads.
            "resume"
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
    let all: u64 = files.iter().map(|f| size(f)).sum();
    let policy = match policy {
        KeepCheckpoints::BestLast => "best-last",
        KeepCheckpoints::All => "all",
    };
    Some(format!(
        "checkpoints ({policy}): {}; {} in {}",
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
mod tests {
    use super::*;

    fn put(p: &Path, bytes: usize) {
        std::fs::write(p, vec![0u8; bytes]).unwrap();
    }

    #[test]
    fn prune_removes_only_recorded_files_but_the_resume_source_and_best_last() {
        let t = tempfile::tempdir().unwrap();
        let r = RunDir::new(t.path());
        std::fs::create_dir(r.checkpoints()).unwrap();
        for p in [r.last_checkpoint(), r.best_checkpoint(), r.best_model("m")] {
            put(&p, 1_000);
        }
        put(&r.last_model("m"), 1_000);
        for e in 1..=3 {
            put(&r.epoch_checkpoint(e), 2_000_000);
            record(&r, &r.epoch_checkpoint(e), "[t]").unwrap();
        }
        put(&r.epoch_model("m", 1), 500_000);
        record(&r, &r.epoch_model("m", 1), "[t]").unwrap();
        // Not this run's: a user's backup, another fold's file, one changed since written.
        let foreign = [
            r.checkpoints().join("backup_epoch_001.safetensors"),
            r.epoch_model("other_fold3", 2),
        ];
        for p in &foreign {
            put(p, 3_000);
        }
        put(&r.epoch_checkpoint(3), 7);
        let mut removed = Removed::default();
        prune(&r, Some(&r.epoch_checkpoint(2)), &mut removed, "[t]");
        assert_eq!(
            removed,
            Removed {
                files: 2,
                bytes: 2_500_000,
                told: true
            }
        );
        let mut left = vec![r.epoch_checkpoint(2), r.epoch_checkpoint(3)];
        left.extend(foreign.iter().cloned());
        left.sort();
        assert_eq!(r.epoch_files(), left);
        for p in [
            r.last_checkpoint(),
            r.best_checkpoint(),
            r.best_model("m"),
            r.last_model("m"),
        ] {
            assert!(p.is_file(), "{} removed", p.display());
        }
        // The record keeps the resume source only; the changed file left it.
        let w = Written::read(&r).unwrap();
        assert_eq!(
            w.files.keys().collect::<Vec<_>>(),
            ["epoch_002.safetensors"]
        );
        let line = summary(&r, KeepCheckpoints::BestLast, removed).unwrap();
        assert!(
            line.starts_with(
                "checkpoints (best-last): best 2.0 kB (2 files), last 1.0 kB, resume 1.0 kB, \
                 1 epoch file 2.0 MB, 3 unrecorded files 6.0 kB (kept), removed 2 older \
                 (2.5 MB); 2.0 MB in "
            ),
            "{line}"
        );
    }

    #[test]
    fn without_a_record_nothing_is_removed_and_an_edited_record_removes_nothing_outside() {
        let t = tempfile::tempdir().unwrap();
        let r = RunDir::new(t.path().join("run"));
        std::fs::create_dir_all(r.checkpoints()).unwrap();
        put(&r.epoch_checkpoint(1), 10);
        let mut removed = Removed::default();
        prune(&r, None, &mut removed, "[t]");
        assert_eq!((removed.files, removed.told), (0, true));
        assert!(r.epoch_checkpoint(1).is_file());
        // Names outside `checkpoints/` in an edited record are never followed.
        let outside = t.path().join("epoch_001.safetensors");
        put(&outside, 10);
        let stamp = Stamp::of(&outside).unwrap();
        let mut w = Written::default();
        w.files.insert("../epoch_001.safetensors".into(), stamp);
        w.files.insert("notes.txt".into(), stamp);
        w.write(&r).unwrap();
        prune(&r, None, &mut Removed::default(), "[t]");
        assert!(outside.is_file());
        // An unreadable record: nothing removed.
        std::fs::write(r.written_checkpoints_json(), "{").unwrap();
        record(&r, &r.epoch_checkpoint(1), "[t]").unwrap();
        std::fs::write(r.written_checkpoints_json(), "{").unwrap();
        prune(&r, None, &mut Removed::default(), "[t]");
        assert!(r.epoch_checkpoint(1).is_file());
    }

    #[test]
    fn no_checkpoints_no_line() {
        let t = tempfile::tempdir().unwrap();
        let r = RunDir::new(t.path());
        assert_eq!(summary(&r, KeepCheckpoints::All, Removed::default()), None);
        assert_eq!(human(12_345_678), "12.3 MB");
        assert_eq!(human(1_900_000_000), "1.9 GB");
    }
}
