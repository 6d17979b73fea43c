//! A sweep specification (`SPEC.toml`) and the tasks it expands to.
//!
//! ```toml
//! command = "train-gnn"          # or "train-mnist"
//! folds = [0, 1]                 # optional: --cv-fold of each task
//! seeds = [1, 2]                 # optional: --seed of each task
//! [base]                         # flags of every task (either spelling)
//! max_epochs = 40
//! preset = "residual"
//! [grid]                         # every combination
//! pos_weight = [1.0, 3.0]
//! lambda_density = [0.0, 0.01]
//! [[variant]]                    # and/or named variants
//! name = "fixed"
//! fixed_support = true
//! ```
//!
//! A task is a variant × a grid point × a fold × a seed; its name is built from what varies
//! (`fixed/pw3_ld0.01/fold0`), stable across re-planning.
//!
//! An optional `[then]` table makes a two-stage sweep: every task above (phase 1) gets a
//! phase-2 task with the `[then]` flags on top of its own, resumed (`--resume-from`) from its
//! phase-1 task's best checkpoint, named `<then name>/<phase-1 name>` (`name = "..."` in
//! `[then]`, default `phase2`); `stage` (`phase1` or the then-name) is a varied key for tables.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, bail};

pub use super::expand::Task;
use super::expand::{Space, then_stage};
use crate::cluster::scheduler::resources::Resources;
use crate::training_command::TrainingCommand;

mod file;
mod paths;
mod vary;
use file::SpecFile;
pub(crate) use paths::expand_paths_yaml;
pub(crate) use vary::parse_override;
use vary::{apply_overrides, zip_axis};

/// A parsed specification.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub command: TrainingCommand,
    pub tasks: Vec<Task>,
    /// The `[resources]` table: what each task asks of the queue.
    pub resources: Resources,
    /// Values of the spec another place of it overrides ([`super::expand::Space::shadowed`]).
    pub shadowed: Vec<String>,
}

/// The line of `key` in the spec text (1-based; 0 when not found), for errors.
pub(super) fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
                || l.starts_with(&format!("[{key}]"))
                || l.starts_with(&format!("[[{key}]]"))
        })
        .map_or(0, |i| i + 1)
}

impl Spec {
    /// Parses `text` (from `path`, named in errors); `known(command, key)` says whether `key` is a
    /// flag of the command in either spelling.
    pub(crate) fn parse(
        path: &Path,
        text: &str,
        known: &dyn Fn(&str, &str) -> bool,
        max_tasks: usize,
        overrides: &[(String, toml::Value)],
    ) -> Result<Spec> {
        // `spec.toml:12`, or `spec.toml` (or the override) when the key is not in the file.
        let at = |key: &str| match line_of(text, key) {
            0 => match overrides
                .iter()
                .find(|(k, _)| k == key || k.ends_with(&format!(".{key}")))
            {
                Some((k, _)) => format!("{} (override {k}=…)", path.display()),
                None => path.display().to_string(),
            },
            n => format!("{}:{n}", path.display()),
        };
        // Not TOML at all: the parser's own message, with its excerpt.
        text.parse::<toml::Table>()
            .map_err(|e| anyhow::anyhow!("{}: not valid TOML: {e}", path.display()))?;
        // A key a spec does not have, a value of the wrong shape: the line of its span.
        let mut file: SpecFile =
            toml::from_str(text).map_err(|e| match file::line_of_span(text, &e) {
                Some(n) => anyhow::anyhow!("{}:{n}: {}", path.display(), file::message(&e)),
                None => anyhow::anyhow!("{}: {}", path.display(), file::message(&e)),
            })?;
        let Some(command) = file.command else {
            bail!(
                "{}: no `command = \"{}\"` (or {})",
                path.display(),
                TrainingCommand::TrainGnn,
                TrainingCommand::TrainMnist
            );
        };
        apply_overrides(&mut file, command, overrides, known)?;
        let check_key = |key: &str| -> Result<()> {
            let per_task = ["cv_fold", "cv-fold", "seed", "random_state", "random-state"];
            if per_task.contains(&key) {
                bail!(
                    "{}: `{key}` is set per task: use `folds = [...]` / `seeds = [...]`",
                    at(key)
                );
            }
            if [
                "out",
                "run_name",
                "run-name",
                "resume",
                "results_dir",
                "results-dir",
            ]
            .contains(&key)
            {
                bail!(
                    "{}: `{key}` is the sweep's to set (each task has its run directory)",
                    at(key)
                );
            }
            if !known(command.name(), key) {
                bail!("{}: `{key}` is not a flag of trainer {command}", at(key));
            }
            Ok(())
        };
        let resources = Resources::from_table(&file.resources)
            .map_err(|e| anyhow::anyhow!("{}: [resources]: {e}", at("resources")))?;
        let base = file.base;
        for k in base.keys() {
            check_key(k)?;
        }
        let grid = file.grid;
        let mut axes: Vec<(String, Vec<toml::Value>)> = Vec::new();
        for (k, v) in &grid {
            check_key(k)?;
            match v {
                toml::Value::Array(a) if !a.is_empty() => axes.push((k.clone(), a.clone())),
                toml::Value::Array(_) => bail!("{}: the grid of `{k}` is empty", at(k)),
                _ => bail!("{}: the grid of `{k}` must be a list", at(k)),
            }
        }
        let mut variants: Vec<(Option<String>, toml::Table)> = Vec::new();
        match file.variant {
            None => variants.push((None, toml::Table::new())),
            Some(list) => {
                for mut flags in list {
                    // A string: `SpecFile` refuses a variant without one.
                    let name = match flags.remove("name") {
                        Some(toml::Value::String(name)) => name,
                        _ => bail!("{}: a [[variant]] needs `name = \"...\"`", at("variant")),
                    };
                    for k in flags.keys() {
                        check_key(k)?;
                    }
                    variants.push((Some(name), flags));
                }
            }
        }
        let (folds, seeds) = (file.folds, file.seeds);
        if folds.is_some() && !command.is_gnn() {
            bail!(
                "{}: folds are {}'s (--cv-fold)",
                at("folds"),
                TrainingCommand::TrainGnn
            );
        }
        let zips = file
            .zip
            .iter()
            .enumerate()
            .map(|(n, z)| {
                zip_axis(n, z, &grid, &check_key).map_err(|e| anyhow::anyhow!("{}: {e}", at("zip")))
            })
            .collect::<Result<Vec<_>>>()?;
        let space = Space {
            base,
            zips,
            axes,
            variants,
            folds: folds.clone(),
            seeds,
        };
        // Counted before anything is expanded: a 10^12-point grid is refused at once.
        let stages = if file.then.is_some() { 2 } else { 1 };
        let count = space.count().saturating_mul(stages);
        if count > max_tasks as u128 {
            bail!(
                "{}: the spec expands to {count} tasks ({}), more than --max-tasks {max_tasks}: \
                 shrink the grid, or raise --max-tasks if you mean it",
                path.display(),
                space.shape(stages)
            );
        }
        let shadowed = space.shadowed();
        let mut tasks = space.tasks();
        if let Some(then) = file.then {
            if folds.is_none() || !known(command.name(), "resume_from") {
                bail!(
                    "{}: a two-stage sweep needs train-gnn and `folds = [...]` (phase 2 resumes \
                     one fold's best checkpoint)",
                    at("then")
                );
            }
            let stage = match then.get("name") {
                None => "phase2".to_string(),
                Some(toml::Value::String(n)) if !n.is_empty() && !n.contains('/') => n.clone(),
                Some(_) => bail!("{}: `name` of [then] must be a word", at("then")),
            };
            let mut flags = then.clone();
            flags.remove("name");
            for k in flags.keys() {
                if ["resume_from", "resume-from"].contains(&k.as_str()) {
                    bail!(
                        "{}: phase 2 resumes from phase 1's best checkpoint: no `{k}` in [then]",
                        at(k)
                    );
                }
                check_key(k)?;
            }
            tasks = then_stage(tasks, &stage, &flags);
        }
        let mut seen = BTreeMap::new();
        for t in &tasks {
            crate::cluster::scheduler::quote::check_task_name(&t.name)
                .map_err(|e| anyhow::anyhow!("{}: task {}: {e}", path.display(), t.index))?;
            if let Some(first) = seen.insert(t.name.clone(), t.index) {
                bail!(
                    "{}: tasks {first} and {} are both named `{}` (two variants or grid values \
                     that print alike)",
                    path.display(),
                    t.index,
                    t.name
                );
            }
        }
        // A name that is a folder of another (`a` and `a/b`): one run directory would hold the
        // other's, and moving a torn run aside would take the other with it.
        for (name, &index) in &seen {
            let mut prefix = name.as_str();
            while let Some((parent, _)) = prefix.rsplit_once('/') {
                if let Some(&outer) = seen.get(parent) {
                    bail!(
                        "{}: task {outer} is named `{parent}` and task {index} `{name}`: the \
                         run directory of the first would hold the second's; rename a variant \
                         (names are folders)",
                        path.display()
                    );
                }
                prefix = parent;
            }
        }
        // A fold the command would refuse only when the task starts: refused here.
        for t in &tasks {
            let int = |k: &str| {
                t.flags
                    .get(k)
                    .or_else(|| t.flags.get(&k.replace('_', "-")))
                    .and_then(toml::Value::as_integer)
            };
            let folds = int("cv_folds").unwrap_or(5);
            if let Some(fold) = int("cv_fold")
                && fold >= folds
            {
                bail!(
                    "{}: task {} (`{}`) trains fold {fold}, and cv_folds is {folds}: folds \
                     are 0..{}",
                    path.display(),
                    t.index,
                    t.name,
                    folds - 1
                );
            }
        }
        Ok(Spec {
            command,
            tasks,
            resources,
            shadowed,
        })
    }
}

#[cfg(test)]
mod tests;
