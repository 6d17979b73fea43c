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
//! With `gpus` the tasks run the GPU preflight first (`sweep task --preflight`); `gpus = 0`,
//! said rather than left out, runs them on the CPU (`--device cpu`). `cpus = 0` is refused, and
//! so, at plan time, is a `gpu_type` or `mig` without GPUs ([`Resources::check_plan`]).
//!
//! The keys are named once, in the table of `resources/key.rs`, which makes the struct
//! [`Resources`], the enum [`ResourceKey`], the reading and showing of each value (through its
//! codec in `resources/codec.rs`, on the checks of `resources/values.rs`) and the `sweep plan`
//! flags ([`ResourceArgs`]): a new key is one entry in that table plus its directive lines.

use anyhow::{Result, bail};

use super::quote::sh;

mod values;
pub use values::{format_time, parse_mem, parse_time};

mod codec;
mod key;
pub use key::{ResourceArgs, ResourceKey, Resources};

/// The keys of `[resources]` (and the `sweep plan` flags of the same names), from
/// [`ResourceKey::ALL`].
pub const KEYS: [&str; ResourceKey::ALL.len()] = {
    let mut keys = [""; ResourceKey::ALL.len()];
    let mut i = 0;
    while i < keys.len() {
        keys[i] = ResourceKey::ALL[i].name();
        i += 1;
    }
    keys
};

impl Resources {
    /// Sets `key` from a TOML value (a flag's text arrives as a string): errors name the key and
    /// what was expected.
    pub fn set(&mut self, key: &str, v: &toml::Value) -> Result<()> {
        match ResourceKey::from_name(key) {
            Some(k) => self.set_key(k, v),
            None => bail!(
                "`{key}` is not a resource; expected one of {}",
                ResourceKey::names()
            ),
        }
    }

    /// The `[resources]` table of a spec.
    pub fn from_table(t: &toml::Table) -> Result<Self> {
        let mut r = Self::default();
        for (k, v) in t {
            r.set(k, v)?;
        }
        Ok(r)
    }

    /// Each key that is set, in [`ResourceKey::ALL`] order, with its [`Resources::value`].
    fn fields(&self) -> Vec<(&'static str, toml::Value)> {
        ResourceKey::ALL
            .into_iter()
            .filter_map(|k| self.value(k).map(|v| (k.name(), v)))
            .collect()
    }

    /// Checks values that did not come through [`Resources::set`] (a manifest read back from
    /// disk): each is set again from its rendered form, and must come back the same. The error
    /// names the key.
    pub fn check(&self) -> Result<()> {
        let mut again = Resources::default();
        for (key, v) in &self.fields() {
            again.set(key, v)?;
        }
        if again != *self {
            bail!("the resources do not read back as written (a value out of its range)");
        }
        Ok(())
    }

    /// The plan's checks across keys, on what a plan is about to write: a GPU type or a MIG
    /// profile without GPUs is refused (every scheduler would drop it silently: Slurm's
    /// `--gres` and LSF's `-gpu` carry them only with a GPU count). Not part of
    /// [`Resources::check`], so that a sweep planned before this rule still reads (and can be
    /// re-planned with `--gpus N` or `--gpus 0`, which drops them: [`Resources::drop_gpu_keys`]).
    pub fn check_plan(&self) -> Result<()> {
        for (key, v) in [
            (ResourceKey::GpuType, &self.gpu_type),
            (ResourceKey::Mig, &self.mig),
        ] {
            if let (Some(v), 0) = (v, self.gpus()) {
                let gpus = self
                    .gpus
                    .map_or("no `gpus`".to_string(), |g| format!("`gpus` = {g}"));
                bail!(
                    "`{key}` = {}: it needs GPUs, and the plan has {gpus}; ask for GPUs (`gpus` \
                     of 1 or more) or leave `{key}` out (`--gpus 0` leaves out the spec's or the \
                     sweep's)",
                    crate::cluster::scheduler::quote::shown(v)
                );
            }
        }
        Ok(())
    }

    /// With no GPUs, the GPU-only keys (`gpu_type`, `mig`) that `given` does not name are
    /// dropped: they come from a layer under the flags that set `gpus = 0` (a spec's
    /// `[resources]` under `sweep plan --gpus 0`, the manifest under `plan --missing DIR --gpus
    /// 0`), and asking for no GPUs drops what only describes GPUs. Returns `key = value` of each
    /// dropped. Those `given` names stay for [`Resources::check_plan`] to refuse (`--gpus 0
    /// --gpu-type a100` says two things that cannot both hold).
    pub fn drop_gpu_keys(&mut self, given: &dyn Fn(&str) -> bool) -> Vec<String> {
        if self.gpus() > 0 {
            return Vec::new();
        }
        let mut dropped = Vec::new();
        for (key, v) in [
            (ResourceKey::GpuType, &mut self.gpu_type),
            (ResourceKey::Mig, &mut self.mig),
        ] {
            if !given(key.name())
                && let Some(old) = v.take()
            {
                dropped.push(format!("{key} = {old}"));
            }
        }
        dropped
    }

    /// What differs from `old` to `self`, one `resources.KEY OLD -> NEW` per key (`(none)` for a
    /// key not set), in [`ResourceKey::ALL`] order; empty when nothing does.
    pub fn changes_from(&self, old: &Resources) -> Vec<String> {
        let shown = |r: &Resources| -> Vec<(&'static str, String)> {
            r.fields()
                .into_iter()
                .map(|(k, v)| {
                    let text = match v {
                        toml::Value::String(s) => s,
                        toml::Value::Array(items) => items
                            .iter()
                            .filter_map(|x| x.as_str())
                            .collect::<Vec<_>>()
                            .join(","),
                        other => other.to_string(),
                    };
                    (k, text)
                })
                .collect()
        };
        let (before, after) = (shown(old), shown(self));
        let get = |list: &[(&str, String)], k: &str| {
            list.iter()
                .find(|(key, _)| *key == k)
                .map_or("(none)".to_string(), |(_, v)| v.clone())
        };
        ResourceKey::ALL
            .into_iter()
            .map(ResourceKey::name)
            .filter_map(|k| {
                let (a, b) = (get(&before, k), get(&after, k));
                (a != b).then(|| format!("resources.{k} {a} -> {b}"))
            })
            .collect()
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

#[cfg(test)]
mod plan_checks;
