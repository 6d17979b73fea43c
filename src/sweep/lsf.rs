//! A sweep as LSF arrays: `-J "name[1-K]%N"`, element e = task e − 1 + offset, USR2 before the
//! run limit, requeue on exit 75; a phase-2 array waits for the phase-1 array (`-w`).

use std::path::Path;

use super::Manifest;
use super::quote::{comment, directive, sh_path};
use super::resources::Resources;
use super::scheduler::{Scripts, Submission, SweepScheduler, array_job, stem};
use super::script_parts::{Array, choose_trainer, lines, ranges, run_task, task_line, throttle};

/// LSF arrays (`#BSUB` directives; every `[resources]` key but `qos`).
pub struct Lsf;

impl SweepScheduler for Lsf {
    fn has_directive(&self, key: &str) -> bool {
        key != "qos"
    }

    fn directives(&self, r: &Resources) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |s: String| out.push(format!("#BSUB {s}"));
        if let Some(p) = &r.partition {
            push(format!("-q {p}"));
        }
        if r.gpus() > 0 {
            let mut spec = format!("num={}", r.gpus());
            if let Some(t) = &r.gpu_type {
                spec.push_str(&format!(":gmodel={t}"));
            }
            if let Some(m) = &r.mig {
                spec.push_str(&format!(":mig={m}"));
            }
            push(format!("-gpu \"{spec}\""));
        }
        if let Some(c) = r.cpus {
            push(format!("-n {c}"));
        }
        if let Some(m) = r.mem_mb {
            push(format!("-R \"rusage[mem={m}MB]\""));
        }
        if let Some(t) = r.time_secs {
            // LSF's run limit is [hours:]minutes.
            let minutes = t.div_ceil(60);
            push(format!("-W {}:{:02}", minutes / 60, minutes % 60));
        }
        if let Some(a) = &r.account {
            push(format!("-P {a}"));
        }
        if let Some(c) = &r.constraint {
            push(format!("-R \"select[{c}]\""));
        }
        for e in &r.extra {
            push(e.clone());
        }
        out
    }

    fn scripts(&self, s: &Submission<'_>) -> Scripts {
        let (mut files, mut cmds) = (Vec::new(), Vec::new());
        for a in s.arrays {
            let after = a.chained.then_some(s.name);
            let file = s.dir.join(format!("{}.lsf", stem(s.which, a)));
            cmds.push(format!("bsub < {}", sh_path(&file)));
            let text = script(s.dir, s.manifest, a, &array_job(s.name, a), after);
            files.push((file, text));
        }
        (files, vec!["bash".into(), "-c".into(), cmds.join(" && ")])
    }
}

/// The LSF array script of `a`, job name `name`; `after`: the phase-1 array it waits for.
pub fn script(dir: &Path, m: &Manifest, a: &Array, name: &str, after: Option<&str>) -> String {
    let throttle = throttle(m);
    let indices = &a.tasks;
    // LSF array indices start at 1: element e is task e - 1 + offset.
    let one_based: Vec<usize> = indices.iter().map(|i| i - a.offset + 1).collect();
    let wait = after.map_or(String::new(), |first| {
        format!(
            "# Phase 2: starts when the phase-1 array has ended; each element checks that its own\n\
             # phase-1 task is done.\n#BSUB -w \"ended({first})\"\n"
        )
    });
    let logs = directive(&dir.join("logs").join("lsf_%J_%I.out").display().to_string());
    let shown = comment(&dir.display().to_string());
    format!(
        r#"#!/bin/bash
# trainer sweep: {n} task(s) of `trainer {command}` from {spec}, one LSF array element each
# (element e = task e - 1 + {offset}). Submit with `bsub < {shown}/submit.lsf`; the queue resources are
# the spec's [resources] and `sweep plan`'s flags (options on the bsub command line win).
#BSUB -J "{name}[{array}]{throttle}"
{resources}{wait}# SIGUSR2 {margin} min before the run limit: forwarded, the trainer checkpoints and exits 75.
#BSUB -wa USR2
#BSUB -wt {margin}
# Exit 75 = checkpoint written: LSF requeues the element, which resumes its checkpoint.
#BSUB -Q "75"
#BSUB -o {logs}
#BSUB -e {logs}

set -uo pipefail
{choose}{task_line}
echo "=== $(date '+%F %T') task $TASK on $(hostname)"
{run}echo "=== $(date '+%T') task $TASK exit code $rc"
exit "$rc"
"#,
        resources = lines(Lsf.directives(&m.resources)),
        margin = m.resources.margin_secs().map_or(5, |s| s.div_ceil(60)),
        n = indices.len(),
        command = m.command,
        spec = comment(&m.spec.display().to_string()),
        array = ranges(&one_based),
        offset = a.offset,
        choose = choose_trainer(m),
        task_line = task_line("LSB_JOBINDEX", a.offset as isize - 1),
        run = run_task(dir, "USR2", m),
    )
}
