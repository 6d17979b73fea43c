//! `trainer sweep plan --scheduler gflow` on a real gflowd (PyPI's `runqd`, installed by
//! scripts/test-jobs.sh, which runs this test): a two-stage sweep of 2 learning rates × 2 folds,
//! submitted by the written `submit.gflow.sh` with `--max-concurrent 2`; every phase-2 task is
//! a gflow job that depends on its phase-1 task's job and starts from its best weights, though
//! every piece of every task stops at a checkpoint and is resumed by gflow's retry.

use crate::common;
use crate::gflow;
use crate::sweep_helpers as sweep;

use std::time::Duration;

use common::*;
use gflow::Gflow;
use sweep::{plan, setup_with, states, status, test_metric};

#[test]
fn a_two_stage_sweep_runs_on_a_real_gflowd() {
    let t = tempfile::tempdir().unwrap();
    setup_with(
        t.path(),
        "folds = [0, 1]\n",
        // Every piece stops at a checkpoint after 2 steps (exit 75, as at a time limit): gflow
        // has no requeue, its retry resumes the task.
        "batch_size = 4\nstop_after_steps = 2\n[grid]\nlearning_rate = [1e-3, 1e-4]\n[then]\n\
         max_epochs = 2\nlearning_rate = 1e-12\n",
    );
    let printed = plan(t.path(), "gflow", Some(2));
    assert!(printed.contains("submit.gflow.sh"), "{}", printed);
    let submit = std::fs::read_to_string(t.path().join("S/submit.gflow.sh")).unwrap();
    assert!(
        submit.contains("--param task=0,1,2,3") && submit.contains("--max-concurrent 2"),
        "{submit}"
    );
    let task = std::fs::read_to_string(t.path().join("S/task.gflow")).unwrap();
    assert!(task.contains("\n# GFLOW --gpus 1\n"), "{task}");
    for f in ["S/submit.gflow.sh", "S/task.gflow"] {
        let o = std::process::Command::new("bash")
            .arg("-n")
            .arg(t.path().join(f))
            .output()
            .unwrap();
        assert!(o.status.success(), "bash -n {f}: {}", stderr(&o));
    }
    let env = [("TRAINER", env!("CARGO_BIN_EXE_trainer").to_string())];
    let Some(daemon) = Gflow::start(t.path(), &env) else {
        return;
    };
    // No GPU here: the command line overrides the task script's `--gpus 1`.
    let o = daemon
        .cmd("bash")
        .arg(t.path().join("S/submit.gflow.sh"))
        .args(["--gpus", "0"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert_eq!(
        out.matches("Submitted batch job").count(),
        8,
        "four phase-1 jobs and four dependent phase-2 jobs:\n{out}"
    );
    // Every task ends with one finished job, after one or more stopped (failed, retried) pieces.
    let t0 = std::time::Instant::now();
    let jobs = loop {
        let jobs = daemon.wait_all(8, Duration::from_secs(600));
        if jobs.iter().filter(|(_, s)| s == "Finished").count() >= 8 {
            break jobs;
        }
        assert!(t0.elapsed() < Duration::from_secs(600), "{jobs:?}");
        std::thread::sleep(Duration::from_secs(1));
    };
    let logs: Vec<String> = jobs.iter().map(|(id, _)| daemon.log(*id)).collect();
    let finished = jobs.iter().filter(|(_, s)| s == "Finished").count();
    let stopped = logs.iter().filter(|l| l.contains("exit code 75")).count();
    assert!(
        finished == 8 && stopped >= 4 && jobs.len() == finished + stopped,
        "{jobs:?}\n{}",
        logs.join("\n---\n")
    );
    let rows = status(t.path(), "S");
    assert!(states(&rows).iter().all(|s| s == "done"), "{rows:?}");
    for name in ["lr0.001/fold0", "lr0.0001/fold1"] {
        let first = test_metric(&t.path().join("S/runs").join(name), "sc_log_mse");
        let second = test_metric(&t.path().join("S/runs/phase2").join(name), "sc_log_mse");
        // As in tests/sweep/sweep_stages.rs: one binary, one machine, phase 2 at lr 1e-12 moves no
        // weight above ≈ 3e-5 at all (less than half its f32 ulp), so 1e-9 is headroom only.
        assert!(
            (first - second).abs() <= 1e-9 * first.abs(),
            "{name}: {first} vs {second}"
        );
    }
}
