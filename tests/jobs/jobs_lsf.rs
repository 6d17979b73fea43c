//! jobs/lsf_a100_mig.sh: no LSF here, so its directives are checked as text and the script is
//! run locally, as a job shell would run it: the CPU-test variant trains for real; the GPU path
//! runs with a stand-in `singularity` that records the command lines and fakes only the MIG
//! instance, so the exact commands the job would run are executed (on the CPU); the warning
//! signal (USR2) and the exit-75-then-rerun contract of `#BSUB -Q "75"` are exercised too.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/lsf_a100_mig.sh")
}

fn bsub_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("#BSUB"))
        .map(|l| l.trim_start_matches("#BSUB").trim().to_string())
        .collect()
}

#[test]
fn lsf_template_parses_and_carries_the_mig_directives() {
    let o = Command::new("bash")
        .arg("-n")
        .arg(script())
        .output()
        .unwrap();
    assert!(o.status.success(), "bash -n: {}", stderr(&o));
    let text = std::fs::read_to_string(script()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("#BSUB") {
            let prev = lines[i - 1];
            assert!(
                prev.starts_with("# ") || prev.starts_with("#BSUB"),
                "directive `{l}` has no explaining comment above it"
            );
        }
    }
    let d = bsub_lines(&text);
    for want in [
        "-n 1",
        "-gpu \"num=1:mode=shared:mps=no:j_exclusive=no\"",
        "-wa USR2",
        "-wt 5",
        "-Q \"75\"",
        "-o outputs/logs/mnist_mig_%J.out",
    ] {
        assert!(d.iter().any(|x| x == want), "missing #BSUB {want}: {d:?}");
    }
    assert!(text.contains("mig-pick"));
    assert!(text.contains("--resume auto"));
    assert!(text.contains("TRAINER_CPU_TEST"));
    for var in ["IMAGE=", "BIND_MOUNTS=", "DATA_DIR=", "RESULTS_DIR="] {
        assert!(text.contains(var), "no {var}");
    }
}

fn base_env(cmd: &mut Command, dir: &Path) {
    // A clean job-like environment: no scheduler variables from the test runner's shell.
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_") || k.starts_with("LSB_") || k == "CUDA_VISIBLE_DEVICES" {
            cmd.env_remove(k);
        }
    }
    cmd.current_dir(dir)
        .env("LSB_JOBID", "4242")
        .env("LSB_QUEUE", "gpu_a100")
        .env("LSB_HOSTS", "a100node")
        .env("DATA_DIR", fashion_dir())
        .env("RESULTS_DIR", dir.join("results"));
}

fn run_script(dir: &Path, env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(script());
    base_env(&mut cmd, dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

fn cpu_test() -> Vec<(&'static str, String)> {
    vec![
        ("TRAINER_CPU_TEST", "1".into()),
        ("TRAINER_BIN", env!("CARGO_BIN_EXE_trainer").into()),
    ]
}

#[test]
fn lsf_cpu_test_runs_a_tiny_training_locally() {
    let t = tempfile::tempdir().unwrap();
    let o = run_script(t.path(), &cpu_test());
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("LSF job 4242"), "{out}");
    assert!(out.contains("trainer exit code 0"), "{out}");
    let run = t.path().join("results/mnist_mig_4242");
    assert_eq!(metrics_without_timing(&run).len(), 1, "{out}");
}

/// Writes a stand-in `singularity` that logs `args|CUDA_VISIBLE_DEVICES` per call and runs the
/// real binary; `mig-pick` answers with `mig_rc`/a fixed MIG UUID, and the GPU training command
/// is executed on the CPU with tiny limits.
fn shim(dir: &Path, mig: &str) -> (PathBuf, PathBuf) {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let record = dir.join("calls.txt");
    let body = format!(
        r#"#!/bin/bash
echo "$*|${{CUDA_VISIBLE_DEVICES:-}}" >> {rec}
shift 5   # exec --nv --bind MOUNTS IMAGE; "trainer" follows
shift     # trainer
case "$1" in
mig-pick) {mig} ;;
doctor) unset CUDA_VISIBLE_DEVICES; exec {bin} doctor ;;   # the MIG UUID is fake: no GPU check
train-mnist)
  args=()
  unset CUDA_VISIBLE_DEVICES
  for a in "$@"; do [[ "$a" == cuda ]] && a=cpu; args+=("$a"); done
  exec {bin} "${{args[@]}}" --limit-train 640 --limit-test 200 ;;
*) exec {bin} "$@" ;;
esac
"#,
        rec = record.display(),
        bin = env!("CARGO_BIN_EXE_trainer"),
    );
    let path = bin.join("singularity");
    std::fs::write(&path, body).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (bin, record)
}

fn gpu_env(bin: &Path) -> Vec<(&'static str, String)> {
    vec![
        (
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        ),
        ("IMAGE", "/ibmgpfs/u/trainer.sif".into()),
        ("EPOCHS", "1".into()),
    ]
}

#[test]
fn lsf_gpu_path_picks_a_mig_instance_and_runs_the_container_commands() {
    let t = tempfile::tempdir().unwrap();
    let uuid = "MIG-4f1c2a9e-1111-2222-3333-444455556666";
    let (bin, record) = shim(t.path(), &format!("echo {uuid}"));
    let o = run_script(t.path(), &gpu_env(&bin));
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let calls = std::fs::read_to_string(&record).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    let data = fashion_dir().display().to_string();
    let run = t
        .path()
        .join("results/mnist_mig_4242")
        .display()
        .to_string();
    let pre = "exec --nv --bind /ibmgpfs,/GPFS /ibmgpfs/u/trainer.sif trainer";
    assert_eq!(
        calls,
        vec![
            format!("{pre} mig-pick|"),
            format!("{pre} doctor --require-gpu|{uuid}"),
            format!(
                "{pre} train-mnist --data-dir {data} --device cuda --epochs 1 --out {run} --resume auto|{uuid}"
            ),
        ],
        "{out}"
    );
    assert!(out.contains(&format!("MIG instance {uuid}")), "{out}");
    assert_eq!(metrics_without_timing(Path::new(&run)).len(), 1);
}

#[test]
fn lsf_mig_pick_failures_stop_before_training() {
    // No free instance (21): exit 75 so that LSF requeues (#BSUB -Q "75").
    let t = tempfile::tempdir().unwrap();
    let (bin, _) = shim(t.path(), "exit 21");
    let o = run_script(t.path(), &gpu_env(&bin));
    assert_eq!(o.status.code(), Some(75), "{}", text(&o));
    assert!(text(&o).contains("no free MIG instance"));
    assert!(!t.path().join("results").exists());
    // The real mig-pick on this machine: no NVIDIA driver (10); the script passes that on.
    let t = tempfile::tempdir().unwrap();
    let (bin, _) = shim(
        t.path(),
        &format!("exec {} mig-pick", env!("CARGO_BIN_EXE_trainer")),
    );
    let o = run_script(t.path(), &gpu_env(&bin));
    assert_eq!(o.status.code(), Some(10), "{}", text(&o));
    assert!(
        text(&o).contains("mig-pick failed with exit code 10"),
        "{}",
        text(&o)
    );
    assert!(!t.path().join("results").exists());
}

#[test]
fn lsf_warning_signal_checkpoints_exits_75_and_the_rerun_resumes() {
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("job.out");
    let mut env = cpu_test();
    env.push((
        "TRAINER_CPU_TEST_ARGS",
        "--limit-train 1920 --limit-test 200 --epochs 1 --log-every-secs 1".into(),
    ));
    // The training waits after step 5 for the signal: on a fast machine the 30 steps end
    // before a signal sent at the first progress line arrives (CI saw exit 0 instead of 75).
    let mut first_env = env.clone();
    first_env.push(("TRAINER_TEST_PAUSE_AT_STEP", "5".into()));
    let mut cmd = Command::new("bash");
    cmd.arg(script());
    base_env(&mut cmd, t.path());
    for (k, v) in &first_env {
        cmd.env(k, v);
    }
    let f = std::fs::File::create(&log).unwrap();
    cmd.stdout(Stdio::from(f.try_clone().unwrap()))
        .stderr(Stdio::from(f));
    let mut child = cmd.spawn().unwrap();
    let t0 = Instant::now();
    loop {
        let s = std::fs::read_to_string(&log).unwrap_or_default();
        if s.contains("pausing after step 5") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "no training:\n{s}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // What `#BSUB -wa USR2 -wt 5` does five minutes before the run limit.
    let rc = Command::new("kill")
        .args(["-USR2", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(rc.success());
    let status = child.wait().unwrap();
    let first = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(75), "{first}");
    assert!(
        first.contains("job shell got SIGUSR2, forwarding"),
        "{first}"
    );
    let run = t.path().join("results/mnist_mig_4242");
    assert!(run.join("checkpoints/last.safetensors").is_file());
    // LSF requeues with the same job id; the second start resumes.
    let o = run_script(t.path(), &env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("resuming from"), "{}", text(&o));
    assert_eq!(metrics_without_timing(&run).len(), 1);
}
