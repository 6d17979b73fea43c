//! `sweep plan --missing DIR`: what is left of a sweep (its failed, stopped, pending and missing
//! tasks) planned again in place, for the sweep's own scheduler and resources unless the flags
//! say otherwise. New resources (`--gpus 0`, `--partition`, …) or another `--scheduler` rewrite
//! the manifest (`DIR/sweep.json`, atomically) and the scripts, and each change is said; the
//! finished tasks' run directories, status files and logs are never touched, so a sweep moves
//! between queues (a GPU partition, another partition, this machine's CPU) and back without
//! losing a run.

use std::path::Path;

use anyhow::Result;

use super::plan::{PlanSettings, resolve_resources, submit_or_say};
use super::state::{self, read_state};
use super::{Manifest, scripts, task};
use crate::files::write_json;

/// `sweep plan --missing DIR`: the new manifest (flags over the old one, checked as a plan's),
/// written when it changed, then the scripts of the tasks that want a run (same names and run
/// directories). `--gpus 0` drops the sweep's GPU type and MIG profile, and says so.
pub(super) fn plan_missing(dir: &Path, s: &PlanSettings) -> Result<()> {
    let path = state::manifest_path(dir);
    let mut old = None;
    let manifest = Manifest::read_then(dir, |m| {
        old = Some(m.clone());
        if let Some(scheduler) = s.scheduler {
            m.scheduler = scheduler;
        }
        let below = path.display().to_string();
        m.resources = resolve_resources(std::mem::take(&mut m.resources), s, m.scheduler, &below)?;
        if s.throttle > 0 {
            m.throttle = s.throttle;
        }
        Ok(())
    })?;
    task::check_cpu_tasks(&manifest)?;
    let Some(old) = old else {
        anyhow::bail!("{}: not read", path.display());
    };
    let changes = changes(&old, &manifest);
    if changes.is_empty() {
        eprintln!(
            "[sweep] re-planned: nothing changed (scheduler {}, the same resources)",
            manifest.scheduler
        );
    } else {
        // The manifest first: a script never asks for what the manifest does not say.
        write_json(&path, &manifest)?;
        eprintln!("[sweep] re-planned: {}", changes.join("; "));
    }
    let left: Vec<usize> = manifest
        .tasks
        .iter()
        .filter(|t| read_state(dir, &manifest, t).wants_a_run())
        .map(|t| t.index)
        .collect();
    if left.is_empty() {
        eprintln!("[sweep] nothing missing: every task is done or running");
        return Ok(());
    }
    let submit = scripts::write(dir, &manifest, &left, "missing")?;
    eprintln!(
        "[sweep] {} of {} tasks to run again",
        left.len(),
        manifest.tasks.len()
    );
    submit_or_say(&submit, s)
}

/// What a re-plan changes: `scheduler A -> B`, `throttle N -> M`, `resources.KEY OLD -> NEW`.
fn changes(old: &Manifest, new: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    if old.scheduler != new.scheduler {
        out.push(format!("scheduler {} -> {}", old.scheduler, new.scheduler));
    }
    if old.throttle != new.throttle {
        out.push(format!("throttle {} -> {}", old.throttle, new.throttle));
    }
    out.extend(new.resources.changes_from(&old.resources));
    out
}
