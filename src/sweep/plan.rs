//! `trainer sweep plan`: a spec (or what is left of a sweep, `--missing`) becomes a sweep
//! directory, checked before anything can queue: the task count is capped before the spec is
//! expanded (`--max-tasks`), every task's flags go through the command's own parser, the
//! resources through theirs, and the directory appears whole (written under a staging name,
//! then renamed) or not at all.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::spec::{Spec, Task};
use super::state;
use super::{Manifest, scripts, task, task_config};
use crate::cluster::scheduler::SchedulerKind;
use crate::cluster::scheduler::quote::check_path;
use crate::cluster::scheduler::resources::Resources;
use crate::files::write_json;

/// The default of `--max-tasks`: a grid larger than this is a typo more often than a plan.
pub(crate) const MAX_TASKS: usize = 100_000;

/// `sweep plan`'s settings.
#[derive(Debug, Clone)]
pub(crate) struct PlanSettings {
    pub spec: Option<PathBuf>,
    pub out: Option<PathBuf>,
    /// `None`: Slurm for a new sweep, the sweep's own for `--missing`.
    pub scheduler: Option<SchedulerKind>,
    pub throttle: usize,
    pub submit: bool,
    /// Re-plan an existing sweep: an array of its failed and pending tasks only.
    pub missing: Option<PathBuf>,
    /// Resource flags (`--partition q_ai4`, …): key of `[resources]` → value, over the spec's.
    pub resources: Vec<(&'static str, toml::Value)>,
    /// Refuse a spec of more tasks than this.
    pub max_tasks: usize,
    /// `KEY=VALUE` after the spec, over it ([`super::spec::parse_override`]).
    pub overrides: Vec<(String, toml::Value)>,
}

/// What a sweep knows of the training commands' flags (from the command-line layer).
pub(crate) struct CommandFlags<'a> {
    /// Whether `key` (either spelling) is a flag of `command`.
    pub known: &'a dyn Fn(&str, &str) -> bool,
    /// Parses `trainer COMMAND --config FILE` as the command itself would: every value through
    /// its flag's own checks; the error as the command would print it.
    pub check: &'a dyn Fn(&str, &Path) -> Result<()>,
    /// The flags preset `name` of `command` sets (`None`: no such preset; the check above
    /// then refuses the task).
    pub preset: &'a dyn Fn(&str, &str) -> Option<toml::Table>,
}

/// Each value of a task's flags that replaces the value its preset sets (a preset sets
/// defaults: the spec's flags win), one line per distinct (preset, key, value).
fn preset_shadows(command: &str, tasks: &[Task], flags: &CommandFlags) -> Vec<String> {
    let norm = |k: &str| k.replace('-', "_");
    let mut said = std::collections::BTreeSet::new();
    for t in tasks {
        let Some(name) = t.flags.get("preset").and_then(|p| p.as_str()) else {
            continue;
        };
        let Some(preset) = (flags.preset)(command, name) else {
            continue;
        };
        for (k, v) in &t.flags {
            let set = preset.iter().find(|(pk, _)| norm(pk) == norm(k));
            if let Some((_, pv)) = set
                && pv != v
            {
                said.insert(format!(
                    "the spec's {k} = {v} replaces preset {name}'s {k} = {pv} (the spec's flags \
                     win over a preset)"
                ));
            }
        }
    }
    said.into_iter().collect()
}

/// `base` (the `[resources]` of `below`: the spec, or the sweep's manifest on a re-plan) with the
/// plan's resource flags on top, then the plan's checks across keys
/// ([`Resources::check_plan`]). `--gpus 0` drops the GPU type and MIG profile of the layer below
/// and says so; given with it as flags, they are refused. Warns about keys the scheduler has no
/// directive for.
pub(super) fn resolve_resources(
    base: Resources,
    s: &PlanSettings,
    scheduler: SchedulerKind,
    below: &str,
) -> Result<Resources> {
    let mut r = base;
    for (key, value) in &s.resources {
        r.set(key, value)
            .map_err(|e| anyhow::anyhow!("--{}: {e}", key.replace('_', "-")))?;
    }
    let given = |k: &str| s.resources.iter().any(|(g, _)| *g == k);
    if given("gpus") {
        for d in r.drop_gpu_keys(&given) {
            eprintln!(
                "[sweep] --gpus {}: {d} of {below} left out (no GPUs)",
                r.gpus()
            );
        }
    }
    r.check_plan()
        .map_err(|e| anyhow::anyhow!("{below}'s resources with the plan's flags: {e}"))?;
    let ignored = scheduler.ignored(&r);
    if !ignored.is_empty() {
        eprintln!(
            "[sweep] warning: {scheduler:?} has no directive for resources {}: left out",
            ignored.join(", ")
        );
    }
    Ok(r)
}

/// `trainer sweep plan`.
pub(super) fn plan(s: &PlanSettings, flags: &CommandFlags) -> Result<()> {
    let (Some(spec_path), Some(out)) = (&s.spec, &s.out) else {
        bail!("sweep plan needs SPEC.toml and --out DIR (or --missing DIR)");
    };
    let scheduler = s.scheduler.unwrap_or(SchedulerKind::Slurm);
    // The paths the scripts will name, checked before anything is written.
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or(p.to_path_buf());
    check_path("--out", &absolute(out))?;
    crate::outputs::run_files::refuse_run_file("--out", out.as_path())?;
    check_path("the spec", &absolute(spec_path))?;
    let text = std::fs::read_to_string(spec_path)
        .with_context(|| format!("{}: cannot read", spec_path.display()))?;
    let mut spec = Spec::parse(spec_path, &text, flags.known, s.max_tasks, &s.overrides)?;
    for w in &spec.shadowed {
        eprintln!("[sweep] {}: {w}", spec_path.display());
    }
    let below = spec_path.display().to_string();
    let resources = resolve_resources(std::mem::take(&mut spec.resources), s, scheduler, &below)?;
    for t in &mut spec.tasks {
        resolve_config(spec_path, spec.command.name(), t, flags.known)?;
        super::spec::expand_paths_yaml(spec_path, spec.command.name(), t)?;
    }
    for w in preset_shadows(spec.command.name(), &spec.tasks, flags) {
        eprintln!("[sweep] {}: {w}", spec_path.display());
    }
    if state::manifest_path(out).exists() {
        bail!(
            "{}: already a sweep; `sweep plan --missing {}` re-plans what is left",
            out.display(),
            out.display()
        );
    }
    if std::fs::read_dir(out).is_ok_and(|mut d| d.next().is_some()) {
        bail!(
            "{}: exists and is not a sweep (no sweep.json): give a new --out, or remove it",
            out.display()
        );
    }
    let manifest = Manifest {
        command: spec.command.name().to_string(),
        spec: std::path::absolute(spec_path).unwrap_or(spec_path.clone()),
        scheduler,
        throttle: s.throttle,
        resources,
        tasks: spec.tasks,
    };
    task::check_cpu_tasks(&manifest)?;
    // A signal while planning removes the staging directory (checked between tasks) instead of
    // leaving it half-written.
    crate::toolbox::stop::install()?;
    let staging = staging_dir(out)?;
    let written = write_tasks(&staging, out, &manifest, flags)
        .and_then(|()| write_json(&state::manifest_path(&staging), &manifest))
        .and_then(|()| {
            // An empty --out (made by the user) gives way to the whole sweep.
            if out.is_dir() {
                std::fs::remove_dir(out)?;
            }
            std::fs::rename(&staging, out).with_context(|| {
                format!("cannot rename {} to {}", staging.display(), out.display())
            })
        });
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    let all: Vec<usize> = (0..manifest.tasks.len()).collect();
    let submit = scripts::write(out, &manifest, &all, "all")?;
    eprintln!(
        "[sweep] {} tasks of trainer {} in {}",
        manifest.tasks.len(),
        manifest.command,
        out.display()
    );
    submit_or_say(&submit, s)
}

/// `.<name>.planning-<pid>` beside `out`, fresh; staging directories of plans whose process is
/// gone (killed while planning) are removed.
fn staging_dir(out: &Path) -> Result<PathBuf> {
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let name = out
        .file_name()
        .with_context(|| format!("{}: --out needs a directory name", out.display()))?
        .to_string_lossy()
        .into_owned();
    let prefix = format!(".{name}.planning-");
    for entry in std::fs::read_dir(&parent)?.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = file
            .strip_prefix(&prefix)
            .and_then(|p| p.parse::<i32>().ok())
            && unsafe { libc::kill(pid, 0) } != 0
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    let staging = parent.join(format!("{prefix}{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("tasks"))
        .with_context(|| format!("cannot create {}", staging.display()))?;
    Ok(staging)
}

/// Every task's `--config` file into `staging`, each distinct set of flags (folds and seeds
/// aside: the sweep sets those) parsed by the command's own parser; an error names the task
/// (by its final path under `out`) and the flag.
fn write_tasks(staging: &Path, out: &Path, m: &Manifest, flags: &CommandFlags) -> Result<()> {
    let mut checked = std::collections::HashSet::new();
    for t in &m.tasks {
        if let Some(sig) = crate::toolbox::stop::requested() {
            bail!(
                "stopped by {} while planning: nothing of {} was written",
                crate::toolbox::stop::signal_name(sig),
                out.display()
            );
        }
        let text = toml::to_string(&t.flags).context("a task's flags as TOML")?;
        let file = task_config(staging, t.index);
        // A plain write: the staging directory appears under its name whole (one rename) or
        // not at all, so its files need no sync of their own (20,000 tasks: 40,000 fewer syncs).
        std::fs::write(&file, text.as_bytes())
            .with_context(|| format!("cannot write {}", file.display()))?;
        let mut shape = t.flags.clone();
        shape.remove("cv_fold");
        shape.remove("seed");
        if checked.insert(shape.to_string()) {
            (flags.check)(&m.command, &file).map_err(|e| {
                let msg = e
                    .to_string()
                    .replace(&staging.display().to_string(), &out.display().to_string());
                // clap's message up to its first blank line (the usage hint after it).
                let words: Vec<&str> = msg
                    .lines()
                    .take_while(|l| !l.trim().is_empty())
                    .map(str::trim)
                    .collect();
                let said = words.join(" ");
                let said = said.trim_start_matches("error: ");
                anyhow::anyhow!("task {} ({}): {said}", t.index, t.name)
            })?;
        }
    }
    Ok(())
}

fn resolve_config(
    spec_path: &Path,
    command: &str,
    t: &mut Task,
    known: &dyn Fn(&str, &str) -> bool,
) -> Result<()> {
    let Some(value) = t.flags.remove("config") else {
        return Ok(());
    };
    let Some(name) = value.as_str() else {
        bail!("{}: `config` must be a file name", spec_path.display());
    };
    let path = spec_path.parent().unwrap_or(Path::new(".")).join(name);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "{}: config = \"{name}\": cannot read {}",
            spec_path.display(),
            path.display()
        )
    })?;
    let file: toml::Table = text
        .parse()
        .map_err(|e| anyhow::anyhow!("{}: not valid TOML: {e}", path.display()))?;
    let mut flags = toml::Table::new();
    for (k, v) in file {
        let entries = match v {
            toml::Value::Table(section) => section.into_iter().collect(),
            v => vec![(k, v)],
        };
        for (key, v) in entries {
            if key == "config" || !known(command, &key) {
                bail!(
                    "{}: `{key}` is not a flag of trainer {command} (config of {})",
                    path.display(),
                    spec_path.display()
                );
            }
            flags.insert(key, v);
        }
    }
    flags.extend(std::mem::take(&mut t.flags));
    t.flags = flags;
    Ok(())
}

/// Prints the command `submit`, or runs it with `--submit`.
pub(super) fn submit_or_say(submit: &[String], s: &PlanSettings) -> Result<()> {
    if !s.submit {
        println!("{}", submit.join(" "));
        return Ok(());
    }
    let status = std::process::Command::new(&submit[0])
        .args(&submit[1..])
        .status()
        .with_context(|| format!("cannot run {}", submit[0]))?;
    if !status.success() {
        bail!("{} failed ({status})", submit.join(" "));
    }
    Ok(())
}
