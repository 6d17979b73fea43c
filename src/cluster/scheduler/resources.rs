//! What a sweep's tasks ask of the queue: the `[resources]` table of a spec, overridden by the
//! flags of `sweep plan` (`--partition q_ai4 --gpus 1 --time 12:00:00 …`), kept in the manifest
//! (`plan --missing` asks for the same); each scheduler renders it as its directives
//! (`Scheduler::directives` in `slurm.rs`, `lsf.rs`, `gflow.rs`).
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
//! image = "/ibmgpfs/x/trainer-gpu.sif"   # tasks run `singularity exec --nv IMAGE trainer`
//! binds = ["/ibmgpfs", "/scratch"]   # singularity --bind
//! modules = ["singularity/3.8"]      # `module load` before the task
//! extra = ["--exclusive"]            # more directive lines, as written
//! ```
//!
//! The warning signal's margin before the limit follows `time` ([`Resources::margin_secs`]).
//! With `gpus` the tasks run the GPU preflight first (`sweep task --preflight`).

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::quote::sh;

mod values;
use values::{Kind, checked, count, string, strings};
pub use values::{format_time, parse_mem, parse_time};

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

impl Resources {
    /// Sets `key` from a TOML value (a flag's text arrives as a string): errors name the key and
    /// what was expected.
    pub fn set(&mut self, key: &str, v: &toml::Value) -> Result<()> {
        let w = |v: &toml::Value| checked(key, &string(key, v)?, Kind::Name);
        let each = |kind: Kind| -> Result<Vec<String>> {
            let list = strings(key, v)?;
            if list.len() > 64 {
                bail!("`{key}`: {} entries; expected at most 64", list.len());
            }
            list.iter().map(|x| checked(key, x, kind)).collect()
        };
        match key {
            "partition" => self.partition = Some(w(v)?),
            "gpus" => self.gpus = Some(count(key, v, 64)?),
            "gpu_type" => self.gpu_type = Some(w(v)?),
            "mig" => self.mig = Some(w(v)?),
            "cpus" => self.cpus = Some(count(key, v, 4096)?),
            "mem" => self.mem_mb = Some(parse_mem(&string(key, v)?)?),
            "time" => {
                self.time_secs = Some(match v {
                    // Minutes; 0 would render `--time=00:00:00`, which Slurm reads as no limit.
                    toml::Value::Integer(_) => match count(key, v, 525_600)? {
                        0 => bail!("`time` = 0: expected a limit between one minute and a year"),
                        m => u64::from(m) * 60,
                    },
                    other => parse_time(&string(key, other)?)?,
                })
            }
            "account" => self.account = Some(w(v)?),
            "qos" => self.qos = Some(w(v)?),
            "constraint" => {
                self.constraint = Some(checked(key, &string(key, v)?, Kind::Constraint)?)
            }
            "image" => {
                self.image = Some(checked(key, &string(key, v)?, Kind::Path { comma: true })?)
            }
            "binds" => self.binds = each(Kind::Path { comma: false })?,
            "modules" => self.modules = each(Kind::Module)?,
            "extra" => self.extra = each(Kind::Line)?,
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

    /// Checks values that did not come through [`Resources::set`] (a manifest read back from
    /// disk): each is set again from its rendered form, and must come back the same. The error
    /// names the key.
    pub fn check(&self) -> Result<()> {
        let s = |v: &String| toml::Value::String(v.clone());
        let list = |v: &[String]| toml::Value::Array(v.iter().map(s).collect());
        let mut fields: Vec<(&str, toml::Value)> = Vec::new();
        for (key, v) in [
            ("partition", &self.partition),
            ("gpu_type", &self.gpu_type),
            ("mig", &self.mig),
            ("account", &self.account),
            ("qos", &self.qos),
            ("constraint", &self.constraint),
            ("image", &self.image),
        ] {
            if let Some(v) = v {
                fields.push((key, s(v)));
            }
        }
        if let Some(g) = self.gpus {
            fields.push(("gpus", toml::Value::Integer(g.into())));
        }
        if let Some(c) = self.cpus {
            fields.push(("cpus", toml::Value::Integer(c.into())));
        }
        if let Some(m) = self.mem_mb {
            fields.push(("mem", toml::Value::String(format!("{m}M"))));
        }
        if let Some(t) = self.time_secs {
            fields.push(("time", toml::Value::String(format_time(t))));
        }
        for (key, v) in [
            ("binds", &self.binds),
            ("modules", &self.modules),
            ("extra", &self.extra),
        ] {
            if !v.is_empty() {
                fields.push((key, list(v)));
            }
        }
        let mut again = Resources::default();
        for (key, v) in &fields {
            again.set(key, v)?;
        }
        if again != *self {
            bail!("the resources do not read back as written (a value out of its range)");
        }
        Ok(())
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

    /// The keys a scheduler may have no directive for, each with whether it is set here (the
    /// other keys every scheduler takes, or the task script handles).
    pub fn optional_keys(&self) -> [(&'static str, bool); 7] {
        [
            ("partition", self.partition.is_some()),
            ("gpu_type", self.gpu_type.is_some()),
            ("mig", self.mig.is_some()),
            ("cpus", self.cpus.is_some()),
            ("qos", self.qos.is_some()),
            ("constraint", self.constraint.is_some()),
            ("extra", !self.extra.is_empty()),
        ]
    }

    /// Shell lines before the trainer is chosen: `module load` each module (a failure ends the
    /// task with a message), and the image and binds as defaults of `IMAGE` / `BIND_MOUNTS`.
    pub fn setup_shell(&self) -> String {
        let mut out = String::new();
        for m in &self.modules {
            let m = sh(m);
            out.push_str(&format!(
                "module load {m} || {{ echo \"error: module load failed:\" {m}; exit 1; }}\n"
            ));
        }
        if let Some(i) = &self.image {
            out.push_str(&format!("[[ -n \"${{IMAGE:-}}\" ]] || IMAGE={}\n", sh(i)));
        }
        if !self.binds.is_empty() {
            out.push_str(&format!(
                "[[ -n \"${{BIND_MOUNTS:-}}\" ]] || BIND_MOUNTS={}\n",
                sh(&self.binds.join(","))
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests;
