//! The files a task leaves and what they say: `DIR/status/<i>.json` (running with its pid and
//! host, then done, failed with the exit code and the last error line, or stopped at a
//! checkpoint) and `DIR/logs/<i>.log` (the trainer's output, appended across restarts).
//! Running a task is [`super::task`].

use std::path::{Path, PathBuf};

use std::io::Write as _;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::spec::Task;
use super::{Manifest, run_dir};
use crate::outputs::RunDir;
use crate::training_command::TrainingCommand;

/// Where a task stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub(crate) enum TaskState {
    /// Never started (no status file).
    Pending,
    Running {
        /// The sweep process (`sweep task`, `sweep run`).
        pid: u32,
        host: String,
        /// The trainer it started.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        trainer_pid: Option<u32>,
        /// When it started (Unix seconds).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        since: Option<u64>,
        /// The start times (clock ticks after boot, `/proc/PID/stat`) of `pid` and
        /// `trainer_pid`: a pid the kernel gave to another process since is not this task's.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ticks: Option<(u64, Option<u64>)>,
    },
    Done {
        /// How long its last start ran, in seconds (for `status`'s ETA).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seconds: Option<u64>,
    },
    /// Exit 75: a checkpoint was written; the scheduler requeues it (or `sweep run` reruns it)
    /// and it resumes.
    Stopped,
    Failed {
        code: Option<i32>,
        error: String,
    },
    /// Recorded as done, but its results are gone or unreadable (a clean-up, a scratch purge):
    /// it runs again.
    Missing {
        error: String,
    },
}

impl TaskState {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running { .. } => "running",
            Self::Done { .. } => "done",
            Self::Stopped => "stopped",
            Self::Failed { .. } => "failed",
            Self::Missing { .. } => "missing",
        }
    }

    /// The rest of a status line.
    pub(crate) fn detail(&self) -> String {
        match self {
            Self::Running { pid, host, .. } => format!("  (pid {pid} on {host})"),
            Self::Stopped => "  (checkpoint written; resumes when run again)".into(),
            Self::Failed { code, error } => format!(
                "  (exit {}: {error})",
                code.map_or("by a signal".to_string(), |c| c.to_string())
            ),
            Self::Missing { error } => format!("  (done before, but {error}; runs again)"),
            _ => String::new(),
        }
    }

    /// Whether it failed its GPU preflight (no usable GPU where it ran).
    pub(crate) fn failed_gpu_preflight(&self) -> bool {
        matches!(self, Self::Failed { error, .. } if error.starts_with(GPU_PREFLIGHT))
    }

    /// Whether `sweep run` / `plan --missing` should (re)start it.
    pub(crate) fn wants_a_run(&self) -> bool {
        matches!(
            self,
            Self::Pending | Self::Stopped | Self::Failed { .. } | Self::Missing { .. }
        )
    }
}

/// How the error of a task that failed its GPU preflight starts.
pub(crate) const GPU_PREFLIGHT: &str = "GPU preflight: ";

/// What to do about tasks of the sweep in `dir` that failed their GPU preflight: the whole
/// sweep moved to this machine's CPU (the finished tasks kept), or kept on its queue.
pub(crate) fn cpu_fix(dir: &Path) -> String {
    let d = crate::cluster::scheduler::quote::sh_path(dir);
    format!(
        "to run the sweep on this machine's CPU instead: `trainer sweep plan --missing {d} --gpus \
         0 --scheduler local`, then `trainer sweep run {d}` (or stay on the queue: `--gpus 0 \
         --partition CPU_PARTITION`); finished tasks are kept"
    )
}

/// The sweep's manifest, `DIR/sweep.json`.
pub(crate) const MANIFEST: &str = "sweep.json";
/// `DIR/status/`: one `<i>.json` per task.
pub(crate) const STATUS: &str = "status";
/// `DIR/logs/`: one `<i>.log` per task, and the schedulers' own output files.
pub(crate) const LOGS: &str = "logs";

/// `DIR/sweep.json`.
pub(crate) fn manifest_path(dir: &Path) -> PathBuf {
    dir.join(MANIFEST)
}

/// `DIR/logs/`.
pub(crate) fn logs_dir(dir: &Path) -> PathBuf {
    dir.join(LOGS)
}

pub(super) fn status_path(dir: &Path, index: usize) -> PathBuf {
    dir.join(STATUS).join(format!("{index}.json"))
}

pub(super) fn log_path(dir: &Path, index: usize) -> PathBuf {
    logs_dir(dir).join(format!("{index}.log"))
}

/// Unix seconds now.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(super) fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Why a done task's results cannot be read (its test metrics for train-gnn, its metrics rows
/// for train-mnist), or `None` when they can.
fn results_gone(dir: &Path, m: &Manifest, t: &Task) -> Option<String> {
    let run = RunDir::new(run_dir(dir, t));
    let outcome = if m.training_command().is_some_and(TrainingCommand::is_gnn) {
        // Any JSON: a task's results are there (the reports read them through their type).
        crate::outputs::run_files::read_json::<serde_json::Value>(&run.test_metrics_json())
            .map(|_| ())
    } else {
        run.read_metrics().and_then(|rows| {
            if rows.is_empty() {
                anyhow::bail!("{}: no rows", run.metrics_jsonl().display())
            }
            Ok(())
        })
    };
    outcome.err().map(|e| format!("{e:#}"))
}

/// A task recorded as done whose results are torn runs again from scratch: its run directory
/// (which `--resume auto` would take for finished) is renamed `<name>.torn-<unix seconds>`,
/// nothing deleted.
pub(super) fn set_aside_torn_run(
    dir: &Path,
    m: &Manifest,
    t: &Task,
    mut log: &std::fs::File,
) -> Result<()> {
    let TaskState::Missing { error } = read_state(dir, m, t) else {
        return Ok(());
    };
    let run = run_dir(dir, t);
    if !run.exists() {
        return Ok(());
    }
    let aside = run.with_file_name(format!(
        "{}.torn-{}",
        run.file_name()
            .map_or("run".into(), |n| n.to_string_lossy()),
        now()
    ));
    std::fs::rename(&run, &aside)
        .with_context(|| format!("cannot move {} aside", run.display()))?;
    writeln!(
        log,
        "=== the run was done but {error}: moved to {} and run again",
        aside.display()
    )?;
    Ok(())
}

/// The state task `t` left; a task recorded as running on this host whose process is gone
/// failed (killed); a done task whose results are gone or torn is missing.
pub(crate) fn read_state(dir: &Path, m: &Manifest, t: &Task) -> TaskState {
    match recorded_state(dir, t) {
        TaskState::Done { seconds } => match results_gone(dir, m, t) {
            Some(error) => TaskState::Missing { error },
            None => TaskState::Done { seconds },
        },
        other => other,
    }
}

/// When process `pid` started, in clock ticks after boot (field 22 of `/proc/PID/stat`).
pub(super) fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name's closing parenthesis: state is field 3, start time field 22.
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Whether process `pid`, started at `ticks` when that is known, runs: a pid reused by a newer
/// process (another start time) does not. Without ticks (a status file of the previous format),
/// a process that started after `written` (Unix seconds: when the status was written, with two
/// seconds of slack for the clock's rounding) is not the one it names.
fn alive_since(pid: u32, ticks: Option<u64>, written: Option<u64>) -> bool {
    alive(pid)
        && match ticks {
            Some(t) => start_ticks(pid).is_none_or(|now| now == t),
            None => written.is_none_or(|w| start_unix(pid).is_none_or(|s| s <= w + 2)),
        }
}

/// When process `pid` started, in Unix seconds (`btime` of `/proc/stat` + its start ticks).
fn start_unix(pid: u32) -> Option<u64> {
    let ticks = start_ticks(pid)?;
    // SAFETY: sysconf has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .ok()
        .filter(|&h| h > 0)?;
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let boot: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(boot + ticks / hz)
}

/// Whether process `pid` runs (a zombie, ended and waiting for its reaper, does not).
fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid as i32, 0) == 0 };
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z'))
    });
    exists && !zombie
}

/// What `status/<i>.json` says (a running task whose process is gone: failed).
fn recorded_state(dir: &Path, t: &Task) -> TaskState {
    let Ok(text) = std::fs::read_to_string(status_path(dir, t.index)) else {
        return TaskState::Pending;
    };
    match serde_json::from_str::<TaskState>(&text) {
        Ok(TaskState::Running {
            pid,
            host: h,
            trainer_pid,
            since,
            ticks,
        }) if h == host() => {
            // The sweep process, or its trainer still finishing (it checkpoints on the
            // SIGTERM it gets when the sweep process dies).
            let (own, trainer) = ticks.map_or((None, None), |(a, b)| (Some(a), b));
            // The previous format has no ticks: the file's own time says when it was last
            // written (the trainer had started by then), its `since` when the task began (the
            // sweep process had started by then).
            let mtime = std::fs::metadata(status_path(dir, t.index))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs());
            let written = since.or(mtime);
            let trainer_written = mtime;
            if alive_since(pid, own, written)
                || trainer_pid.is_some_and(|p| alive_since(p, trainer, trainer_written))
            {
                TaskState::Running {
                    pid,
                    host: h,
                    trainer_pid,
                    since,
                    ticks,
                }
            } else {
                TaskState::Failed {
                    code: None,
                    error: "the task's process is gone (killed or cancelled)".into(),
                }
            }
        }
        Ok(s) => s,
        Err(_) => TaskState::Failed {
            code: None,
            error: "unreadable status file".into(),
        },
    }
}

/// The last line of the log that reads like an error (else its last line).
pub(super) fn last_error(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("error") || l.contains("panicked"))
        .or(lines.last())
        .map_or(String::new(), |l| l.trim().to_string())
}

#[cfg(test)]
mod old_format {
    use super::*;

    /// A status of the previous format (no start ticks) names a pid that a process started
    /// after the status was written now holds: not the task's, so the task is failed (and
    /// `plan --missing` re-plans it), not running forever.
    #[test]
    fn a_reused_pid_of_an_old_status_is_not_the_task() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep starts");
        let pid = child.id();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(STATUS)).unwrap();
        let task = Task {
            index: 0,
            name: "t".into(),
            varied: Default::default(),
            flags: Default::default(),
            after: None,
        };
        let write = |since: u64| {
            let text = format!(
                "{{\"state\":\"running\",\"pid\":{pid},\"host\":{:?},\"since\":{since}}}",
                host()
            );
            std::fs::write(status_path(dir.path(), 0), text).unwrap();
        };
        write(now() - 3600);
        let state = recorded_state(dir.path(), &task);
        assert!(matches!(state, TaskState::Failed { .. }), "{state:?}");
        write(now() + 60);
        let state = recorded_state(dir.path(), &task);
        assert!(matches!(state, TaskState::Running { .. }), "{state:?}");
        child.kill().ok();
        child.wait().ok();
    }
}
