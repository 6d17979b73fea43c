//! Running one task (`sweep task`, `sweep run`): its GPU preflight, phase 2's start from phase
//! 1's best checkpoint, the trainer under supervision, and the status it ends in
//! ([`super::state`] holds the files).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use std::io::Write as _;

use anyhow::{Context, Result};

use super::spec::Task;
use super::state::{
    GPU_PREFLIGHT, LOGS, STATUS, TaskState, cpu_fix, host, last_error, log_path, now, read_state,
    set_aside_torn_run, start_ticks, status_path,
};
use super::supervise;
use super::{Manifest, run_dir, task_config};
use crate::files::write_json;
use crate::outputs::RunDir;
use crate::outputs::run_files::BEST_MODEL_SUFFIX;
use crate::training_command::TrainingCommand;

/// The best checkpoint of phase-1 task `p` (`checkpoints/*_best.safetensors` in its run
/// directory), or why there is none yet.
fn phase_one_best(dir: &Path, m: &Manifest, p: usize) -> Result<PathBuf> {
    let first = m.task(p)?;
    let state = read_state(dir, m, first);
    if !matches!(state, TaskState::Done { .. }) {
        anyhow::bail!(
            "phase 1 (task {p}, {}) is {}, not done: this phase-2 task resumes from its best \
             checkpoint",
            first.name,
            state.label()
        );
    }
    let run = RunDir::new(run_dir(dir, first));
    let ckpts = run.checkpoints();
    let best = run
        .best_models()
        .with_context(|| format!("phase 1 (task {p}): no {}", ckpts.display()))?;
    match best.as_slice() {
        [one] => Ok(std::path::absolute(one).unwrap_or(one.clone())),
        _ => anyhow::bail!(
            "phase 1 (task {p}): expected one *{BEST_MODEL_SUFFIX} in {}, found {}",
            ckpts.display(),
            best.len()
        ),
    }
}

/// The GPU preflight of a task (`trainer doctor --require-gpu`'s checks, in this process): the
/// report goes to the task's log; a failure is the task's state, with the doctor's exit code
/// and its first failure as the reason. `Some(code)` when the task must not start.
/// The task's own `backend` decides which CUDA compatibility rules apply (`cluster::compat`);
/// without one, those of the backend a GPU run takes by default.
fn preflight(dir: &Path, t: &Task, mut log: &std::fs::File) -> Result<Option<i32>> {
    use crate::cluster::compat::GpuBackend;
    let report = match t.flags.get("backend").and_then(|b| b.as_str()) {
        Some("cuda" | "cuda-fusion") => {
            crate::cluster::DoctorReport::collect_for(true, &[GpuBackend::Cuda], true)
        }
        Some("tch" | "tch-plain") => {
            crate::cluster::DoctorReport::collect_for(true, &[GpuBackend::Tch], true)
        }
        _ => crate::cluster::DoctorReport::collect(true),
    };
    writeln!(log, "=== GPU preflight (trainer doctor --require-gpu)")?;
    write!(log, "{}", report.render())?;
    if report.exit_code == 0 {
        return Ok(None);
    }
    let reason = report.failures().next().map_or_else(
        || "the GPU checks failed".to_string(),
        |f| match &f.fix {
            Some(fix) => format!("{} (fix: {fix})", f.message),
            None => f.message.clone(),
        },
    );
    let code = i32::from(report.exit_code);
    let fix = cpu_fix(dir);
    writeln!(
        log,
        "error: GPU preflight failed with exit code {code}: {reason}\nhint: {fix}"
    )?;
    let state = TaskState::Failed {
        code: Some(code),
        error: format!("{GPU_PREFLIGHT}{reason}"),
    };
    write_json(&status_path(dir, t.index), &state)?;
    eprintln!(
        "[sweep] task {} ({}): GPU preflight failed (exit {code}): {reason}",
        t.index, t.name
    );
    Ok(Some(code))
}

/// Whether the manifest asks for no GPUs in so many words (`gpus = 0`, not left out): its
/// tasks then run with `--device cpu`, over their own `device` and over the default device a
/// GPU allocation around them would give (a sweep moved off the GPUs must not then fail in the
/// trainer for wanting one).
fn on_cpu(m: &Manifest) -> bool {
    m.resources.gpus == Some(0)
}

/// The plan's check of a sweep on the CPU ([`on_cpu`]): a task whose `backend` runs on a GPU
/// only (cuda) would fail; it is refused, naming the task and the key.
pub(super) fn check_cpu_tasks(m: &Manifest) -> Result<()> {
    use crate::backend::BackendKind;
    if !on_cpu(m) {
        return Ok(());
    }
    for t in &m.tasks {
        let Some(name) = t.flags.get("backend").and_then(|b| b.as_str()) else {
            continue;
        };
        let kind = <BackendKind as clap::ValueEnum>::from_str(name, true);
        if matches!(kind, Ok(BackendKind::Cuda | BackendKind::CudaFusion)) {
            anyhow::bail!(
                "task {} ({}): backend = {name:?} runs on a GPU only, and the plan has `gpus` = \
                 0 (its tasks run with --device cpu): ask for GPUs, or plan the sweep again \
                 with a CPU backend (flex, tch)",
                t.index,
                t.name
            );
        }
    }
    Ok(())
}

/// Runs task `t` of the sweep in `dir` (its flags, its run directory, resuming its own
/// checkpoint) with extra environment `env`, after the GPU preflight when `gpu_preflight`;
/// forwards SIGUSR1/USR2/TERM/INT to the trainer and returns its exit code.
pub(super) fn run_task(
    dir: &Path,
    m: &Manifest,
    t: &Task,
    env: &[(&str, &str)],
    gpu_preflight: bool,
) -> Result<i32> {
    // A second start of a live task is refused before it touches anything of the live one.
    if let Some(holder) = crate::outputs::rundir::held_by(&run_dir(dir, t)) {
        anyhow::bail!(
            "task {} ({}) is already running (its run directory is locked by pid {holder}); \
             nothing changed",
            t.index,
            t.name
        );
    }
    for sub in [STATUS, LOGS] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("cannot create {}", dir.join(sub).display()))?;
    }
    let log = log_path(dir, t.index);
    // Not through a symlink: another user's link at the log's path must not get our output.
    use std::os::unix::fs::OpenOptionsExt;
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&log)
        .with_context(|| {
            format!(
                "cannot open the task's log {} (a symlink is refused)",
                log.display()
            )
        })?;
    if gpu_preflight && let Some(code) = preflight(dir, t, &out)? {
        return Ok(code);
    }
    set_aside_torn_run(dir, m, t, &out)?;
    let resume_from = match t.after.map(|p| phase_one_best(dir, m, p)).transpose() {
        Ok(path) => path,
        Err(error) => {
            // Phase 1 has not finished: this task fails without starting the trainer.
            writeln!(&out, "error: {error}")?;
            let state = TaskState::Failed {
                code: Some(1),
                error: error.to_string(),
            };
            write_json(&status_path(dir, t.index), &state)?;
            eprintln!("[sweep] task {} ({}): {error}", t.index, t.name);
            return Ok(1);
        }
    };
    let exe = std::env::current_exe().context("the trainer binary's path")?;
    let mut cmd = Command::new(exe);
    cmd.arg(&m.command)
        .arg("--config")
        .arg(task_config(dir, t.index))
        .arg("--out")
        .arg(run_dir(dir, t))
        .args(["--resume", "auto"]);
    if m.training_command().is_some_and(TrainingCommand::is_gnn) {
        cmd.arg("--results-dir").arg(dir);
    }
    if let Some(path) = &resume_from {
        cmd.arg("--resume-from").arg(path);
    }
    if on_cpu(m) {
        // After `--config`: the flag wins over the task's own `device`.
        cmd.args(["--device", "cpu"]);
        if let Some(d) = t.flags.get("device").filter(|d| d.as_str() != Some("cpu")) {
            writeln!(
                &out,
                "=== sweep.json has gpus = 0: --device cpu (over the task's device = {d})"
            )?;
        }
    }
    cmd.envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out);
    let mut child = supervise::spawn(&mut cmd).context("cannot start the trainer")?;
    let started = now();
    write_json(
        &status_path(dir, t.index),
        &TaskState::Running {
            pid: std::process::id(),
            host: host(),
            trainer_pid: Some(child.id()),
            since: Some(started),
            ticks: start_ticks(std::process::id()).map(|own| (own, start_ticks(child.id()))),
        },
    )?;
    eprintln!(
        "[sweep] task {} ({}) started; log {}",
        t.index,
        t.name,
        log.display()
    );
    let ended = supervise::wait_forwarding(&mut child)?;
    let code = ended.code;
    // A trainer stopped by a forwarded signal checkpoints first and exits 128 + the signal.
    let checkpointed = ended.signalled && matches!(ended.exited, Some(130 | 143));
    let state = match ended.exited {
        Some(0) => TaskState::Done {
            seconds: Some(now().saturating_sub(started)),
        },
        Some(75) => TaskState::Stopped,
        _ if checkpointed => TaskState::Stopped,
        _ if ended.killed => TaskState::Failed {
            code: None,
            error: "killed after a second stop signal (no checkpoint of its last steps)".into(),
        },
        c => TaskState::Failed {
            code: c,
            error: last_error(&log),
        },
    };
    write_json(&status_path(dir, t.index), &state)?;
    eprintln!(
        "[sweep] task {} ({}): {}{}",
        t.index,
        t.name,
        state.label(),
        state.detail()
    );
    Ok(code)
}
