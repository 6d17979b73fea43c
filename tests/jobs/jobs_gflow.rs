//! jobs/gflow_mnist.sh on a real gflowd (PyPI's `runqd`, installed by scripts/test-jobs.sh).
//! The test starts its own daemon (own HOME, port and state, process executor), submits the
//! template as a CPU test with a step budget, so that the first piece stops with exit code 75
//! and resubmits itself through `gbatch`; the second piece resumes and finishes. The daemon is
//! stopped by its pid.

use crate::common;
use crate::gflow;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use gflow::Gflow;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/gflow_mnist.sh")
}

#[test]
fn gflow_template_parses_and_carries_directives() {
    let o = Command::new("bash")
        .arg("-n")
        .arg(script())
        .output()
        .unwrap();
    assert!(o.status.success(), "bash -n: {}", stderr(&o));
    let text = std::fs::read_to_string(script()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut directives = vec![];
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("# GFLOW") {
            let prev = lines[i - 1];
            assert!(
                prev.starts_with("# ") && !prev.starts_with("# GFLOW"),
                "directive `{l}` has no explaining comment above it"
            );
            // gbatch splits directive lines on whitespace: no trailing comments allowed.
            assert!(!l[1..].contains('#'), "`{l}`: comment on a directive line");
            directives.push(l.trim_start_matches("# GFLOW").trim());
        }
    }
    assert!(directives.contains(&"--gpus 1"), "{directives:?}");
    assert!(
        directives.iter().any(|d| d.starts_with("--time ")),
        "{directives:?}"
    );
    assert!(text.contains("--resume auto") && text.contains("TRAINER_CPU_TEST"));
}

#[test]
fn gflow_template_runs_on_a_real_gflowd_and_resubmits_itself_on_75() {
    let t = tempfile::tempdir().unwrap();
    let results = t.path().join("results");
    let env = [
        ("TRAINER_CPU_TEST", "1".to_string()),
        ("TRAINER_BIN", env!("CARGO_BIN_EXE_trainer").to_string()),
        ("DATA_DIR", fashion_dir().display().to_string()),
        ("RESULTS_DIR", results.display().to_string()),
        // 10 steps in all; each piece may take 6, so the job needs two pieces.
        (
            "TRAINER_CPU_TEST_ARGS",
            "--limit-train 640 --limit-test 200 --epochs 1 --stop-after-steps 6".to_string(),
        ),
    ];
    let Some(daemon) = Gflow::start(t.path(), &env) else {
        return;
    };
    // The template asks for one GPU; this machine has none: the command line overrides it.
    let o = daemon
        .cmd("gbatch")
        .args(["--gpus", "0"])
        .arg(script())
        .output()
        .unwrap();
    assert!(o.status.success(), "gbatch: {}{}", stdout(&o), stderr(&o));
    let jobs = daemon.wait_all(2, Duration::from_secs(300));
    let (first, second) = (daemon.log(jobs[0].0), daemon.log(jobs[1].0));
    drop(daemon);
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert!(
        jobs.iter().all(|(_, s)| s == "Finished"),
        "{jobs:?}\n{first}\n{second}"
    );
    assert!(
        first.contains("start 1:") && first.contains("trainer exit code 75"),
        "{first}"
    );
    assert!(
        first.contains("Submitted batch job") && first.contains("resubmitted"),
        "{first}"
    );
    assert!(
        second.contains("start 2:") && second.contains("resuming from"),
        "{second}"
    );
    assert!(second.contains("trainer exit code 0"), "{second}");
    let run = results.join("gflow_mnist");
    assert_eq!(metrics_without_timing(&run).len(), 1);
    assert!(run.join("checkpoints/last.safetensors").is_file());
}
