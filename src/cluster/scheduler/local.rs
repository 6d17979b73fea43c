//! A plain local run: one rank on 127.0.0.1, port `MASTER_PORT` or 29500. A sweep on this
//! machine: `run-local.sh` runs `trainer sweep run DIR --jobs N` (no queue, no directives).

use super::array::{Scripts, Submission};
use super::common::{DEFAULT_PORT, JobInfo, Ranks, build, port_override};
use super::quote::{comment, sh_path};
use super::{ClusterEnv, Scheduler, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

/// No scheduler; a sweep run by `sweep run` on this machine.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Local;

impl Scheduler for Local {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Local
    }

    fn detect(&self, _vars: &Vars) -> bool {
        true
    }

    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError> {
        let mut notes = Vec::new();
        let main_port = port_override(vars, DEFAULT_PORT, &mut notes)?;
        Ok(build(
            vars,
            SchedulerKind::Local,
            "local",
            Ranks::single(),
            vec!["127.0.0.1".into()],
            "127.0.0.1".into(),
            main_port,
            JobInfo::default(),
            notes,
        ))
    }

    fn scripts(&self, s: &Submission<'_>) -> Option<Scripts> {
        let dir = s.dir;
        let path = dir.join("run-local.sh");
        let jobs = if s.throttle > 0 { s.throttle } else { 1 };
        let text = format!(
            "#!/bin/bash\n# trainer sweep: the pending tasks of {} on this machine, {jobs} at \
             a time.\nexec \"${{TRAINER:-trainer}}\" sweep run {} --jobs {jobs}\n",
            comment(&dir.display().to_string()),
            sh_path(dir)
        );
        let submit = vec!["bash".into(), path.display().to_string()];
        Some((vec![(path, text)], submit))
    }
}
