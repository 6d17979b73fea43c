//! Campaigns of many runs: `trainer sweep plan SPEC.toml --out DIR` expands a specification
//! ([`spec`]) into tasks, each with its flags (`DIR/tasks/<i>.toml`, a `--config` file), its run
//! directory (`DIR/runs/<name>`) and a line in the manifest `DIR/sweep.json`, and writes the
//! scheduler's script ([`scripts`]: a Slurm or LSF array with a throttle, gflow submissions, or a
//! local plan). `sweep task DIR I` runs task I (what an array task calls; after a requeue it
//! resumes its own checkpoint), `sweep run DIR --jobs N` runs the pending tasks here, `sweep
//! status DIR` reads what the tasks left ([`state`]), `sweep plan --missing DIR` writes an array
//! of only the failed and pending tasks, with new resources or for another scheduler if asked
//! ([`replan`]: the sweep moves between queues in place, its finished runs kept). A `[then]`
//! stage adds one phase-2 task per task, resumed from its phase-1 task's best checkpoint
//! ([`expand`]; chained per task in the scripts).

pub(crate) mod expand;
mod plan;
pub(crate) mod progress;
mod replan;
pub mod scripts;
pub mod spec;
pub(crate) mod state;
mod supervise;
mod task;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

pub(crate) use self::plan::{CommandFlags, MAX_TASKS, PlanSettings};
use self::progress::Progress;
use self::spec::Task;
use self::state::{TaskState, read_state};
use crate::cluster::scheduler::resources::Resources;
use crate::cluster::scheduler::{SchedulerKind, quote};
use crate::training_command::TrainingCommand;

/// `DIR/sweep.json`: what `plan` resolved.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub command: String,
    pub spec: PathBuf,
    /// Every scheduler but torchrun (a launcher without jobs: refused on reading).
    pub scheduler: SchedulerKind,
    /// At most this many tasks at once (0: no limit).
    pub throttle: usize,
    /// What each task asks of the queue (`[resources]` and the plan's flags).
    #[serde(default)]
    pub resources: Resources,
    pub tasks: Vec<Task>,
}

impl Manifest {
    /// The training command its tasks run (`None` for a manifest [`Manifest::check`] refuses).
    pub fn training_command(&self) -> Option<TrainingCommand> {
        TrainingCommand::from_name(&self.command)
    }

    /// Reads `DIR/sweep.json` and checks it as `sweep plan` checked what it wrote
    /// ([`Manifest::check`]): a manifest edited into something the plan would have refused is
    /// refused, with the key named, before anything is rendered, run or submitted.
    pub fn read(dir: &Path) -> Result<Manifest> {
        Self::read_then(dir, |_| Ok(()))
    }

    /// Reads `DIR/sweep.json`, changes it with `change` (a re-plan's flags over it), then checks
    /// it ([`Manifest::check`]): a value the change replaces need not pass on its own.
    fn read_then(dir: &Path, change: impl FnOnce(&mut Manifest) -> Result<()>) -> Result<Manifest> {
        let path = state::manifest_path(dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                anyhow::bail!("{}: not a sweep directory (no sweep.json)", dir.display())
            }
            Err(e) => anyhow::bail!("{}: cannot read: {e}", path.display()),
        };
        let mut m: Manifest = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a sweep manifest", path.display()))?;
        change(&mut m)?;
        m.check().with_context(|| {
            format!(
                "{}: refused: it holds what `sweep plan` would not have written (edited by \
                 hand?); plan the sweep again",
                path.display()
            )
        })?;
        Ok(m)
    }

    /// The plan's checks on a manifest: the command, the spec path, the throttle, every
    /// resource through its allow-list, task indices in order, names that stay inside
    /// `runs/` and are unique, phase-2 tasks after phase-1 ones.
    pub fn check(&self) -> Result<()> {
        if self.training_command().is_none() {
            anyhow::bail!(
                "`command` = {:?}: expected {}",
                self.command,
                TrainingCommand::expected()
            );
        }
        quote::check_path("`spec`", &self.spec)?;
        if self.throttle > MAX_TASKS {
            anyhow::bail!(
                "`throttle` = {}: expected at most {MAX_TASKS}",
                self.throttle
            );
        }
        self.resources
            .check()
            .map_err(|e| anyhow::anyhow!("`resources`: {e}"))?;
        if self.tasks.len() > MAX_TASKS {
            anyhow::bail!("{} tasks: expected at most {MAX_TASKS}", self.tasks.len());
        }
        let mut names = std::collections::HashSet::new();
        for (i, t) in self.tasks.iter().enumerate() {
            let at = |e: String| anyhow::anyhow!("`tasks[{i}]`: {e}");
            if t.index != i {
                return Err(at(format!("`index` = {}: expected {i}", t.index)));
            }
            quote::check_task_name(&t.name).map_err(|e| at(e.to_string()))?;
            if !names.insert(t.name.as_str()) {
                return Err(at(format!("`name` {:?} is also an earlier task's", t.name)));
            }
            if let Some(p) = t.after
                && (p >= i || self.tasks[p].after.is_some())
            {
                return Err(at(format!(
                    "`after` = {p}: expected the index of an earlier phase-1 task"
                )));
            }
        }
        Ok(())
    }

    pub fn task(&self, index: usize) -> Result<&Task> {
        self.tasks.get(index).with_context(|| {
            format!(
                "task {index}: the sweep has tasks 0..{}",
                self.tasks.len().saturating_sub(1)
            )
        })
    }
}

/// `trainer sweep plan`: a new sweep from a spec, or (`--missing DIR`) what is left of one,
/// re-planned in place.
pub(crate) fn plan(s: &PlanSettings, flags: &CommandFlags) -> Result<()> {
    match &s.missing {
        Some(dir) => replan::plan_missing(dir, s),
        None => plan::plan(s, flags),
    }
}

/// A task's `--config` file.
pub(crate) fn task_config(dir: &Path, index: usize) -> PathBuf {
    dir.join("tasks").join(format!("{index}.toml"))
}

/// A task's run directory.
pub(crate) fn run_dir(dir: &Path, task: &Task) -> PathBuf {
    dir.join("runs").join(&task.name)
}

/// `trainer sweep task DIR INDEX [--preflight]`: runs one task to its end (after the GPU
/// preflight) and returns its exit code (75: a checkpoint was written, requeue me).
pub(crate) fn task(dir: &Path, index: usize, preflight: bool) -> Result<ExitCode> {
    let manifest = Manifest::read(dir)?;
    let t = manifest.task(index)?;
    let code = task::run_task(dir, &manifest, t, &[], preflight)?;
    Ok(crate::exit::Exit::from_status(code).into())
}

/// `trainer sweep run DIR --jobs N`: the pending and failed tasks on this machine, N at a time,
/// the cores shared out between them; a two-stage sweep's phase-2 tasks after phase 1. The first
/// SIGINT/SIGTERM stops launching and is forwarded to the running tasks (they checkpoint and
/// end *stopped*); a second one kills them; the runner then exits with 128 + the signal.
pub(crate) fn run(dir: &Path, jobs: usize) -> Result<ExitCode> {
    let manifest = Manifest::read(dir)?;
    let todo: Vec<&Task> = manifest
        .tasks
        .iter()
        .filter(|t| read_state(dir, &manifest, t).wants_a_run())
        .collect();
    let jobs = jobs.max(1);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = (cores / jobs).max(1).to_string();
    eprintln!(
        "[sweep] {} of {} tasks to run, {jobs} at a time, {threads} thread(s) each",
        todo.len(),
        manifest.tasks.len()
    );
    supervise::install_runner_stop()?;
    let (second, first): (Vec<&Task>, Vec<&Task>) = todo.iter().partition(|t| t.after.is_some());
    let failed = run_wave(dir, &manifest, &first, jobs, &threads)
        + run_wave(dir, &manifest, &second, jobs, &threads);
    if let Some(sig) = supervise::runner_stopped() {
        eprintln!(
            "[sweep] stopped by {}: running tasks checkpointed (stopped), nothing more started; \
             `trainer sweep run {}` goes on",
            crate::toolbox::stop::signal_name(sig),
            dir.display()
        );
        return Ok(ExitCode::from(128 + sig as u8));
    }
    // Every task's degeneracy warnings, in one block at the end (each task's log has them too,
    // scrolled far above by now).
    let warned: Vec<String> = todo
        .iter()
        .flat_map(|t| {
            run_warnings(&run_dir(dir, t))
                .into_iter()
                .map(move |w| format!("  task {} {}: {w}", t.index, t.name))
        })
        .collect();
    if !warned.is_empty() {
        eprintln!(
            "[sweep] {} warning(s) of the tasks run (also in `trainer sweep status {}`):",
            warned.len(),
            dir.display()
        );
        for w in &warned {
            eprintln!("{w}");
        }
    }
    if failed > 0 {
        eprintln!(
            "[sweep] {failed} task(s) failed: trainer sweep status {}",
            dir.display()
        );
        let no_gpu = todo
            .iter()
            .filter(|t| read_state(dir, &manifest, t).failed_gpu_preflight())
            .count();
        if no_gpu > 0 {
            eprintln!(
                "[sweep] {no_gpu} of them failed the GPU preflight (no usable GPU here); {}",
                state::cpu_fix(dir)
            );
        }
        return Ok(crate::exit::Exit::General.into());
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `todo` `jobs` at a time with `threads` threads each; returns how many failed.
fn run_wave(dir: &Path, manifest: &Manifest, todo: &[&Task], jobs: usize, threads: &str) -> usize {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs.min(todo.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(t) = todo.get(i) else { break };
                    if supervise::runner_stopped().is_some() {
                        break;
                    }
                    // Another `sweep run` (or an array task) holds it: theirs, not a failure.
                    if let Some(pid) = crate::outputs::rundir::held_by(&run_dir(dir, t)) {
                        eprintln!(
                            "[sweep] task {} ({}) is running elsewhere (pid {pid}): skipped",
                            t.index, t.name
                        );
                        continue;
                    }
                    let env = [("RAYON_NUM_THREADS", threads)];
                    let gpus = manifest.resources.gpus() > 0;
                    let ok = task::run_task(dir, manifest, t, &env, gpus).is_ok_and(|c| c == 0);
                    if !ok {
                        failed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                }
            });
        }
    });
    failed.into_inner()
}

/// `trainer sweep status DIR [--json]`.
pub(crate) fn status(dir: &Path, json: bool) -> Result<()> {
    let manifest = Manifest::read(dir)?;
    let rows: Vec<(&Task, TaskState)> = manifest
        .tasks
        .iter()
        .map(|t| (t, read_state(dir, &manifest, t)))
        .collect();
    if json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(t, s)| {
                let mut o = serde_json::to_value(s).unwrap_or_default();
                o["index"] = t.index.into();
                o["name"] = t.name.clone().into();
                o["run_dir"] = run_dir(dir, t).display().to_string().into();
                o["warnings"] = run_warnings(&run_dir(dir, t)).into();
                if s.failed_gpu_preflight() && manifest.resources.gpus() > 0 {
                    o["fix"] = state::cpu_fix(dir).into();
                }
                o
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for (t, s) in &rows {
        println!("{:>4}  {:<9} {}{}", t.index, s.label(), t.name, s.detail());
    }
    let now = state::now();
    println!("{}", Progress::of(rows.iter().map(|(_, s)| s), now).line());
    for (t, _) in &rows {
        for w in run_warnings(&run_dir(dir, t)) {
            println!("warning: task {} {}: {w}", t.index, t.name);
        }
    }
    // Said while the sweep still asks for GPUs (not after a re-plan to `gpus = 0`).
    let no_gpu = rows
        .iter()
        .filter(|(_, s)| s.failed_gpu_preflight())
        .count();
    if no_gpu > 0 && manifest.resources.gpus() > 0 {
        println!(
            "hint: {no_gpu} task(s) failed the GPU preflight; {}",
            state::cpu_fix(dir)
        );
    }
    Ok(())
}

/// The degeneracy warnings a finished run recorded (`finished.json`), none otherwise.
fn run_warnings(run: &Path) -> Vec<String> {
    let file = crate::outputs::RunDir::new(run).finished_json();
    crate::outputs::run_files::read_json::<serde_json::Value>(&file)
        .ok()
        .and_then(|v| v["warnings"].as_array().cloned())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|w| w.as_str().map(str::to_string))
        .collect()
}

/// `trainer sweep status DIR --watch SECS`: one progress line (counts, ETA) every `every`
/// seconds until no task runs or waits to run (failed ones excepted: they wait for a re-plan).
pub(crate) fn watch(dir: &Path, every: f64) -> Result<()> {
    let manifest = Manifest::read(dir)?;
    loop {
        let states: Vec<TaskState> = manifest
            .tasks
            .iter()
            .map(|t| read_state(dir, &manifest, t))
            .collect();
        let p = Progress::of(&states, state::now());
        println!("[{}] {}", utc_clock(state::now()), p.line());
        if p.settled() {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_secs_f64(every.max(0.1)));
    }
}

/// `HH:MM:SS` (UTC) of Unix seconds `t`.
fn utc_clock(t: u64) -> String {
    format!("{:02}:{:02}:{:02}", t / 3600 % 24, t / 60 % 60, t % 60)
}
