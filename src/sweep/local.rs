//! A sweep on this machine: `run-local.sh` runs `trainer sweep run DIR --jobs N` (no queue, no
//! directives).

use super::quote::{comment, sh_path};
use super::resources::Resources;
use super::scheduler::{Scripts, Submission, SweepScheduler};

/// `sweep run` on this machine.
pub struct Local;

impl SweepScheduler for Local {
    fn has_directive(&self, _key: &str) -> bool {
        false
    }

    fn directives(&self, _r: &Resources) -> Vec<String> {
        Vec::new()
    }

    fn scripts(&self, s: &Submission<'_>) -> Scripts {
        let (dir, m) = (s.dir, s.manifest);
        let path = dir.join("run-local.sh");
        let jobs = if m.throttle > 0 { m.throttle } else { 1 };
        let text = format!(
            "#!/bin/bash\n# trainer sweep: the pending tasks of {} on this machine, {jobs} at \
             a time.\nexec \"${{TRAINER:-trainer}}\" sweep run {} --jobs {jobs}\n",
            comment(&dir.display().to_string()),
            sh_path(dir)
        );
        let submit = vec!["bash".into(), path.display().to_string()];
        (vec![(path, text)], submit)
    }
}
