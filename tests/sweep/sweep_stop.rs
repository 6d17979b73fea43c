//! A runner that stops when told (issue 33, item 3): one SIGINT to `sweep run` starts nothing
//! more, the running task checkpoints and ends *stopped*, and the sweep then resumes to the
//! metrics of an uninterrupted one; SIGKILL of the runner leaves no trainer behind (it gets
//! SIGTERM and checkpoints); a second start of a running task is refused and leaves the live
//! task's status alone. The trainers wait after step 5 for the signal
//! (`TRAINER_TEST_PAUSE_AT_STEP`, a pure wait), so the signal lands mid-training on any machine.

use crate::common;
use crate::sweep_helpers as sweep;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use sweep::{states, status};

/// A train-mnist sweep of three seeds (a few seconds each), planned for the local runner as
/// `name`.
fn mnist_sweep(dir: &Path, name: &str) {
    let spec = format!(
        "command = \"train-mnist\"\nseeds = [1, 2, 3]\n[base]\ndata_dir = \"{}\"\n\
         limit_train = 1920\nlimit_test = 200\nepochs = 1\nlog_every_secs = 0.2\n",
        fashion_dir().display()
    );
    std::fs::write(dir.join("spec.toml"), spec).unwrap();
    let o = run_in(
        dir,
        &[
            "sweep",
            "plan",
            "spec.toml",
            "--out",
            name,
            "--scheduler",
            "local",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

/// `trainer ARGS` in `dir`, its trainers pausing after step 5.
fn start_paused(dir: &Path, args: &[&str]) -> Child {
    trainer()
        .args(args)
        .current_dir(dir)
        .env("TRAINER_TEST_PAUSE_AT_STEP", "5")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits until task `i`'s log says its trainer is paused.
fn wait_paused(dir: &Path, i: usize) {
    let log = dir.join(format!("S/logs/{i}.log"));
    let t0 = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("pausing after step 5")) {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "task {i} never paused: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
fn runs(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// The finished sweep `name` in `dir`, uninterrupted, for comparison.
fn reference(dir: &Path) -> Vec<Vec<serde_json::Value>> {
    mnist_sweep(dir, "R");
    let o = run_in(dir, &["sweep", "run", "R"]);
    assert!(o.status.success(), "{}", stderr(&o));
    status(dir, "R")
        .iter()
        .map(|r| metrics_without_timing(&dir.join(r["run_dir"].as_str().unwrap())))
        .collect()
}

fn assert_same_as(dir: &Path, whole: &[Vec<serde_json::Value>]) {
    let rows = status(dir, "S");
    assert_eq!(states(&rows), ["done", "done", "done"]);
    for (r, w) in rows.iter().zip(whole) {
        let run = dir.join(r["run_dir"].as_str().unwrap());
        // One binary on one machine, the same kernels and thread count: a resumed run follows
        // the uninterrupted one exactly (tests/cluster/signals.rs holds the trainer to this).
        assert_eq!(&metrics_without_timing(&run), w, "{}", run.display());
    }
}

#[test]
fn one_sigint_stops_the_runner_and_the_sweep_resumes_exactly() {
    let t = tempfile::tempdir().unwrap();
    let whole = reference(t.path());
    mnist_sweep(t.path(), "S");
    let mut runner = start_paused(t.path(), &["sweep", "run", "S", "--jobs", "1"]);
    wait_paused(t.path(), 0);
    signal(runner.id(), "INT");
    let code = runner.wait().unwrap().code();
    assert_eq!(code, Some(130), "the runner exits 128 + SIGINT");
    let rows = status(t.path(), "S");
    assert_eq!(states(&rows), ["stopped", "pending", "pending"], "{rows:?}");
    let log = std::fs::read_to_string(t.path().join("S/logs/0.log")).unwrap();
    assert!(log.contains("(signal SIGINT): checkpoint written"), "{log}");

    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same_as(t.path(), &whole);
}

#[test]
fn a_killed_runner_leaves_no_trainer_behind() {
    let t = tempfile::tempdir().unwrap();
    let whole = reference(t.path());
    mnist_sweep(t.path(), "S");
    let mut runner = start_paused(t.path(), &["sweep", "run", "S"]);
    wait_paused(t.path(), 0);
    let running = &status(t.path(), "S")[0];
    assert_eq!(running["state"], "running", "{running}");
    let trainer_pid = running["trainer_pid"].as_u64().expect("the trainer's pid");
    assert!(runs(trainer_pid));
    signal(runner.id(), "KILL");
    runner.wait().unwrap();
    let t0 = Instant::now();
    while runs(trainer_pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "trainer {trainer_pid} outlived its runner"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(t.path().join("S/logs/0.log")).unwrap();
    assert!(
        log.contains("(signal SIGTERM): checkpoint written"),
        "{log}"
    );
    let rows = status(t.path(), "S");
    assert_eq!(states(&rows), ["failed", "pending", "pending"], "{rows:?}");
    assert!(
        rows[0]["error"]
            .as_str()
            .unwrap()
            .contains("process is gone"),
        "{rows:?}"
    );
    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_same_as(t.path(), &whole);
}

#[test]
fn a_second_start_of_a_running_task_is_refused_and_changes_nothing() {
    let t = tempfile::tempdir().unwrap();
    mnist_sweep(t.path(), "S");
    let mut first = start_paused(t.path(), &["sweep", "task", "S", "0"]);
    wait_paused(t.path(), 0);
    let status_file = t.path().join("S/status/0.json");
    let before = std::fs::read_to_string(&status_file).unwrap();
    let o = run_in(t.path(), &["sweep", "task", "S", "0"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("is already running"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&status_file).unwrap(), before);
    let o = run_in(t.path(), &["sweep", "plan", "--missing", "S"]);
    assert!(
        stderr(&o).contains("2 of 3 tasks to run again"),
        "{}",
        stderr(&o)
    );
    signal(first.id(), "TERM");
    first.wait().unwrap();
    assert_eq!(
        states(&status(t.path(), "S")),
        ["stopped", "pending", "pending"]
    );
}

#[test]
fn status_watch_follows_a_running_sweep_to_its_end_with_an_eta() {
    let t = tempfile::tempdir().unwrap();
    mnist_sweep(t.path(), "S");
    let mut runner = trainer()
        .args(["sweep", "run", "S"])
        .current_dir(t.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let o = run_in(t.path(), &["sweep", "status", "S", "--watch", "0.2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(runner.wait().unwrap().success());
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines.last().unwrap().ends_with("] 3 tasks: 3 done"),
        "{text}"
    );
    // Once a task is done and others are still to run, the line carries an ETA.
    for l in &lines[..lines.len() - 1] {
        let some_done = ["1 done", "2 done"].iter().any(|d| l.contains(d));
        assert!(!some_done || l.contains("ETA ~"), "{l}");
    }
    for r in status(t.path(), "S") {
        assert!(
            r["seconds"].as_u64().is_some(),
            "a done task's duration: {r}"
        );
    }
}
