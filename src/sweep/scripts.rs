//! The scheduler's scripts of a sweep, written into its directory. Each scheduler is a type
//! implementing [`SweepScheduler`] in its own file (a Slurm array with a throttle, `slurm.rs`; an
//! LSF array, `lsf.rs`; gflow submissions, `gflow.rs`; the local plan, `trainer sweep run DIR
//! --jobs N`, `local.rs`), listed here once ([`of`]); what their scripts share (the arrays a
//! submission is made of, the trainer choice, running the task with the scheduler's signal
//! forwarded) is `script_parts.rs`. A two-stage sweep is submitted as arrays by a small
//! `submit.sh`: phase 2 of each task waits for its own phase-1 task (Slurm `aftercorr`, a gflow
//! dependency per task; LSF: the whole phase-1 array has ended).

use std::path::Path;

use anyhow::{Context, Result};

use super::quote::check_path;
use super::resources::Resources;
use super::scheduler::{Submission, SweepScheduler};
use super::script_parts::{arrays, job_name};
use super::{Manifest, Scheduler};
use crate::files::write_atomic;

/// The scheduler of `s`: one line each (a new scheduler: its file implementing
/// [`SweepScheduler`], its variant of [`Scheduler`], its line here).
pub fn of(s: Scheduler) -> &'static dyn SweepScheduler {
    match s {
        Scheduler::Slurm => &super::slurm::Slurm,
        Scheduler::Lsf => &super::lsf::Lsf,
        Scheduler::Gflow => &super::gflow::Gflow,
        Scheduler::Local => &super::local::Local,
    }
}

/// The keys set in `r` that `s` has no directive for (left out, with a warning).
pub fn ignored(r: &Resources, s: Scheduler) -> Vec<&'static str> {
    r.optional_keys()
        .into_iter()
        .filter(|(k, set)| *set && !of(s).has_directive(k))
        .map(|(k, _)| k)
        .collect()
}

/// Writes the scripts of `indices` (`which`: `all` or `missing`) into the sweep directory and
/// returns the command that submits them.
pub fn write(dir: &Path, m: &Manifest, indices: &[usize], which: &str) -> Result<Vec<String>> {
    // Absolute paths: the script runs from wherever it is submitted; Slurm does not create the
    // log directory.
    let dir = &std::path::absolute(dir).unwrap_or(dir.to_path_buf());
    check_path("the sweep directory", dir)?;
    check_path("the spec", &m.spec)?;
    let logs = super::state::logs_dir(dir);
    std::fs::create_dir_all(&logs).with_context(|| format!("cannot create {}", logs.display()))?;
    let arrays = arrays(m, indices);
    let name = job_name(dir);
    let (files, submit) = of(m.scheduler).scripts(&Submission {
        dir,
        manifest: m,
        arrays: &arrays,
        which,
        name: &name,
    });
    for (file, text) in &files {
        write_atomic(file, |w| Ok(w.write_all(text.as_bytes())?))?;
        // Executable: gflow runs a script by its path.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o755))
            .with_context(|| format!("cannot make {} executable", file.display()))?;
    }
    Ok(submit)
}

use std::io::Write as _;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sweep::script_parts::ranges;
    use crate::sweep::spec::Task;

    fn manifest(afters: &[Option<usize>]) -> Manifest {
        let tasks = afters
            .iter()
            .enumerate()
            .map(|(index, &after)| Task {
                index,
                name: format!("t{index}"),
                varied: Default::default(),
                flags: Default::default(),
                after,
            })
            .collect();
        Manifest {
            command: "train-gnn".into(),
            spec: "s.toml".into(),
            scheduler: Scheduler::Slurm,
            throttle: 2,
            resources: Default::default(),
            tasks,
        }
    }

    #[test]
    fn two_stage_tasks_split_into_chained_and_free_arrays() {
        let m = manifest(&[None, None, None, Some(0), Some(1), Some(2)]);
        let all = arrays(&m, &[0, 1, 2, 3, 4, 5]);
        assert_eq!(all.len(), 2);
        assert_eq!((all[1].offset, all[1].chained), (3, true));
        // Phase 1 of task 1 failed, task 0's phase 2 failed after a done phase 1.
        let missing = arrays(&m, &[1, 3, 4]);
        assert_eq!(missing[0].tasks, vec![1]);
        assert_eq!(
            (missing[1].tasks.clone(), missing[1].chained),
            (vec![4], true)
        );
        assert_eq!(
            (missing[2].tasks.clone(), missing[2].chained),
            (vec![3], false)
        );
        let text = crate::sweep::slurm::script(Path::new("/s"), &m, &missing[1], "s-phase2");
        assert!(text.contains("#SBATCH --array=1%2"), "{text}");
        assert!(text.contains("TASK=$(( ${SLURM_ARRAY_TASK_ID:?an array task} + 3 ))"));
    }

    #[test]
    fn index_lists_become_slurm_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3]), "0-3");
        assert_eq!(ranges(&[1, 3, 4, 5, 9]), "1,3-5,9");
        assert_eq!(ranges(&[7]), "7");
    }
}
