//! A sweep moves between queues in place (issue 70, item 3): planned for Slurm with a GPU and
//! run on this machine (no NVIDIA driver: every task fails its GPU preflight, and the failure
//! says how to move the sweep), re-planned with `plan --missing DIR --gpus 0 --scheduler local`
//! (the manifest rewritten, each change said), run on the CPU, re-planned back to a Slurm GPU
//! partition (an array of only what is left, checked by the test Slurm's `sbatch --test-only`),
//! and finished; the finished task's files are never touched. Resource values the scheduler
//! would refuse are refused at plan time (issue 71).

use crate::common;
use crate::slurm;
use crate::sweep_helpers as sweep;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

use common::*;
use serde_json::Value;
use sweep::{setup_with, states, status};

const GPU_RESOURCES: &str = "[resources]\npartition = \"q_ai4\"\ngpus = 1\ngpu_type = \"a100\"\n";

fn ok(dir: &Path, args: &[&str]) -> Output {
    let o = run_in(dir, args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    o
}

fn refused(dir: &Path, args: &[&str]) -> String {
    let o = run_in(dir, args);
    assert!(!o.status.success(), "{args:?} succeeded: {}", stderr(&o));
    stderr(&o)
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn manifest(s: &Path) -> Value {
    serde_json::from_str(&read(&s.join("sweep.json"))).unwrap()
}

/// Every file of a finished task (its run directory, status file and log) with its bytes and
/// modification time.
fn snapshot(s: &Path, index: usize, run: &Path) -> BTreeMap<PathBuf, (Vec<u8>, SystemTime)> {
    fn walk(p: &Path, out: &mut BTreeMap<PathBuf, (Vec<u8>, SystemTime)>) {
        if p.is_dir() {
            for e in std::fs::read_dir(p).unwrap() {
                walk(&e.unwrap().path(), out);
            }
        } else {
            let mtime = std::fs::metadata(p).unwrap().modified().unwrap();
            out.insert(p.to_path_buf(), (std::fs::read(p).unwrap(), mtime));
        }
    }
    let mut out = BTreeMap::new();
    walk(run, &mut out);
    walk(&s.join(format!("status/{index}.json")), &mut out);
    walk(&s.join(format!("logs/{index}.log")), &mut out);
    assert!(out.len() > 3, "{out:?}");
    out
}

/// Task `index`'s config with its cohort pointed at nothing (`broken`), or back (`good`).
fn set_config(s: &Path, index: usize, text: &str) {
    std::fs::write(s.join(format!("tasks/{index}.toml")), text).unwrap();
}

#[test]
fn a_gpu_sweep_moves_to_the_cpu_and_back_to_slurm_in_place_keeping_finished_runs() {
    let t = tempfile::tempdir().unwrap();
    let doctor = trainer()
        .args(["doctor", "--require-gpu"])
        .output()
        .unwrap();
    if doctor.status.success() {
        eprintln!("SKIP sweep re-plan: this machine has a usable GPU (the preflight passes)");
        return;
    }
    setup_with(t.path(), "folds = [0, 1]\n", GPU_RESOURCES);
    let s = t.path().join("S");
    ok(t.path(), &["sweep", "plan", "spec.toml", "--out", "S"]);
    assert!(read(&s.join("submit.slurm")).contains("#SBATCH --gres=gpu:a100:1\n"));

    // On this machine every task fails its GPU preflight: no driver (exit 10).
    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let fix = "`trainer sweep plan --missing S --gpus 0 --scheduler local`, then `trainer sweep \
               run S`";
    assert!(stderr(&o).contains(fix), "{}", stderr(&o));
    let rows = status(t.path(), "S");
    for r in &rows {
        assert_eq!(
            (&r["state"], &r["code"]),
            (&"failed".into(), &10.into()),
            "{r}"
        );
        assert!(
            r["error"].as_str().unwrap().starts_with("GPU preflight: "),
            "{r}"
        );
        assert!(r["fix"].as_str().unwrap().contains(fix), "{r}");
    }
    let said = stdout(&ok(t.path(), &["sweep", "status", "S"]));
    assert!(said.contains("hint: 2 task(s) failed the GPU preflight") && said.contains(fix));
    assert!(read(&s.join("logs/0.log")).contains("hint: to run the sweep"));
    let runs: Vec<PathBuf> = rows
        .iter()
        .map(|r| t.path().join(r["run_dir"].as_str().unwrap()))
        .collect();

    // Task 1 will fail on its own (its cohort is gone), so that task 0 alone finishes.
    let good = read(&s.join("tasks/1.toml"));
    let broken: String = good
        .lines()
        .map(|l| {
            if l.starts_with("sc_dir") {
                "sc_dir = \"/nonexistent/sc\"\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    set_config(&s, 1, &broken);

    // To the CPU, here: the manifest is rewritten, each change said, the GPU type dropped.
    let o = ok(
        t.path(),
        &[
            "sweep",
            "plan",
            "--missing",
            "S",
            "--gpus",
            "0",
            "--scheduler",
            "local",
        ],
    );
    let e = stderr(&o);
    assert!(
        e.contains(
            "[sweep] re-planned: scheduler slurm -> local; resources.gpus 1 -> 0; \
             resources.gpu_type a100 -> (none)\n"
        ),
        "{e}"
    );
    assert!(
        e.contains("gpu_type = a100 of ") && e.contains("left out (no GPUs)"),
        "{e}"
    );
    assert!(stdout(&o).contains("run-local.sh"), "{}", stdout(&o));
    let m = manifest(&s);
    assert_eq!(m["scheduler"], "local");
    assert_eq!(m["resources"]["gpus"], 0);
    assert_eq!(m["resources"]["gpu_type"], Value::Null);
    assert_eq!(m["resources"]["partition"], "q_ai4", "kept: {m}");
    // Inside a GPU allocation too (its variable would make cuda:0 the trainer's default
    // device): the tasks run on the CPU, without the preflight.
    let o = trainer()
        .args(["sweep", "run", "S"])
        .env("SLURM_JOB_GPUS", "0")
        .current_dir(t.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!stderr(&o).contains("GPU preflight"), "{}", stderr(&o));
    let rows = status(t.path(), "S");
    assert_eq!(states(&rows), ["done", "failed"], "{rows:?}");
    assert!(
        rows[1]["error"].as_str().unwrap().contains("/nonexistent"),
        "{}",
        rows[1]
    );
    assert_eq!(
        read(&s.join("logs/0.log"))
            .matches("=== GPU preflight")
            .count(),
        1
    );
    let said = stdout(&ok(t.path(), &["sweep", "status", "S"]));
    assert!(
        !said.contains("hint:"),
        "the sweep asks for no GPU now: {said}"
    );
    let done = snapshot(&s, 0, &runs[0]);

    // Back to a Slurm GPU partition: an array of task 1 only, with the new resources.
    let back = [
        "sweep",
        "plan",
        "--missing",
        "S",
        "--scheduler",
        "slurm",
        "--gpus",
        "1",
        "--partition",
        "q_ai8",
    ];
    let e = stderr(&ok(t.path(), &back));
    assert!(
        e.contains(
            "[sweep] re-planned: scheduler local -> slurm; resources.partition q_ai4 -> q_ai8; \
             resources.gpus 0 -> 1\n"
        ),
        "{e}"
    );
    let script = s.join("submit-missing.slurm");
    let text = read(&script);
    for want in [
        "#SBATCH --array=1\n",
        "#SBATCH --partition=q_ai8\n",
        "#SBATCH --gres=gpu:1\n",
        "\"$TASK\" --preflight &",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    assert!(!text.contains("a100") && !text.contains("q_ai4"), "{text}");
    let o = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "bash -n: {}", stderr(&o));
    match slurm::slurm_conf() {
        Some(conf) => {
            // The test Slurm takes the directives (a real partition, its gres), submits nothing.
            let o = Command::new("sbatch")
                .env("SLURM_CONF", &conf)
                .current_dir(t.path())
                .arg("--test-only")
                .arg(&script)
                .output()
                .unwrap();
            assert!(o.status.success(), "sbatch --test-only: {}", stderr(&o));
        }
        None => eprintln!("SKIP sbatch --test-only of the re-plan: no Slurm (scripts/slurm-up.sh)"),
    }
    let e = stderr(&ok(t.path(), &back));
    assert!(
        e.contains("[sweep] re-planned: nothing changed (scheduler slurm"),
        "{e}"
    );
    assert_eq!(
        snapshot(&s, 0, &runs[0]),
        done,
        "a re-plan touched the finished task"
    );

    // Fixed and moved to the CPU again: only task 1 runs; task 0's files stay as they were.
    set_config(&s, 1, &good);
    ok(
        t.path(),
        &[
            "sweep",
            "plan",
            "--missing",
            "S",
            "--gpus",
            "0",
            "--scheduler",
            "local",
        ],
    );
    let o = ok(t.path(), &["sweep", "run", "S"]);
    assert!(stderr(&o).contains("1 of 2 tasks to run"), "{}", stderr(&o));
    assert_eq!(states(&status(t.path(), "S")), ["done", "done"]);
    assert!(runs[1].join("test_metrics.json").is_file());
    assert_eq!(
        snapshot(&s, 0, &runs[0]),
        done,
        "the rerun touched the finished task"
    );
}

#[test]
fn resources_the_scheduler_would_refuse_are_refused_at_plan_time() {
    let t = tempfile::tempdir().unwrap();
    setup_with(t.path(), "", "");
    let spec = t.path().join("spec.toml");
    let base = read(&spec);
    let plan = [
        "sweep",
        "plan",
        "spec.toml",
        "--out",
        "S",
        "--scheduler",
        "local",
    ];
    for (tail, flags, needles) in [
        (
            "[resources]\ncpus = 0\n",
            &[][..],
            &["spec.toml", "`cpus` = 0"][..],
        ),
        (
            "",
            &["--cpus", "0"][..],
            &["--cpus: `cpus` = \"0\": expected a whole number from 1"],
        ),
        (
            "",
            &["--gpus", "0", "--gpu-type", "a100"][..],
            &["`gpu_type` = \"a100\": it needs GPUs", "`gpus` = 0"],
        ),
        (
            "[resources]\ngpu_type = \"a100\"\n",
            &[],
            &["spec.toml", "no `gpus`"],
        ),
        (
            "[resources]\ngpus = 0\nmig = \"1g.5gb\"\n",
            &[],
            &["`mig` = \"1g.5gb\""],
        ),
        (
            "backend = \"cuda\"\n",
            &["--gpus", "0"],
            &["task 0 (", "backend = \"cuda\" runs on a GPU only"],
        ),
    ] {
        std::fs::write(&spec, format!("{base}{tail}")).unwrap();
        let e = refused(t.path(), &[&plan[..], flags].concat());
        for n in needles {
            assert!(e.contains(n), "{tail} {flags:?}: {n}\n{e}");
        }
        assert!(!t.path().join("S").exists(), "{tail} {flags:?}");
    }

    // A GPU type of the spec under `--gpus 0` is dropped and said, not refused.
    std::fs::write(&spec, format!("{base}{GPU_RESOURCES}")).unwrap();
    let e = stderr(&ok(t.path(), &[&plan[..], &["--gpus", "0"]].concat()));
    assert!(
        e.contains("--gpus 0: gpu_type = a100 of spec.toml left out (no GPUs)"),
        "{e}"
    );
    let m = manifest(&t.path().join("S"));
    assert_eq!(
        (&m["resources"]["gpus"], &m["resources"]["gpu_type"]),
        (&0.into(), &Value::Null)
    );

    // A re-plan's refusal leaves the manifest as it was.
    let before = read(&t.path().join("S/sweep.json"));
    for (flags, needle) in [
        (
            &["--gpu-type", "h100"][..],
            "`gpu_type` = \"h100\": it needs GPUs",
        ),
        (
            &["--cpus", "0", "--gpus", "1"][..],
            "--cpus: `cpus` = \"0\"",
        ),
    ] {
        let e = refused(
            t.path(),
            &[&["sweep", "plan", "--missing", "S"][..], flags].concat(),
        );
        assert!(e.contains(needle), "{flags:?}: {e}");
        assert_eq!(read(&t.path().join("S/sweep.json")), before, "{flags:?}");
    }
}
