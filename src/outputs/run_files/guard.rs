//! The one check of a user's output path (`--out`, `--scores`, `--plot` of the commands that
//! write reports, figures and predictions): it never names a file a run wrote, nor a run
//! directory itself ([`refuse_run_file`]).
//!
//! A run directory is recognised by its files: `run_meta.json` (what every run writes first),
//! `args.json`, `metrics.jsonl` or `finished.json`. Its own files are the names of
//! [`super::RunDir`] (and `tensorboard/`, `metrics.*`), and the files of an `eval-gnn`
//! re-scoring directory inside it (`eval-<split>-<name>/…`).

use std::path::{Component, Path, PathBuf};

use anyhow::Result;

use super::{CHECKPOINTS, LOCK, RUN_META_JSON, RunDir, TENSORBOARD_DIR, TOP_FILES};
use crate::error::{Exit, ExitError};

/// Whether `name` is one a run writes at the top of its directory: its files
/// ([`super::TOP_FILES`], `run_meta.json`, the lock, `curves.png`) and its folders
/// `checkpoints/` and `tensorboard/`.
fn is_run_entry(name: &str) -> bool {
    TOP_FILES.contains(&name)
        || [
            RUN_META_JSON,
            LOCK,
            CHECKPOINTS,
            TENSORBOARD_DIR,
            "curves.png",
        ]
        .contains(&name)
}

/// Whether `dir` is a run directory: it holds `run_meta.json`, `args.json`, `metrics.jsonl` or
/// `finished.json`.
pub(crate) fn is_run_dir(dir: &Path) -> bool {
    let run = RunDir::new(dir);
    [
        run.run_meta_json(),
        run.args_json(),
        run.metrics_jsonl(),
        run.finished_json(),
    ]
    .iter()
    .any(|f| f.is_file())
}

/// Refuses `path`, given to `flag`, when writing it would replace a file of a run directory or
/// the directory itself (a usage error, [`Exit::Usage`], naming the path and the run). The path
/// is taken as it is and with its links resolved: a link to a run's file is refused too. No
/// path (an optional flag not given) passes.
pub(crate) fn refuse_run_file<'a>(flag: &str, path: impl Into<Option<&'a Path>>) -> Result<()> {
    let Some(path) = path.into() else {
        return Ok(());
    };
    for p in candidates(path) {
        if let Some((run, what)) = run_file_of(&p) {
            let message = match what {
                None => format!(
                    "{flag} {}: is a run directory ({}): its files are the run's; write the \
                     output elsewhere (nothing was written)",
                    path.display(),
                    run.display()
                ),
                Some(name) => format!(
                    "{flag} {}: would replace `{name}` of the run directory {}, which that run \
                     wrote; write the output elsewhere (nothing was written)",
                    path.display(),
                    run.display()
                ),
            };
            return Err(ExitError::new(Exit::Usage, message).into());
        }
    }
    Ok(())
}

/// `path` made absolute, its existing folders with their links resolved; and, where `path`
/// itself is a link, what it points to.
fn candidates(path: &Path) -> Vec<PathBuf> {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().map_or(path.to_path_buf(), |d| d.join(path))
    };
    let mut out = vec![normalize(&abs)];
    if let (Some(parent), Some(name)) = (abs.parent(), abs.file_name())
        && let Some(p) = resolve_existing(parent)
    {
        out.push(p.join(name));
    }
    if let Ok(full) = abs.canonicalize() {
        out.push(full);
    }
    out.dedup();
    out
}

/// `dir` with its longest existing head resolved (links followed), the rest appended.
fn resolve_existing(dir: &Path) -> Option<PathBuf> {
    let mut head = dir.to_path_buf();
    let mut tail = Vec::new();
    loop {
        if let Ok(c) = head.canonicalize() {
            return Some(tail.iter().rev().fold(c, |p: PathBuf, n| p.join(n)));
        }
        tail.push(head.file_name()?.to_os_string());
        head = head.parent()?.to_path_buf();
    }
}

/// `.` and `..` removed without looking at the disk.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// The run directory `p` belongs to and the run's entry it would replace (`None`: `p` is the
/// run directory itself), when it does.
fn run_file_of(p: &Path) -> Option<(PathBuf, Option<String>)> {
    if p.is_dir() && is_run_dir(p) {
        return Some((p.to_path_buf(), None));
    }
    for run in p.ancestors().skip(1) {
        if !is_run_dir(run) {
            continue;
        }
        let rel = p.strip_prefix(run).ok()?;
        let mut parts = rel.components().map(|c| c.as_os_str().to_string_lossy());
        let first = parts.next()?.into_owned();
        let deeper = parts.next().is_some();
        let ours = is_run_entry(&first)
            || first.starts_with("metrics.")
            || (deeper && first.starts_with("eval-"));
        if ours {
            return Some((run.to_path_buf(), Some(rel.display().to_string())));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(root: &Path) -> RunDir {
        let r = RunDir::new(root.join("run"));
        std::fs::create_dir_all(r.checkpoints()).unwrap();
        std::fs::write(r.run_meta_json(), "{}").unwrap();
        std::fs::write(r.per_subject_csv(), "a\n").unwrap();
        r
    }

    fn refused(p: &Path) -> String {
        let e = refuse_run_file("--out", p).unwrap_err();
        assert_eq!(crate::error::exit_of(&e), Exit::Usage);
        e.to_string()
    }

    #[test]
    fn the_files_of_a_run_and_the_run_itself_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let r = run_dir(t.path());
        let e = refused(&r.per_subject_csv());
        assert!(
            e.contains("`per_subject.csv`") && e.contains(&r.path().display().to_string()),
            "{e}"
        );
        for p in [
            r.curves_svg(),
            r.metrics_csv(),
            r.path().join("metrics.json"),
            r.checkpoints().join("x.png"),
            r.path().join("tensorboard/a"),
            r.path().join("eval-test-best/per_subject.csv"),
            r.path().join("sub/../per_subject.csv"),
            r.path().join("./args.json"),
        ] {
            refused(&p);
        }
        assert!(refused(r.path()).contains("is a run directory"));
        // Not a run file: a figure beside them, a new eval directory, another folder.
        for p in [
            r.path().join("heatmap.png"),
            r.path().join("eval-test-best"),
            t.path().join("per_subject.csv"),
            t.path().join("out/curves.svg"),
        ] {
            refuse_run_file("--out", p.as_path()).unwrap();
        }
    }

    #[test]
    fn links_to_a_run_file_or_into_a_run_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let r = run_dir(t.path());
        let link = t.path().join("link.csv");
        std::os::unix::fs::symlink(r.per_subject_csv(), &link).unwrap();
        refused(&link);
        let dir = t.path().join("dir");
        std::os::unix::fs::symlink(r.path(), &dir).unwrap();
        refused(&dir.join("strata.json"));
        refused(&dir);
        // Relative to the working directory.
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(&r.per_subject_csv(), &cwd);
        refused(&rel);
    }

    /// `to` relative to `from` (both absolute), through `..`.
    fn pathdiff(to: &Path, from: &Path) -> PathBuf {
        let ups = from.components().count() - 1;
        let mut p = PathBuf::new();
        for _ in 0..ups {
            p.push("..");
        }
        p.join(to.strip_prefix("/").unwrap())
    }
}
