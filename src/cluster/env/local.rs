//! A plain local run: one rank on 127.0.0.1, port `MASTER_PORT` or 29500.

use super::common::{DEFAULT_PORT, JobInfo, Ranks, build, port_override};
use super::{ClusterEnv, SchedulerEnv, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

/// No scheduler.
#[derive(Debug, Clone, Copy, Default)]
pub struct Local;

impl SchedulerEnv for Local {
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
}
