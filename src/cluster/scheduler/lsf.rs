//! IBM Spectrum LSF: `LSB_JOBID`, `LSB_JOBINDEX` (0 outside arrays), `LSB_QUEUE`,
//! `LSB_MCPU_HOSTS` (`host1 4 host2 4`) or `LSB_HOSTS` (one name per slot).
//!
//! A `bsub` job script is one process. Ranks started by `jsrun` carry `JSM_NAMESPACE_RANK`,
//! `JSM_NAMESPACE_SIZE`, `JSM_NAMESPACE_LOCAL_RANK` and `JSM_NAMESPACE_LOCAL_SIZE`.
//!
//! A sweep is LSF arrays: `-J "name[1-K]%N"`, element e = task e − 1 + offset, USR2 before the
//! run limit, requeue on exit 75; a phase-2 array waits for the phase-1 array (`-w`).

use super::array::{
    Array, Scripts, Submission, array_job, choose_trainer, lines, ranges, run_task, stem,
    task_line, throttle,
};
use super::common::{JobInfo, Ranks, address_override, build, port_from_job_id, port_override};
use super::quote::{comment, directive, sh_path};
use super::resources::{ResourceKey, Resources};
use super::{AllocationVar, ClusterEnv, Scheduler, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

const NAME: &str = "lsf";

/// IBM Spectrum LSF: its environment, and its arrays (`#BSUB` directives; every `[resources]`
/// key but `qos`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Lsf;

impl Scheduler for Lsf {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Lsf
    }

    fn detect(&self, vars: &Vars) -> bool {
        vars.has("LSB_JOBID")
    }

    fn job_info(&self, vars: &Vars) -> Option<Result<JobInfo, EnvError>> {
        Some(job_info(vars))
    }

    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError> {
        let job = job_info(vars)?;
        let mut notes = Vec::new();
        let hosts = hosts(vars)?;
        let (mode, ranks) = if vars.has("JSM_NAMESPACE_SIZE") || vars.has("JSM_NAMESPACE_RANK") {
            let why = "jsrun sets it for every rank";
            let rank = vars.require_u32("JSM_NAMESPACE_RANK", NAME, why)?;
            let world_size = vars.require_u32("JSM_NAMESPACE_SIZE", NAME, why)?;
            let local_rank = vars.require_u32("JSM_NAMESPACE_LOCAL_RANK", NAME, why)?;
            let local_world_size = match vars.parse_u32("JSM_NAMESPACE_LOCAL_SIZE")? {
                Some(n) => n,
                None => vars.require_u32("JSM_NAMESPACE_LOCAL_SIZE", NAME, why)?,
            };
            let num_nodes = world_size.div_ceil(local_world_size.max(1));
            let ranks = Ranks {
                rank,
                world_size,
                local_rank,
                local_world_size,
                node_rank: rank / local_world_size.max(1),
                num_nodes,
            };
            ranks.check([
                "JSM_NAMESPACE_RANK",
                "JSM_NAMESPACE_SIZE",
                "JSM_NAMESPACE_LOCAL_RANK",
                "JSM_NAMESPACE_LOCAL_SIZE",
                "JSM_NAMESPACE_RANK/JSM_NAMESPACE_LOCAL_SIZE",
                "JSM_NAMESPACE_SIZE/JSM_NAMESPACE_LOCAL_SIZE",
            ])?;
            ("jsrun rank", ranks)
        } else {
            ("bsub job", Ranks::single())
        };
        let first = match hosts.first() {
            Some(h) => h.clone(),
            None if ranks.world_size > 1 => {
                return Err(EnvError::Missing {
                    var: "LSB_MCPU_HOSTS".into(),
                    scheduler: NAME,
                    why: "the first host is the rendezvous address".into(),
                });
            }
            None => "127.0.0.1".into(),
        };
        let main_address = address_override(vars, first, &mut notes);
        let derived = port_from_job_id(job.job_id.as_deref().unwrap_or(""));
        let main_port = port_override(vars, derived, &mut notes)?;
        Ok(build(
            vars,
            SchedulerKind::Lsf,
            mode,
            ranks,
            hosts,
            main_address,
            main_port,
            job,
            notes,
        ))
    }

    fn allocation(&self, vars: &Vars) -> Vec<AllocationVar> {
        AllocationVar::set(vars, &["LSB_GPU_ALLOC_INFO"])
    }

    fn has_directive(&self, key: ResourceKey) -> bool {
        key != ResourceKey::Qos
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

    fn scripts(&self, s: &Submission<'_>) -> Option<Scripts> {
        let (mut files, mut cmds) = (Vec::new(), Vec::new());
        for a in s.arrays {
            let after = a.chained.then_some(s.name);
            let file = s.dir.join(format!("{}.lsf", stem(s.which, a)));
            cmds.push(format!("bsub < {}", sh_path(&file)));
            let text = script(s, a, &array_job(s.name, a), after);
            files.push((file, text));
        }
        Some((files, vec!["bash".into(), "-c".into(), cmds.join(" && ")]))
    }
}

/// Distinct hosts in order, from `LSB_MCPU_HOSTS` (`h1 4 h2 4`) or else `LSB_HOSTS`.
fn hosts(vars: &Vars) -> Result<Vec<String>, EnvError> {
    let mut hosts: Vec<String> = Vec::new();
    if let Some(v) = vars.get("LSB_MCPU_HOSTS") {
        let tokens: Vec<&str> = v.split_whitespace().collect();
        let bad = || EnvError::Invalid {
            var: "LSB_MCPU_HOSTS".into(),
            value: v.to_string(),
            expected: "pairs of host name and slot count, `host1 4 host2 4`",
        };
        if !tokens.len().is_multiple_of(2) {
            return Err(bad());
        }
        for pair in tokens.chunks(2) {
            if let [host, slots] = pair {
                slots.parse::<u32>().map_err(|_| bad())?;
                if !hosts.iter().any(|h| h == host) {
                    hosts.push((*host).to_string());
                }
            }
        }
    } else if let Some(v) = vars.get("LSB_HOSTS") {
        for host in v.split_whitespace() {
            if !hosts.iter().any(|h| h == host) {
                hosts.push(host.to_string());
            }
        }
    }
    Ok(hosts)
}

/// Job id, array index and queue from LSF variables (`LSB_JOBINDEX=0` means no array).
fn job_info(vars: &Vars) -> Result<JobInfo, EnvError> {
    let job_id = vars.get("LSB_JOBID").map(str::to_string);
    let index = vars.parse_u32("LSB_JOBINDEX")?.filter(|&i| i > 0);
    Ok(JobInfo {
        array_job_id: index.and(job_id.clone()),
        array_task_id: index,
        job_id,
        restart_count: None,
        partition: vars.get("LSB_QUEUE").map(str::to_string),
    })
}

/// The LSF array script of `a`, job name `name`; `after`: the phase-1 array it waits for.
pub(super) fn script(s: &Submission<'_>, a: &Array, name: &str, after: Option<&str>) -> String {
    let (dir, r) = (s.dir, s.resources);
    let throttle = throttle(s);
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
        resources = lines(Lsf.directives(r)),
        margin = r.margin_secs().map_or(5, |s| s.div_ceil(60)),
        n = indices.len(),
        command = s.command,
        spec = comment(&s.spec.display().to_string()),
        array = ranges(&one_based),
        offset = a.offset,
        choose = choose_trainer(r),
        task_line = task_line("LSB_JOBINDEX", a.offset as isize - 1),
        run = run_task(dir, "USR2", r),
    )
}
