//! `trainer bench` sizes beyond what memory or disk hold are refused with exit 2 and the limit
//! before anything is allocated or written (they aborted in the allocator, or filled `$TMPDIR`),
//! and a benchmark ended by SIGTERM while it writes its synthetic cohort leaves no files behind.

use std::time::{Duration, Instant};

use crate::common::*;

#[test]
fn sizes_beyond_memory_or_disk_are_refused_before_allocating() {
    let t = tempfile::tempdir().unwrap();
    for (args, needle) in [
        (
            vec!["bench", "mnist", "--batch-size", "100000000"],
            "--batch-size 100000000",
        ),
        (
            vec!["bench", "gnn", "--nodes", "1000000"],
            "--nodes 1000000",
        ),
        (
            vec!["bench", "gnn", "--subjects", "100000000"],
            "--subjects 100000000",
        ),
        (
            vec!["bench", "gnn", "--batch-size", "100000000"],
            "--batch-size 100000000",
        ),
    ] {
        let o = run_in(t.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(needle) && !err.contains("panicked") && !err.contains("backtrace"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn sigterm_while_writing_the_cohort_leaves_no_temporary_files() {
    let tmp = tempfile::tempdir().unwrap();
    let mut child = trainer()
        .args(["bench", "gnn", "--subjects", "4000", "--nodes", "300"])
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The cohort is written into a staging folder beside its final name (renamed when
    // complete, ~40 s later on a loaded 2-core machine): the signal comes while that folder is
    // being written, whatever the machine's speed.
    let started = || std::fs::read_dir(tmp.path()).unwrap().next().is_some();
    let t0 = Instant::now();
    while !started() && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(started(), "the benchmark never started writing its cohort");
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{status:?}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
