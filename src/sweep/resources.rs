//! What a sweep's tasks ask of the queue: the `[resources]` table of a spec, overridden by the
//! flags of `sweep plan` (`--partition q_ai4 --gpus 1 --time 12:00:00 …`), kept in the manifest
//! (`plan --missing` asks for the same), and rendered as each scheduler's directives.
//!
//! ```toml
//! [resources]
//! partition = "q_ai4"        # Slurm partition, LSF queue
//! gpus = 1                   # Slurm --gres=gpu:N, LSF -gpu "num=N", gflow --gpus N
//! gpu_type = "a100"          # Slurm --gres=gpu:TYPE:N, LSF gmodel=TYPE
//! mig = "3g.20gb"            # LSF -gpu "…:mig=…" (a MIG profile)
//! cpus = 8                   # Slurm --cpus-per-task, LSF -n
//! mem = "32G"                # Slurm --mem, LSF rusage[mem=…], gflow --memory (MB without unit)
//! time = "12:00:00"          # MM, HH:MM:SS, D-HH[:MM[:SS]]; minutes as a number
//! account = "lab"            # Slurm --account, LSF -P, gflow --project
//! qos = "normal"             # Slurm --qos
//! constraint = "v100|a100"   # Slurm --constraint, LSF -R "select[…]"
//! image = "/ibmgpfs/x/trainer.sif"   # tasks run `singularity exec --nv IMAGE trainer`
//! binds = ["/ibmgpfs", "/scratch"]   # singularity --bind
//! modules = ["singularity/3.8"]      # `module load` before the task
//! extra = ["--exclusive"]            # more directive lines, as written
//! ```
//!
//! The warning signal's margin before the limit follows `time` ([`Resources::margin_secs`]).
//! With `gpus` the tasks run the GPU preflight first (`sweep task --preflight`).

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::Scheduler;

/// The keys of `[resources]` (and the `sweep plan` flags of the same names).
pub const KEYS: [&str; 14] = [
    "partition",
    "gpus",
    "gpu_type",
    "mig",
    "cpus",
    "mem",
    "time",
    "account",
    "qos",
    "constraint",
    "image",
    "binds",
    "modules",
    "extra",
];

/// A sweep's queue resources, checked and normalised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Resources {
    pub partition: Option<String>,
    pub gpus: Option<u32>,
    pub gpu_type: Option<String>,
    pub mig: Option<String>,
    pub cpus: Option<u32>,
    pub mem_mb: Option<u64>,
    pub time_secs: Option<u64>,
    pub account: Option<String>,
    pub qos: Option<String>,
    pub constraint: Option<String>,
    pub image: Option<String>,
    pub binds: Vec<String>,
    pub modules: Vec<String>,
    pub extra: Vec<String>,
}

/// A word that goes into a script line: not empty, no whitespace, quote or `$`.
fn word(key: &str, v: &str) -> Result<String> {
    if v.is_empty()
        || v.chars()
            .any(|c| c.is_whitespace() || "\"'`$\\;".contains(c))
    {
        bail!("`{key}` = {v:?}: expected one word without spaces, quotes, `$` or `;`");
    }
    Ok(v.to_string())
}

/// A whole directive line (`extra`): one line, no quote characters that end the script's own.
fn line(key: &str, v: &str) -> Result<String> {
    if v.trim().is_empty() || v.contains('\n') || v.contains('\r') {
        bail!("`{key}` = {v:?}: expected one non-empty line");
    }
    Ok(v.trim().to_string())
}

/// Seconds of a Slurm-style time limit: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`,
/// `D-HH:MM:SS`.
pub fn parse_time(v: &str) -> Result<u64> {
    let bad = || {
        anyhow::anyhow!(
            "`time` = {v:?}: expected minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]] (Slurm's forms)"
        )
    };
    let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
    let (days, rest) = match v.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, v),
    };
    let parts: Vec<u64> = rest.split(':').map(num).collect::<Result<_>>()?;
    let secs = match (days, parts.as_slice()) {
        (None, [m]) => m * 60,
        (None, [m, s]) => m * 60 + s,
        (None, [h, m, s]) => h * 3600 + m * 60 + s,
        (Some(d), [h]) => d * 86400 + h * 3600,
        (Some(d), [h, m]) => d * 86400 + h * 3600 + m * 60,
        (Some(d), [h, m, s]) => d * 86400 + h * 3600 + m * 60 + s,
        _ => return Err(bad()),
    };
    if secs == 0 || secs > 365 * 86400 {
        bail!("`time` = {v:?}: expected a limit between one second and a year");
    }
    Ok(secs)
}

/// Megabytes of a memory size: a number (MB) or with a unit K, M, G, T (optionally `B`).
pub fn parse_mem(v: &str) -> Result<u64> {
    let bad = || anyhow::anyhow!("`mem` = {v:?}: expected megabytes or a size like 500M, 32G, 1T");
    let u = v.trim().to_ascii_uppercase();
    let u = u.strip_suffix('B').unwrap_or(&u);
    let (digits, scale) = match u.char_indices().last() {
        Some((i, 'K')) => (&u[..i], 1.0 / 1024.0),
        Some((i, 'M')) => (&u[..i], 1.0),
        Some((i, 'G')) => (&u[..i], 1024.0),
        Some((i, 'T')) => (&u[..i], 1024.0 * 1024.0),
        _ => (u, 1.0),
    };
    let n: f64 = digits.parse().map_err(|_| bad())?;
    let mb = (n * scale).ceil();
    if !(1.0..=1e9).contains(&mb) {
        return Err(bad());
    }
    Ok(mb as u64)
}

/// `D-HH:MM:SS` (days only when there are any).
pub fn format_time(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86400,
        secs % 86400 / 3600,
        secs % 3600 / 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

fn string(key: &str, v: &toml::Value) -> Result<String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        other => bail!("`{key}` = {other}: expected a string"),
    }
}

fn strings(key: &str, v: &toml::Value) -> Result<Vec<String>> {
    match v {
        toml::Value::Array(items) => items.iter().map(|x| string(key, x)).collect(),
        other => Ok(vec![string(key, other)?]),
    }
}

fn count(key: &str, v: &toml::Value, max: u32) -> Result<u32> {
    let n = match v {
        toml::Value::Integer(i) => *i,
        toml::Value::String(s) => s.trim().parse().unwrap_or(-1),
        _ => -1,
    };
    u32::try_from(n)
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| anyhow::anyhow!("`{key}` = {v}: expected a whole number from 0 to {max}"))
}

impl Resources {
    /// Sets `key` from a TOML value (a flag's text arrives as a string): errors name the key and
    /// what was expected.
    pub fn set(&mut self, key: &str, v: &toml::Value) -> Result<()> {
        let w = |v: &toml::Value| word(key, &string(key, v)?);
        match key {
            "partition" => self.partition = Some(w(v)?),
            "gpus" => self.gpus = Some(count(key, v, 64)?),
            "gpu_type" => self.gpu_type = Some(w(v)?),
            "mig" => self.mig = Some(w(v)?),
            "cpus" => self.cpus = Some(count(key, v, 4096)?),
            "mem" => self.mem_mb = Some(parse_mem(&string(key, v)?)?),
            "time" => {
                self.time_secs = Some(match v {
                    toml::Value::Integer(_) => u64::from(count(key, v, 525_600)?) * 60,
                    other => parse_time(&string(key, other)?)?,
                })
            }
            "account" => self.account = Some(w(v)?),
            "qos" => self.qos = Some(w(v)?),
            "constraint" => self.constraint = Some(w(v)?),
            "image" => self.image = Some(w(v)?),
            "binds" => {
                self.binds = strings(key, v)?
                    .iter()
                    .map(|b| word(key, b))
                    .collect::<Result<_>>()?
            }
            "modules" => {
                self.modules = strings(key, v)?
                    .iter()
                    .map(|m| word(key, m))
                    .collect::<Result<_>>()?
            }
            "extra" => {
                self.extra = strings(key, v)?
                    .iter()
                    .map(|l| line(key, l))
                    .collect::<Result<_>>()?
            }
            _ => bail!(
                "`{key}` is not a resource; expected one of {}",
                KEYS.join(", ")
            ),
        }
        Ok(())
    }

    /// The `[resources]` table of a spec.
    pub fn from_table(t: &toml::Table) -> Result<Self> {
        let mut r = Self::default();
        for (k, v) in t {
            r.set(k, v)?;
        }
        Ok(r)
    }

    /// GPUs per task (0 without a request).
    pub fn gpus(&self) -> u32 {
        self.gpus.unwrap_or(0)
    }

    /// Seconds between the warning signal and the time limit: a tenth of the limit, at least a
    /// minute (Slurm checks limits about once a minute) and at most ten (a checkpoint takes
    /// seconds; the rest of the margin is lost work), never more than half the limit. `None`
    /// without a limit (the scheduler's default limit; the scripts keep their fixed margins).
    pub fn margin_secs(&self) -> Option<u64> {
        self.time_secs
            .map(|t| (t / 10).clamp(60, 600).min(t / 2).max(1))
    }

    /// The keys set here that `scheduler` has no directive for (left out, with a warning).
    pub fn ignored_by(&self, scheduler: Scheduler) -> Vec<&'static str> {
        let set = [
            ("partition", self.partition.is_some()),
            ("gpu_type", self.gpu_type.is_some()),
            ("mig", self.mig.is_some()),
            ("cpus", self.cpus.is_some()),
            ("qos", self.qos.is_some()),
            ("constraint", self.constraint.is_some()),
            ("extra", !self.extra.is_empty()),
        ];
        let has = |k: &str| match scheduler {
            Scheduler::Slurm => k != "mig",
            Scheduler::Lsf => k != "qos",
            Scheduler::Gflow => k == "extra",
            Scheduler::Local => false,
        };
        set.iter()
            .filter(|(k, on)| *on && !has(k))
            .map(|(k, _)| *k)
            .collect()
    }

    /// `#SBATCH` lines (without the signal line).
    pub fn slurm_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |s: String| out.push(format!("#SBATCH {s}"));
        if let Some(p) = &self.partition {
            push(format!("--partition={p}"));
        }
        if self.gpus() > 0 {
            match &self.gpu_type {
                Some(t) => push(format!("--gres=gpu:{t}:{}", self.gpus())),
                None => push(format!("--gres=gpu:{}", self.gpus())),
            }
        }
        if let Some(c) = self.cpus {
            push(format!("--cpus-per-task={c}"));
        }
        if let Some(m) = self.mem_mb {
            push(format!("--mem={m}M"));
        }
        if let Some(t) = self.time_secs {
            push(format!("--time={}", format_time(t)));
        }
        for (flag, v) in [
            ("account", &self.account),
            ("qos", &self.qos),
            ("constraint", &self.constraint),
        ] {
            if let Some(v) = v {
                push(format!("--{flag}={v}"));
            }
        }
        for e in &self.extra {
            push(e.clone());
        }
        out
    }

    /// `#BSUB` lines (without the warning lines).
    pub fn lsf_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |s: String| out.push(format!("#BSUB {s}"));
        if let Some(p) = &self.partition {
            push(format!("-q {p}"));
        }
        if self.gpus() > 0 {
            let mut spec = format!("num={}", self.gpus());
            if let Some(t) = &self.gpu_type {
                spec.push_str(&format!(":gmodel={t}"));
            }
            if let Some(m) = &self.mig {
                spec.push_str(&format!(":mig={m}"));
            }
            push(format!("-gpu \"{spec}\""));
        }
        if let Some(c) = self.cpus {
            push(format!("-n {c}"));
        }
        if let Some(m) = self.mem_mb {
            push(format!("-R \"rusage[mem={m}MB]\""));
        }
        if let Some(t) = self.time_secs {
            // LSF's run limit is [hours:]minutes.
            let minutes = t.div_ceil(60);
            push(format!("-W {}:{:02}", minutes / 60, minutes % 60));
        }
        if let Some(a) = &self.account {
            push(format!("-P {a}"));
        }
        if let Some(c) = &self.constraint {
            push(format!("-R \"select[{c}]\""));
        }
        for e in &self.extra {
            push(e.clone());
        }
        out
    }

    /// `# GFLOW` lines (gflow reads them from the task script); one GPU when none is asked for,
    /// as before resources existed (`--gpus 0` on the submit command line wins).
    pub fn gflow_lines(&self) -> Vec<String> {
        let mut out = vec![format!("# GFLOW --gpus {}", self.gpus.unwrap_or(1))];
        if let Some(t) = self.time_secs {
            out.push(format!("# GFLOW --time {}", format_time(t)));
        }
        if let Some(m) = self.mem_mb {
            out.push(format!("# GFLOW --memory {m}M"));
        }
        if let Some(a) = &self.account {
            out.push(format!("# GFLOW --project {a}"));
        }
        for e in &self.extra {
            out.push(format!("# GFLOW {e}"));
        }
        out
    }

    /// Shell lines before the trainer is chosen: `module load` each module (a failure ends the
    /// task with a message), and the image and binds as defaults of `IMAGE` / `BIND_MOUNTS`.
    pub fn setup_shell(&self) -> String {
        let mut out = String::new();
        for m in &self.modules {
            out.push_str(&format!(
                "module load {m} || {{ echo \"error: module load {m} failed\"; exit 1; }}\n"
            ));
        }
        if let Some(i) = &self.image {
            out.push_str(&format!("IMAGE=\"${{IMAGE:-{i}}}\"\n"));
        }
        if !self.binds.is_empty() {
            out.push_str(&format!(
                "BIND_MOUNTS=\"${{BIND_MOUNTS:-{}}}\"\n",
                self.binds.join(",")
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests;
