//! File-system faults under a run and a report: a full disk (a 512 KiB tmpfs mounted by the
//! test: tests run as root, here and in CI), a read-only file system (a tmpfs mounted `ro`,
//! which root cannot write either), and an output path under a file. Each is a clear error
//! naming the path, a non-zero exit, no panic, and no temporary file left behind.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// A tmpfs mounted at `dir` with `options`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, options: &str) -> Self {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir)
            .output()
            .expect("mount runs");
        assert!(
            o.status.success(),
            "mount -t tmpfs (the tests run as root): {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Self(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Files under `dir` whose names say they are half-written (`*.tmp*`, `.tmp*`).
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                stack.push(p);
            } else if name.contains(".tmp") {
                out.push(p);
            }
        }
    }
    out
}

fn train(cwd: &Path, out: &str) -> std::process::Output {
    run_in(
        cwd,
        &[
            "train-mnist",
            "--data-dir",
            "mnist",
            "--epochs",
            "1",
            "--out",
            out,
        ],
    )
}

fn clear_failure(o: &std::process::Output, path: &str, cause: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains(path) && err.contains(cause) && !err.contains("panicked"),
        "expected {path} and {cause:?} named: {err}"
    );
}

#[test]
fn a_full_disk_stops_the_run_naming_the_file_and_leaves_no_temporary() {
    let t = tempfile::tempdir().unwrap();
    write_tiny_mnist(&t.path().join("mnist"), 64);
    let _full = Tmpfs::mount(&t.path().join("full"), "size=512k");
    let o = train(t.path(), "full/run");
    clear_failure(&o, "full/run/checkpoints", "No space left on device");
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(temporaries(&t.path().join("full")), Vec::<PathBuf>::new());
    // A report onto the full disk: the same.
    let o = train(t.path(), "run");
    assert!(o.status.success(), "{}", stderr(&o));
    // Filled to the last byte (the write stops at ENOSPC, its partial file stays).
    std::fs::write(t.path().join("full/filler"), vec![0u8; 1 << 20]).ok();
    let o = run_in(t.path(), &["plot", "run", "--out", "full/curves.png"]);
    clear_failure(&o, "full/curves.png", "No space left on device");
    assert_eq!(temporaries(&t.path().join("full")), Vec::<PathBuf>::new());
}

#[test]
fn a_read_only_file_system_and_a_path_under_a_file_are_clear_errors() {
    let t = tempfile::tempdir().unwrap();
    write_tiny_mnist(&t.path().join("mnist"), 64);
    let _ro = Tmpfs::mount(&t.path().join("ro"), "ro,size=64k");
    let o = train(t.path(), "ro/run");
    clear_failure(&o, "ro/run", "Read-only file system");
    std::fs::write(t.path().join("afile"), "x").unwrap();
    let o = train(t.path(), "afile/run");
    clear_failure(&o, "afile/run", "Not a directory");
    assert_eq!(
        std::fs::read_to_string(t.path().join("afile")).unwrap(),
        "x"
    );
}
