//! Real training processes receive real signals: each stops at a step boundary, writes a
//! checkpoint atomically and exits with its documented code; resuming then matches an
//! uninterrupted run exactly. `kill -9` at any moment never leaves an unreadable checkpoint.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::*;
use trainer::toolbox::checkpoint::Checkpoint;

const ARGS: [&str; 8] = [
    "--limit-train",
    "1280",
    "--limit-test",
    "200",
    "--epochs",
    "2",
    "--seed",
    "5",
];

/// Starts a training; with `pause_at`, it waits after that step for a signal (the test hook
/// `TRAINER_TEST_PAUSE_AT_STEP`), so that a signal lands mid-training on a machine of any speed.
fn start(cwd: &Path, out: &Path, extra: &[&str], pause_at: Option<u64>) -> Child {
    let data = fashion_dir();
    let mut cmd = trainer();
    if let Some(step) = pause_at {
        cmd.env("TRAINER_TEST_PAUSE_AT_STEP", step.to_string());
    }
    cmd.args([
        "train-mnist",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ])
    .args(ARGS)
    .args(["--log-every-secs", "0.1"])
    .args(extra)
    .current_dir(cwd)
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// Waits until the child has printed `n` progress lines (so training is under way), then
/// returns the rest of its stderr through a thread.
fn wait_for_steps(child: &mut Child, n: usize) -> std::thread::JoinHandle<String> {
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut seen = 0;
    let mut head = String::new();
    while seen < n {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("trainer ended before {n} progress lines:\n{head}");
        }
        if line.contains(" step ") {
            seen += 1;
        }
        head.push_str(&line);
    }
    std::thread::spawn(move || {
        let mut rest = head;
        for line in reader.lines() {
            rest.push_str(&line.unwrap());
            rest.push('\n');
        }
        rest
    })
}

/// Waits until the child prints a line containing `needle`, then returns the rest of its
/// stderr through a thread.
fn wait_for_line(child: &mut Child, needle: &str) -> std::thread::JoinHandle<String> {
    let mut reader = BufReader::new(child.stderr.take().unwrap());
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("trainer ended before printing {needle:?}:\n{head}");
        }
        head.push_str(&line);
        if line.contains(needle) {
            break;
        }
    }
    std::thread::spawn(move || {
        let mut rest = head;
        for line in reader.lines() {
            rest.push_str(&line.unwrap());
            rest.push('\n');
        }
        rest
    })
}

fn kill(child: &Child, sig: &str) {
    let st = std::process::Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

fn resume(cwd: &Path, out: &Path) {
    let data = fashion_dir();
    let mut args = vec![
        "train-mnist",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--resume",
        "auto",
    ];
    args.extend(ARGS);
    let o = run_in(cwd, &args);
    assert!(o.status.success(), "resume failed: {}", stderr(&o));
}

#[test]
fn every_signal_checkpoints_exits_with_its_code_and_resumes_exactly() {
    let t = tempfile::tempdir().unwrap();
    let whole = t.path().join("whole");
    let data = fashion_dir();
    let mut args = vec![
        "train-mnist",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        whole.to_str().unwrap(),
    ];
    args.extend(ARGS);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    let reference = metrics_without_timing(&whole);
    assert_eq!(reference.len(), 2);

    // Default --requeue-signal USR1,USR2 → 75; TERM and INT → 128 + signal.
    for (sig, code) in [("TERM", 143), ("INT", 130), ("USR1", 75), ("USR2", 75)] {
        let out = t.path().join(sig);
        let mut child = start(t.path(), &out, &[], Some(3));
        let log = wait_for_line(&mut child, "pausing after step 3");
        let sent = Instant::now();
        kill(&child, sig);
        let status = child.wait().unwrap();
        let log = log.join().unwrap();
        assert!(
            sent.elapsed() < Duration::from_secs(20),
            "{sig}: took {:?} to stop",
            sent.elapsed()
        );
        assert_eq!(status.code(), Some(code), "{sig}:\n{log}");
        assert!(
            log.contains(&format!("SIG{sig}")),
            "{sig}: log does not name the signal:\n{log}"
        );
        let ck =
            Checkpoint::load(&out.join("checkpoints/last.safetensors")).expect("checkpoint loads");
        assert!(ck.counter("train.global_step").unwrap() >= 3, "{sig}");
        resume(t.path(), &out);
        // Bit-equality across processes is sound here: one binary on one machine (the same
        // CPU kernels), and the fast CPU kernels cut work by shape, never by thread count, so
        // the resumed process follows the uninterrupted one exactly whatever its thread count.
        assert_eq!(
            metrics_without_timing(&out),
            reference,
            "{sig}: resumed run differs"
        );
    }
}

#[test]
fn kill_9_during_checkpointing_never_leaves_a_bad_checkpoint() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("run");
    for round in 0..6 {
        // A checkpoint every step, so the kill lands in or near a write most of the time.
        let mut child = start(
            t.path(),
            &out,
            &["--checkpoint-every", "1", "--resume", "auto"],
            None,
        );
        let log = wait_for_steps(&mut child, 2);
        std::thread::sleep(Duration::from_millis(37 * round));
        kill(&child, "KILL");
        let _ = child.wait();
        let _ = log.join();
        let ck = Checkpoint::load(&out.join("checkpoints/last.safetensors"))
            .unwrap_or_else(|e| panic!("round {round}: checkpoint unreadable: {e:#}"));
        assert!(ck.counter("train.global_step").unwrap() > 0);
        let leftovers: Vec<_> = std::fs::read_dir(out.join("checkpoints"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".safetensors"))
            .collect();
        assert!(!leftovers.is_empty());
    }
    // And the run still completes from there.
    resume(t.path(), &out);
    assert_eq!(metrics_without_timing(&out).len(), 2);
}
