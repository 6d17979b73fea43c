//! `trainer sweep` beyond one stage: a two-stage spec (`[then]`) runs each phase-2 task after its
//! own phase-1 task, resumed from phase 1's best weights (locally and as two Slurm arrays chained
//! with `aftercorr`); a task cancelled midway on the real Slurm is stopped (or failed) in `sweep status` and
//! `plan --missing` reruns only it.

use crate::common;
use crate::slurm;
use crate::sweep_helpers as sweep;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use sweep::{plan, setup_with, states, status, test_metric};

/// 2 learning rates × 2 folds, then phase 2 at a learning rate too small to move a weight: a
/// phase-2 run that really starts from phase 1's best checkpoint scores exactly as phase 1 did
/// (a fresh start would not: the two learning rates' runs differ).
fn two_stage(dir: &Path) {
    setup_with(
        dir,
        "folds = [0, 1]\n",
        "[grid]\nlearning_rate = [1e-3, 1e-4]\n[then]\nname = \"fine\"\nmax_epochs = 2\n\
         learning_rate = 1e-12\n",
    );
}

/// Phase 2 of every phase-1 task scored as its phase 1 did (so it started from its weights).
fn assert_resumed(sweep: &Path) {
    let mut scores = Vec::new();
    for name in [
        "lr0.001/fold0",
        "lr0.001/fold1",
        "lr0.0001/fold0",
        "lr0.0001/fold1",
    ] {
        let first = test_metric(&sweep.join("runs").join(name), "sc_log_mse");
        let second = test_metric(&sweep.join("runs/fine").join(name), "sc_log_mse");
        // Two processes of one binary on this machine (on Slurm or LSF: whatever CPUs the job
        // gets; the kernels cut work by shape, never by thread count). Phase 2 moves each
        // weight by ≈ lr = 1e-12 per Adam step, below half an f32 ulp of any weight larger
        // than ≈ 3e-5 (half an ulp of 3e-5 is ≈ 1e-12), so the weights and the score are the
        // same bits in practice (measured: equal, RAYON_NUM_THREADS=1 and 4); 1e-9 leaves room
        // for a few tiny weights that do move (their effect on the score is ≈ 1e-12 relative)
        // and is ≥ 10^7 below the gap between a fresh start and a resumed one (the two
        // learning rates' scores differ by ≈ 5%).
        eprintln!("{name}: phase 1 {first}, phase 2 {second}");
        assert!(
            (first - second).abs() <= 1e-9 * first.abs(),
            "{name}: phase 1 {first}, phase 2 {second}"
        );
        scores.push(first);
    }
    assert!(
        scores[0] != scores[2],
        "the two learning rates' runs should differ: {scores:?}"
    );
    let log = std::fs::read_to_string(sweep.join("logs/4.log")).unwrap();
    assert!(
        log.contains("runs/lr0.001/fold0/checkpoints/clg_ode_fold0_best.safetensors")
            && log.contains("0 missing keys"),
        "{log}"
    );
}

#[test]
fn a_two_stage_sweep_runs_phase_two_from_phase_one_best_weights_locally() {
    let t = tempfile::tempdir().unwrap();
    two_stage(t.path());
    plan(t.path(), "local", None);
    let rows = status(t.path(), "S");
    assert_eq!(rows.len(), 8);
    assert_eq!(rows[5]["name"], "fine/lr0.001/fold1");
    // Task 1's phase 1 breaks: its phase 2 (task 5) fails without starting, naming why.
    let cfg = t.path().join("S/tasks/1.toml");
    let good = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, good.replace("max_epochs = 1", "max_epochs = -1")).unwrap();
    let o = run_in(t.path(), &["sweep", "run", "S", "--jobs", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let rows = status(t.path(), "S");
    assert_eq!(
        states(&rows),
        [
            "done", "failed", "done", "done", "done", "failed", "done", "done"
        ]
    );
    let why = rows[5]["error"].as_str().unwrap();
    assert!(
        why.contains("phase 1 (task 1, lr0.001/fold1) is failed, not done"),
        "{why}"
    );
    // The missing ones as Slurm arrays: task 1, then its phase 2 chained to it.
    let o = run_in(
        t.path(),
        &["sweep", "plan", "--missing", "S", "--scheduler", "slurm"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("submit-missing.sh"), "{}", stdout(&o));
    let first = std::fs::read_to_string(t.path().join("S/submit-missing.slurm")).unwrap();
    assert!(first.contains("#SBATCH --array=1\n"), "{first}");
    let second = std::fs::read_to_string(t.path().join("S/submit-missing-phase2.slurm")).unwrap();
    assert!(
        second.contains("#SBATCH --array=1\n") && second.contains("+ 4 ))"),
        "{second}"
    );
    let chain = std::fs::read_to_string(t.path().join("S/submit-missing.sh")).unwrap();
    assert!(chain.contains("--dependency=aftercorr:"), "{chain}");
    for f in [
        "submit-missing.sh",
        "submit-missing.slurm",
        "submit-missing-phase2.slurm",
    ] {
        let o = Command::new("bash")
            .arg("-n")
            .arg(t.path().join("S").join(f))
            .output()
            .unwrap();
        assert!(o.status.success(), "bash -n {f}: {}", stderr(&o));
    }
    // Mended and run again here: the two run, phase 1 first.
    std::fs::write(&cfg, good).unwrap();
    let o = run_in(t.path(), &["sweep", "run", "S", "--jobs", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 of 8 tasks to run"), "{}", stderr(&o));
    assert!(states(&status(t.path(), "S")).iter().all(|s| s == "done"));
    assert_resumed(&t.path().join("S"));
    // A table by stage: phase 1 and phase 2 side by side, n = 4 each.
    let o = run_in(
        t.path(),
        &["compare", "S", "--group-by", "stage", "--format", "csv"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    assert!(
        table.lines().any(|l| l.starts_with("fine,4,"))
            && table.lines().any(|l| l.starts_with("phase1,4,")),
        "{table}"
    );
}

/// Submits with `bash script` against `conf`; returns its stdout.
fn submit(conf: &Path, dir: &Path, script: &str) -> String {
    let o = Command::new("bash")
        .arg(script)
        .env("SLURM_CONF", conf)
        .env("TRAINER", env!("CARGO_BIN_EXE_trainer"))
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{script}: {}{}", stdout(&o), stderr(&o));
    stdout(&o)
}

/// `sbatch --parsable script` against `conf`; returns the job id.
fn sbatch(conf: &Path, dir: &Path, script: &str) -> String {
    let o = Command::new("sbatch")
        .env("SLURM_CONF", conf)
        .env("TRAINER", env!("CARGO_BIN_EXE_trainer"))
        .current_dir(dir)
        .arg("--parsable")
        .arg(script)
        .output()
        .unwrap();
    assert!(o.status.success(), "sbatch {script}: {}", stderr(&o));
    stdout(&o).trim().split(';').next().unwrap().to_string()
}

/// The array job id after `label` in submit.sh's output (`phase 1: array job 12`).
fn job_after(out: &str, label: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(label))
        .and_then(|r| r.trim().split([',', ' ', ';']).next())
        .unwrap_or_else(|| panic!("no `{label}` in {out}"))
        .to_string()
}

#[test]
fn on_slurm_phase_two_runs_after_its_own_phase_one_and_from_its_best_weights() {
    let Some(conf) = slurm::slurm_conf() else {
        eprintln!("SKIP two-stage sweep on Slurm: no Slurm (scripts/slurm-up.sh)");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    two_stage(t.path());
    plan(t.path(), "slurm", Some(2));
    let out = submit(&conf, t.path(), "S/submit.sh");
    let (first, second) = (
        job_after(&out, "phase 1: array job"),
        job_after(&out, "phase 2: array job"),
    );
    let field = |id: &str, f: &str| slurm::job_field(&conf, id, f).unwrap_or_default();
    for i in 0..4 {
        let (one, two) = (format!("{first}_{i}"), format!("{second}_{i}"));
        let log = |job: &str, task: usize| {
            std::fs::read_to_string(t.path().join(format!("S/logs/slurm_{job}_{task}.out")))
                .unwrap_or_default()
        };
        let s1 = slurm::wait_for_job(&conf, &one, Duration::from_secs(600));
        assert_eq!(s1, "COMPLETED", "phase 1 task {i}:\n{}", log(&first, i));
        let s2 = slurm::wait_for_job(&conf, &two, Duration::from_secs(600));
        assert_eq!(s2, "COMPLETED", "phase 2 of task {i}:\n{}", log(&second, i));
        // Slurm's own record: phase 2 of task i started once phase 1 of task i had ended.
        let (end, start) = (field(&one, "EndTime"), field(&two, "StartTime"));
        assert!(
            start >= end,
            "task {i}: phase 2 started {start}, phase 1 ended {end}"
        );
        assert!(log(&second, i).contains(&format!("task {} exit code 0", i + 4)));
    }
    assert!(states(&status(t.path(), "S")).iter().all(|s| s == "done"));
    assert_resumed(&t.path().join("S"));
}

#[test]
fn on_slurm_a_task_cancelled_midway_is_rerun_alone() {
    let Some(conf) = slurm::slurm_conf() else {
        eprintln!("SKIP cancelled sweep task on Slurm: no Slurm (scripts/slurm-up.sh)");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    // Two quick tasks and two of 60 epochs (about ten seconds each here).
    setup_with(
        t.path(),
        "folds = [0, 1]\n",
        "[grid]\nmax_epochs = [1, 60]\npatience = [1000]\n",
    );
    plan(t.path(), "slurm", Some(2));
    let rows = status(t.path(), "S");
    assert_eq!(rows[2]["name"], "me60_p1000/fold0");
    let job = sbatch(&conf, t.path(), "S/submit.slurm");
    let log = t.path().join("S/logs/2.log");
    let t0 = Instant::now();
    while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("epoch 3/60")) {
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "task 2 never got going"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    slurm::slurm(&conf, "scancel", &[&format!("{job}_2")]);
    for i in 0..4 {
        let s = slurm::wait_for_job(&conf, &format!("{job}_{i}"), Duration::from_secs(600));
        assert_eq!(
            s,
            if i == 2 { "CANCELLED" } else { "COMPLETED" },
            "task {i}"
        );
    }
    // scancel sends SIGTERM to the batch shell, `sweep task` and the trainer: the trainer
    // checkpoints and `sweep task` records the task *stopped*, unless Slurm's kill after the
    // cancel ends `sweep task` first (then its recorded process is gone: *failed*). Which one
    // depends on the machine's speed; either way the task is re-planned alone.
    let rows = status(t.path(), "S");
    let got = states(&rows);
    assert_eq!(
        [&got[..2], &got[3..]].concat(),
        ["done", "done", "done"],
        "{rows:?}"
    );
    assert!(got[2] == "stopped" || got[2] == "failed", "{rows:?}");
    let o = run_in(
        t.path(),
        &["sweep", "plan", "--missing", "S", "--scheduler", "slurm"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let script = t.path().join("S/submit-missing.slurm");
    let text = std::fs::read_to_string(&script).unwrap();
    assert!(text.contains("#SBATCH --array=2%2\n"), "{text}");
    let done = t.path().join("S/runs/me1_p1000/fold0/metrics.jsonl");
    let before = std::fs::read_to_string(&done).unwrap();
    let again = sbatch(&conf, t.path(), "S/submit-missing.slurm");
    let s = slurm::wait_for_job(&conf, &format!("{again}_2"), Duration::from_secs(600));
    assert_eq!(s, "COMPLETED");
    assert!(states(&status(t.path(), "S")).iter().all(|s| s == "done"));
    assert_eq!(std::fs::read_to_string(&done).unwrap(), before);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("resum"),
        "the rerun should resume its checkpoint:\n{text}"
    );
}

/// `--scheduler lsf`, two stages: the phase-2 array waits for the phase-1 array (`-w`); its
/// element e runs task e − 1 + 4; run here as LSF runs an element (no LSF on this machine).
#[test]
fn an_lsf_phase_two_element_runs_its_task_from_phase_one_best_weights() {
    let t = tempfile::tempdir().unwrap();
    two_stage(t.path());
    let printed = plan(t.path(), "lsf", None);
    assert!(
        printed.contains("submit.lsf && bsub < ") && printed.contains("submit-phase2.lsf"),
        "{}",
        printed
    );
    let second = std::fs::read_to_string(t.path().join("S/submit-phase2.lsf")).unwrap();
    for line in ["#BSUB -J \"S-phase2[1-4]\"", "#BSUB -w \"ended(S)\""] {
        assert!(second.contains(line), "{line}:\n{second}");
    }
    let element = |script: &str, e: &str| {
        let o = Command::new("bash")
            .arg(t.path().join("S").join(script))
            .env("LSB_JOBINDEX", e)
            .env("TRAINER", env!("CARGO_BIN_EXE_trainer"))
            .current_dir(t.path())
            .output()
            .unwrap();
        (o.status.code(), stdout(&o))
    };
    // Element 2 of phase 2 = task 5, whose phase 1 (task 1) has not run: it fails, saying so.
    let (code, out) = element("submit-phase2.lsf", "2");
    assert_eq!(code, Some(1), "{out}");
    let rows = status(t.path(), "S");
    assert!(
        rows[5]["error"]
            .as_str()
            .unwrap()
            .contains("phase 1 (task 1, lr0.001/fold1) is pending, not done"),
        "{}",
        rows[5]
    );
    for (script, e) in [("submit.lsf", "1"), ("submit-phase2.lsf", "1")] {
        let (code, out) = element(script, e);
        assert_eq!(code, Some(0), "{script} element {e}:\n{out}");
    }
    let runs = t.path().join("S/runs");
    let (first, second) = (
        test_metric(&runs.join("lr0.001/fold0"), "sc_log_mse"),
        test_metric(&runs.join("fine/lr0.001/fold0"), "sc_log_mse"),
    );
    assert_eq!(first, second);
}

/// Both stages stopped at a checkpoint (exit 75) and requeued by their array scripts, as at a
/// time limit: phase 2 still waits for the whole of phase 1 (`aftercorr` is not fulfilled by a
/// requeued task), the phase-2 array task requeues itself by its own array index, and resumed
/// phase 2 still starts from phase 1's best weights.
#[test]
fn on_slurm_requeued_stages_stay_chained() {
    let Some(conf) = slurm::slurm_conf() else {
        eprintln!("SKIP requeued two-stage sweep on Slurm: no Slurm (scripts/slurm-up.sh)");
        return;
    };
    let t = tempfile::tempdir().unwrap();
    setup_with(
        t.path(),
        "folds = [0]\n",
        "batch_size = 4\nstop_after_steps = 2\n[then]\nmax_epochs = 2\nlearning_rate = 1e-12\n",
    );
    plan(t.path(), "slurm", None);
    let out = submit(&conf, t.path(), "S/submit.sh");
    let (first, second) = (
        job_after(&out, "phase 1: array job"),
        job_after(&out, "phase 2: array job"),
    );
    let (one, two) = (format!("{first}_0"), format!("{second}_0"));
    let log = |job: &str| {
        std::fs::read_to_string(t.path().join(format!("S/logs/slurm_{job}.out")))
            .unwrap_or_default()
    };
    let s1 = slurm::wait_for_job(&conf, &one, Duration::from_secs(600));
    assert_eq!(s1, "COMPLETED", "phase 1:\n{}", log(&one));
    let s2 = slurm::wait_for_job(&conf, &two, Duration::from_secs(600));
    assert_eq!(s2, "COMPLETED", "phase 2:\n{}", log(&two));
    let field = |id: &str, f: &str| slurm::job_field(&conf, id, f).unwrap_or_default();
    for (id, stage) in [(&one, "phase 1"), (&two, "phase 2")] {
        let restarts: u32 = field(id, "Restarts").parse().unwrap_or(0);
        assert!(restarts >= 1, "{stage} was never requeued:\n{}", log(id));
    }
    let (end, start) = (field(&one, "EndTime"), field(&two, "StartTime"));
    assert!(start >= end, "phase 2 started {start}, phase 1 ended {end}");
    assert!(
        log(&two).contains(&format!("requeueing {second}_0 (task 1)")),
        "{}",
        log(&two)
    );
    let runs = t.path().join("S/runs");
    assert_eq!(
        test_metric(&runs.join("fold0"), "sc_log_mse"),
        test_metric(&runs.join("phase2/fold0"), "sc_log_mse")
    );
}
