//! The scheduler's scripts of a sweep, written into its directory: what they share (the arrays
//! a submission is made of, [`arrays`]; the trainer choice; running the task with the
//! scheduler's signal forwarded) is in `super::script_parts`. Each scheduler's text is in its file: a Slurm array
//! with a throttle (`super::slurm`), an LSF array (`super::lsf`), gflow submissions
//! (`super::gflow`); or the local plan (`trainer sweep run DIR --jobs N`). A two-stage sweep
//! is submitted as arrays ([`arrays`]) by a small `submit.sh`: phase 2 of each task waits for
//! its own phase-1 task (Slurm `aftercorr`, a gflow dependency per task; LSF: the whole phase-1
//! array has ended).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::quote::{check_path, comment, sh_path};
use super::script_parts::{Array, arrays, job_name};
use super::{Manifest, Scheduler};
use crate::files::write_atomic;

/// The file stem of array `a` of a submission (`submit`, `submit-phase2`, …).
fn stem(which: &str, a: &Array) -> String {
    let base = if which == "all" {
        "submit".to_string()
    } else {
        format!("submit-{which}")
    };
    match (a.offset, a.chained) {
        (0, _) => base,
        (_, true) => format!("{base}-phase2"),
        (_, false) => format!("{base}-phase2-now"),
    }
}

/// The scheduler's job name of array `a` of the sweep named `name`.
fn array_job(name: &str, a: &Array) -> String {
    if a.offset == 0 {
        name.to_string()
    } else {
        format!("{name}-phase2")
    }
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
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    let submit = match m.scheduler {
        Scheduler::Slurm => {
            for a in &arrays {
                files.push((
                    dir.join(format!("{}.slurm", stem(which, a))),
                    super::slurm::script(dir, m, a, &array_job(&name, a)),
                ));
            }
            if let [(only, _)] = files.as_slice() {
                vec!["sbatch".into(), only.display().to_string()]
            } else {
                let sh = dir.join(format!("{}.sh", stem(which, &arrays[0])));
                files.push((sh.clone(), super::slurm::chain(&arrays, &files)));
                vec!["bash".into(), sh.display().to_string()]
            }
        }
        Scheduler::Lsf => {
            let mut cmds = Vec::new();
            for a in &arrays {
                let after = a.chained.then_some(name.as_str());
                let file = dir.join(format!("{}.lsf", stem(which, a)));
                cmds.push(format!("bsub < {}", sh_path(&file)));
                let text = super::lsf::script(dir, m, a, &array_job(&name, a), after);
                files.push((file, text));
            }
            vec!["bash".into(), "-c".into(), cmds.join(" && ")]
        }
        Scheduler::Gflow => {
            let task = dir.join("task.gflow");
            files.push((task.clone(), super::gflow::task_script(dir, m)));
            let sh = dir.join(format!("{}.gflow.sh", stem(which, &arrays[0])));
            files.push((
                sh.clone(),
                super::gflow::submit_script(dir, m, &arrays, &task),
            ));
            vec!["bash".into(), sh.display().to_string()]
        }
        Scheduler::Local => {
            let path = dir.join("run-local.sh");
            let jobs = if m.throttle > 0 { m.throttle } else { 1 };
            let text = format!(
                "#!/bin/bash\n# trainer sweep: the pending tasks of {} on this machine, {jobs} at \
                 a time.\nexec \"${{TRAINER:-trainer}}\" sweep run {} --jobs {jobs}\n",
                comment(&dir.display().to_string()),
                sh_path(dir)
            );
            let submit = vec!["bash".into(), path.display().to_string()];
            files.push((path, text));
            submit
        }
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
