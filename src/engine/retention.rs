//! Which checkpoints stay in `checkpoints/` (`--keep-checkpoints`), and their sizes in the log.
//!
//! `best-last` (the default) writes no per-epoch file, and at each epoch's end, after the new
//! resume checkpoint is in place, removes the per-epoch files an earlier part of the run left
//! (a segment run with `all`, or an older trainer that kept every epoch). It never removes
//! `last.safetensors` (what `--resume auto` reads), a best or last model file, nor the file this
//! process resumed from. `all` removes nothing.

use std::path::{Path, PathBuf};

use super::KeepCheckpoints;
use crate::outputs::RunDir;
use crate::outputs::run_files::{BEST_MODEL_SUFFIX, CHECKPOINT_EXT};

/// Files removed by this process, and their bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Removed {
    pub files: usize,
    pub bytes: u64,
}

/// Removes the per-epoch files of `run`'s `checkpoints/` but `resumed_from`; adds them to
/// `removed`. A file that cannot be removed is a warning (it only costs space).
pub(super) fn prune(run: &RunDir, resumed_from: Option<&Path>, removed: &mut Removed, tag: &str) {
    let keep = resumed_from.and_then(|p| p.canonicalize().ok());
    for f in run.epoch_files() {
        if keep.is_some() && f.canonicalize().ok() == keep {
            continue;
        }
        let bytes = size(&f);
        match std::fs::remove_file(&f) {
            Ok(()) => {
                removed.files += 1;
                removed.bytes += bytes;
            }
            Err(e) => eprintln!("{tag} warning: cannot remove {}: {e}", f.display()),
        }
    }
}

/// `checkpoints (<policy>): best …, last …, resume …, N epoch files …, removed N older (…);
/// … in <dir>`: the checkpoint files of `run` by kind (`resume`: `last.safetensors`, the last
/// weights with the optimiser state); `None` when there are none.
pub(super) fn summary(run: &RunDir, policy: KeepCheckpoints, removed: Removed) -> Option<String> {
    let files: Vec<PathBuf> = std::fs::read_dir(run.checkpoints())
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| f.to_string_lossy().ends_with(CHECKPOINT_EXT))
        .collect();
    if files.is_empty() && removed.files == 0 {
        return None;
    }
    let epochs = run.epoch_files();
    let name = |f: &PathBuf| f.file_name().map(|n| n.to_string_lossy().into_owned());
    let kind = |f: &PathBuf| {
        let n = name(f).unwrap_or_default();
        if epochs.contains(f) {
            "epoch"
        } else if n == "best.safetensors" || n.ends_with(BEST_MODEL_SUFFIX) {
            "best"
        } else if n.ends_with(&format!("_last{CHECKPOINT_EXT}")) {
            "last"
        } else if f == &run.last_checkpoint() {
            // The last weights of a job without model files, and what `--resume auto` reads.
            "resume"
        } else {
            "other"
        }
    };
    let total = |k: &str| -> (usize, u64) {
        files
            .iter()
            .filter(|f| kind(f) == k)
            .fold((0, 0), |(n, b), f| (n + 1, b + size(f)))
    };
    let mut parts = Vec::new();
    for k in ["best", "last", "resume", "other"] {
        match total(k) {
            (0, _) => {}
            (1, b) => parts.push(format!("{k} {}", human(b))),
            (n, b) => parts.push(format!("{k} {} ({n} files)", human(b))),
        }
    }
    let (n, b) = total("epoch");
    if n > 0 {
        let s = if n == 1 { "" } else { "s" };
        parts.push(format!("{n} epoch file{s} {}", human(b)));
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
    fn prune_removes_epoch_files_but_the_resume_source_and_best_last() {
        let t = tempfile::tempdir().unwrap();
        let r = RunDir::new(t.path());
        std::fs::create_dir(r.checkpoints()).unwrap();
        for p in [r.last_checkpoint(), r.best_checkpoint(), r.best_model("m")] {
            put(&p, 1_000);
        }
        put(&r.last_model("m"), 1_000);
        for e in 1..=3 {
            put(&r.epoch_checkpoint(e), 2_000_000);
        }
        put(&r.epoch_model("m", 1), 500_000);
        let mut removed = Removed::default();
        prune(&r, Some(&r.epoch_checkpoint(2)), &mut removed, "[t]");
        assert_eq!(
            removed,
            Removed {
                files: 3,
                bytes: 4_500_000
            }
        );
        assert_eq!(r.epoch_files(), [r.epoch_checkpoint(2)]);
        for p in [
            r.last_checkpoint(),
            r.best_checkpoint(),
            r.best_model("m"),
            r.last_model("m"),
        ] {
            assert!(p.is_file(), "{} removed", p.display());
        }
        let line = summary(&r, KeepCheckpoints::BestLast, removed).unwrap();
        assert!(
            line.starts_with(
                "checkpoints (best-last): best 2.0 kB (2 files), last 1.0 kB, resume 1.0 kB, \
                 1 epoch file 2.0 MB, removed 3 older (4.5 MB); 2.0 MB in "
            ),
            "{line}"
        );
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
