//! `trainer sweep`: a 2 × 2 grid × 2 folds planned, run locally two at a time and as a real
//! Slurm array with throttle 2; status from the files the tasks leave; a failed task and a task
//! killed midway re-planned alone with `plan --missing`; spec errors name their line.

use crate::common;
use crate::slurm;
use crate::sweep_helpers as sweep;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;
use sweep::{plan, setup_with, states, status};

/// A tiny cohort and a spec of 2 learning rates × 2 KL weights × 2 folds over it.
fn setup(dir: &Path) {
    setup_with(
        dir,
        "folds = [0, 1]\n",
        "[grid]\nlearning_rate = [1e-3, 1e-4]\nlambda_kl = [0.0, 0.1]\n",
    );
}

#[test]
fn a_local_sweep_runs_two_at_a_time_and_replans_only_what_failed() {
    let t = tempfile::tempdir().unwrap();
    setup(t.path());
    let printed = plan(t.path(), "local", Some(2));
    assert!(printed.contains("run-local.sh"), "{}", printed);
    let rows = status(t.path(), "S");
    assert_eq!(rows.len(), 8);
    assert!(states(&rows).iter().all(|s| s == "pending"));
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"lk0.1_lr0.0001/fold1"), "{names:?}");
    // Task 5 breaks: its cohort is missing.
    let cfg = t.path().join("S/tasks/5.toml");
    let good = std::fs::read_to_string(&cfg).unwrap();
    let bad: String = good
        .lines()
        .map(|l| {
            if l.starts_with("sc_dir") {
                "sc_dir = \"/nonexistent/sc\"".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&cfg, bad).unwrap();
    let o = run_in(t.path(), &["sweep", "run", "S", "--jobs", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let rows = status(t.path(), "S");
    let st = states(&rows);
    assert_eq!(st.iter().filter(|s| *s == "done").count(), 7, "{st:?}");
    assert_eq!(rows[5]["state"], "failed");
    assert!(rows[5]["code"].as_i64().unwrap() != 0);
    assert!(
        rows[5]["error"].as_str().unwrap().contains("/nonexistent"),
        "{}",
        rows[5]
    );
    for r in &rows {
        if r["state"] == "done" {
            let run = Path::new(r["run_dir"].as_str().unwrap());
            assert!(
                t.path().join(run).join("test_metrics.json").is_file(),
                "{r}"
            );
            // Healthy short runs: no degeneracy warning (the field is there for every task).
            assert_eq!(r["warnings"], serde_json::json!([]), "{r}");
        }
    }
    // A task killed midway (its process gone) counts as failed too.
    let gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    let _ = { gone }.wait();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    std::fs::write(
        t.path().join("S/status/2.json"),
        format!(
            "{{\"state\":\"running\",\"pid\":{pid},\"host\":\"{}\"}}",
            host.trim()
        ),
    )
    .unwrap();
    assert_eq!(status(t.path(), "S")[2]["state"], "failed");
    // plan --missing: a Slurm array of only those two, same names and run directories.
    let o = run_in(
        t.path(),
        &["sweep", "plan", "--missing", "S", "--scheduler", "slurm"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let script = std::fs::read_to_string(t.path().join("S/submit-missing.slurm")).unwrap();
    assert!(script.contains("#SBATCH --array=2,5%2"), "{script}");
    let o = Command::new("bash")
        .arg("-n")
        .arg(t.path().join("S/submit-missing.slurm"))
        .output()
        .unwrap();
    assert!(o.status.success(), "bash -n: {}", stderr(&o));
    // Fixed, run again: only the two run; the finished ones are untouched.
    std::fs::write(&cfg, good).unwrap();
    let done0 = t.path().join("S/runs/lk0.0_lr0.001/fold0/metrics.jsonl");
    let before = std::fs::read_to_string(&done0).unwrap();
    let o = run_in(t.path(), &["sweep", "run", "S", "--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 of 8 tasks to run"), "{}", stderr(&o));
    assert!(states(&status(t.path(), "S")).iter().all(|s| s == "done"));
    assert_eq!(std::fs::read_to_string(&done0).unwrap(), before);

    // A table over the sweep: grouped by learning rate and KL weight, n = 2 folds per group,
    // mean ± sd; a deliberately deleted fold is named as missing.
    std::fs::remove_file(
        t.path()
            .join("S/runs/lk0.1_lr0.001/fold1/test_metrics.json"),
    )
    .unwrap();
    let o = run_in(
        t.path(),
        &[
            "compare",
            "S",
            "--group-by",
            "learning_rate,lambda_kl",
            "--metric",
            "sc_log_mse",
            "--format",
            "md",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let lines: Vec<&str> = table.lines().collect();
    // Header, rule, four configurations and the identity's row.
    assert_eq!(lines.len(), 2 + 4 + 1, "{table}");
    assert!(lines[6].starts_with("| identity | identity | "), "{table}");
    assert!(
        lines[0].starts_with("| learning_rate | lambda_kl | n | sc_log_mse mean ± sd"),
        "{table}"
    );
    let full = lines
        .iter()
        .filter(|l| l.contains(" | 2 | ") && l.contains(" ± "))
        .count();
    assert_eq!(full, 3, "{table}");
    let short = lines
        .iter()
        .find(|l| l.contains("lk0.1_lr0.001/fold1"))
        .expect("missing fold named");
    assert!(short.contains(" | 1 | "), "{short}");
    let o = run_in(
        t.path(),
        &["compare", "S", "--group-by", "fold", "--format", "json"],
    );
    let groups: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let keys: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"]["fold"].as_str().unwrap())
        .collect();
    // Groups in the tasks' order, the identity's rows last.
    assert_eq!(keys, ["0", "1", "0 (identity)", "1 (identity)"], "{groups}");
    // --plot over a sweep's groups: a curve per task with results, labelled by its group and
    // the task's varied settings (its legend; never a path).
    let o = run_in(
        t.path(),
        &[
            "compare",
            "S",
            "--group-by",
            "learning_rate",
            "--plot",
            "p.svg",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(t.path().join("p.svg")).unwrap();
    assert!(
        svg.contains("learning_rate=0.0001 (fold=1 lambda_kl=0.1 learning_rate=0.0001)"),
        "{svg}"
    );
}

#[test]
fn spec_errors_name_the_file_and_line() {
    let t = tempfile::tempdir().unwrap();
    for (spec, needle) in [
        (
            "command = \"train-gnn\"\n[grid]\nno_such_flag = [1]\n",
            "spec.toml:3",
        ),
        (
            "command = \"train-gnn\"\n[grid]\nlearning_rate = []\n",
            "is empty",
        ),
        (
            "command = \"train-gnn\"\n[base]\ncv_fold = 1\n",
            "folds = [...]",
        ),
        ("command = \"train-nothing\"\n", "spec.toml:1"),
    ] {
        std::fs::write(t.path().join("spec.toml"), spec).unwrap();
        let o = run_in(t.path(), &["sweep", "plan", "spec.toml", "--out", "S"]);
        assert!(!o.status.success(), "{spec}");
        assert!(stderr(&o).contains(needle), "{spec}: {}", stderr(&o));
        assert!(!t.path().join("S/sweep.json").exists());
    }
}

#[test]
fn a_slurm_array_with_throttle_two_finishes_eight_of_eight() {
    let Some(conf) = slurm::slurm_conf() else {
        eprintln!("SKIP sweep on Slurm: no Slurm (scripts/slurm-up.sh or TRAINER_REQUIRE_SLURM=1)");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    setup(t.path());
    plan(t.path(), "slurm", Some(2));
    let script = t.path().join("S/submit.slurm");
    assert!(
        std::fs::read_to_string(&script)
            .unwrap()
            .contains("#SBATCH --array=0-7%2")
    );
    let o = Command::new("sbatch")
        .env("SLURM_CONF", &conf)
        .env("TRAINER", env!("CARGO_BIN_EXE_trainer"))
        .current_dir(t.path())
        .args(["--parsable"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch: {}", stderr(&o));
    let job = stdout(&o).trim().split(';').next().unwrap().to_string();
    for task in 0..8 {
        let id = format!("{job}_{task}");
        let state = slurm::wait_for_job(&conf, &id, Duration::from_secs(900));
        let log = std::fs::read_to_string(t.path().join(format!("S/logs/slurm_{job}_{task}.out")))
            .unwrap_or_default();
        assert_eq!(state, "COMPLETED", "task {task}:\n{log}");
    }
    let rows = status(t.path(), "S");
    assert!(states(&rows).iter().all(|s| s == "done"), "{rows:?}");
}

/// `--scheduler lsf`: an LSF array (`-J "name[1-8]%2"`, requeue on 75, USR2 warning) whose
/// element i + 1 runs task i; run here as LSF would run one element (no LSF on this machine:
/// the script itself, with `LSB_JOBINDEX` set).
#[test]
fn an_lsf_array_element_runs_its_task() {
    let t = tempfile::tempdir().unwrap();
    setup(t.path());
    let printed = plan(t.path(), "lsf", Some(2));
    assert!(printed.contains("bsub < "), "{}", printed);
    let script = t.path().join("S/submit.lsf");
    let text = std::fs::read_to_string(&script).unwrap();
    for line in ["#BSUB -J \"S[1-8]%2\"", "#BSUB -Q \"75\"", "#BSUB -wa USR2"] {
        assert!(text.contains(line), "{line}:\n{text}");
    }
    let o = Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(o.status.success(), "bash -n: {}", stderr(&o));
    let o = Command::new("bash")
        .arg(&script)
        .env("LSB_JOBINDEX", "3")
        .env("TRAINER", env!("CARGO_BIN_EXE_trainer"))
        .current_dir(t.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("task 2 exit code 0"), "{}", stdout(&o));
    let rows = status(t.path(), "S");
    assert_eq!(rows[2]["state"], "done");
    assert_eq!(rows.iter().filter(|r| r["state"] == "pending").count(), 7);
}

/// `config = "FILE.toml"` in `[base]`: the file's keys (sections too) under each task's own,
/// resolved into the manifest and the task files; a key the command lacks names the file.
#[test]
fn a_config_file_in_the_spec_is_the_base_of_every_task() {
    let t = tempfile::tempdir().unwrap();
    setup_with(
        t.path(),
        "folds = [0]\n",
        "config = \"base.toml\"\n[grid]\nhidden_dim = [12]\n",
    );
    std::fs::write(
        t.path().join("base.toml"),
        "[model]\nhidden_dim = 32\nlatent_dim = 4\n[optimisation]\nlearning_rate = 0.005\n",
    )
    .unwrap();
    plan(t.path(), "local", None);
    let task: toml::Table = std::fs::read_to_string(t.path().join("S/tasks/0.toml"))
        .unwrap()
        .parse()
        .unwrap();
    // The spec's [base] and grid win over the file; the file's other keys are kept.
    assert_eq!(task["hidden_dim"].as_integer(), Some(12));
    assert_eq!(task["latent_dim"].as_integer(), Some(8));
    assert_eq!(task["learning_rate"].as_float(), Some(0.005));
    assert!(!task.contains_key("config"));
    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cfg = std::fs::read_to_string(t.path().join("S/runs/hd12/fold0/config.toml")).unwrap();
    assert!(cfg.contains("learning_rate = 0.005"), "{cfg}");
    std::fs::write(t.path().join("base.toml"), "max_epoch = 3\n").unwrap();
    let o = run_in(t.path(), &["sweep", "plan", "spec.toml", "--out", "S2"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("base.toml: `max_epoch` is not a flag of trainer train-gnn"),
        "{}",
        stderr(&o)
    );
    assert!(!t.path().join("S2").exists());
}

/// The worked example of docs/guide/sweep.md plans as written (every key a flag; 1 variant × 4
/// grid points × 2 folds × 2 seeds), with the names the page shows.
#[test]
fn the_readme_sweep_example_plans() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/guide/sweep.md"))
            .unwrap();
    let start = readme
        .find("```toml\n# sweep.toml\n")
        .expect("docs/guide/sweep.md's sweep.toml")
        + 8;
    let end = start + readme[start..].find("```").unwrap();
    let t = tempfile::tempdir().unwrap();
    std::fs::write(t.path().join("spec.toml"), &readme[start..end]).unwrap();
    plan(t.path(), "slurm", Some(4));
    let rows = status(t.path(), "S");
    assert_eq!(rows.len(), 16);
    assert_eq!(rows[0]["name"], "fixed/epw1.0_ld0.0/fold0/seed1");
    assert!(
        rows.iter()
            .any(|r| r["name"] == "fixed/epw3.0_ld0.01/fold1/seed2")
    );
}
