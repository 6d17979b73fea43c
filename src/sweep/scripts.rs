//! The scheduler's scripts of a sweep, written into its directory. The sweep hands its arrays
//! of tasks to the scheduler of its manifest through the one trait
//! [`crate::cluster::scheduler::Scheduler`] (`Scheduler::scripts`: a Slurm array with a
//! throttle, an LSF array, gflow submissions, the local plan `trainer sweep run DIR --jobs N`;
//! one file per scheduler in `cluster/scheduler/`). A two-stage sweep is submitted as arrays by a
//! small `submit.sh`: phase 2 of each task waits for its own phase-1 task (Slurm `aftercorr`, a
//! gflow dependency per task; LSF: the whole phase-1 array has ended).

use std::path::Path;

use anyhow::{Context, Result};

use super::Manifest;
use crate::cluster::scheduler::array::{Array, Submission, job_name};
use crate::cluster::scheduler::quote::check_path;
use crate::files::write_atomic;

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
    let submission = Submission {
        dir,
        command: &m.command,
        spec: &m.spec,
        throttle: m.throttle,
        resources: &m.resources,
        arrays: &arrays,
        which,
        name: &name,
    };
    let Some((files, submit)) = m.scheduler.get().scripts(&submission) else {
        anyhow::bail!(
            "{}: no sweep is written for a {} launch",
            dir.display(),
            m.scheduler
        );
    };
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

/// The arrays that run `indices`: phase 1 first; then phase-2 tasks whose phase-1 task is in
/// it (chained), and phase-2 tasks whose phase 1 is already done (not chained).
pub(crate) fn arrays(m: &Manifest, indices: &[usize]) -> Vec<Array> {
    let phase_one = m.tasks.iter().filter(|t| t.after.is_none()).count();
    let first: Vec<usize> = indices
        .iter()
        .copied()
        .filter(|&i| m.tasks[i].after.is_none())
        .collect();
    let (chained, free): (Vec<usize>, Vec<usize>) = indices
        .iter()
        .copied()
        .filter(|&i| m.tasks[i].after.is_some())
        .partition(|&i| m.tasks[i].after.is_some_and(|p| first.contains(&p)));
    let mut out = Vec::new();
    if !first.is_empty() {
        out.push(Array {
            tasks: first,
            offset: 0,
            chained: false,
        });
    }
    for (tasks, chained) in [(chained, true), (free, false)] {
        if !tasks.is_empty() {
            out.push(Array {
                tasks,
                offset: phase_one,
                chained,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::scheduler::SchedulerKind;
    use crate::cluster::scheduler::array::ranges;
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
            scheduler: SchedulerKind::Slurm,
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
        let sub = Submission {
            dir: Path::new("/s"),
            command: &m.command,
            spec: &m.spec,
            throttle: m.throttle,
            resources: &m.resources,
            arrays: &missing,
            which: "missing",
            name: "s",
        };
        let (files, _) = SchedulerKind::Slurm.get().scripts(&sub).unwrap();
        let text = &files[1].1;
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
