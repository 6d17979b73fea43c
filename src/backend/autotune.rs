//! The autotune cache the user controls (cargo feature `autotune`; the CubeCL backends `cuda` and
//! `wgpu`).
//!
//! CubeCL times its candidate kernels (matmul, convolution, fused) the first time it meets a
//! shape, keeps the fastest, and appends the choice to a cache on disk, keyed by the shape and
//! the device *index*, not its model. A cold tune compiles every candidate (NVRTC on CUDA):
//! minutes. `--autotune-cache DIR` puts the cache at `DIR/<device model>/`, so one directory on
//! the shared filesystem serves every GPU model of a cluster, and `--autotune-warm` tunes a
//! run's shapes once (one job before an array), so that the array's tasks never tune cold.
//!
//! What can go wrong, each said once on stderr, the run going on:
//! * the directory is missing: it is created (or, if it cannot be, the run tunes in a private
//!   directory whose results are lost);
//! * it is read-only: CubeCL locks each cache file with a `.lock` beside it and so cannot even
//!   read a cache it cannot write; the cache is copied to a private directory and read there,
//!   and this run's new results are lost;
//! * it is torn (a run killed while appending): CubeCL skips the unreadable entries and tunes
//!   those kernels again.
//!
//! After the run, one line says how many kernels were tuned and how many cached choices were
//! there (`autotune.log` in the cache directory, CubeCL's own log, lists what was tuned).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use serde_json::Value;

use super::{BackendKind, Placement};

/// Whether this binary autotunes its CubeCL kernels (cargo feature `autotune`).
pub(crate) const COMPILED: bool = cfg!(feature = "autotune");

/// The autotune flags of the training commands.
#[derive(clap::Args, Debug, Clone, Default)]
#[command(next_help_heading = crate::settings::CLUSTER)]
pub(crate) struct AutotuneArgs {
    /// Directory of the autotune cache of the CubeCL backends (cuda, wgpu; a binary built with
    /// `--features autotune`): the choices are kept in `DIR/<device model>/`, so one directory
    /// on the shared filesystem serves every GPU model. Missing: created; read-only: read from a
    /// private copy; torn: the unreadable entries tuned again (each said once).
    #[arg(long, value_name = "DIR")]
    pub autotune_cache: Option<PathBuf>,
    /// Tune this run's kernels into --autotune-cache and stop, writing no run: the same command
    /// line as the run (or an array's task), once per GPU model, so that runs never tune cold.
    /// train-mnist: two training batches and one test batch; train-gnn: one epoch of fold 0
    /// (terms that switch on later, e.g. the velocity term at epoch 10, are tuned by the first
    /// run that reaches them, and kept).
    #[arg(long)]
    pub autotune_warm: bool,
}

impl AutotuneArgs {
    /// The flags, checked against where the run goes.
    pub(crate) fn resolve(&self, placement: Placement) -> Result<Autotune> {
        let a = Autotune {
            cache: self.autotune_cache.clone(),
            warm: self.autotune_warm,
        };
        a.check(placement)?;
        Ok(a)
    }
}

/// The autotune flags, resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Autotune {
    /// The cache's directory (`--autotune-cache`); CubeCL's default place when `None`.
    pub cache: Option<PathBuf>,
    /// Tune the run's shapes into the cache and stop (`--autotune-warm`).
    pub warm: bool,
}

impl Autotune {
    /// Refuses the flags where they cannot apply: a binary without autotune, a backend that does
    /// not autotune, a warm-up without a cache to keep it in.
    pub(crate) fn check(&self, placement: Placement) -> Result<()> {
        if self.cache.is_none() && !self.warm {
            return Ok(());
        }
        if self.warm && self.cache.is_none() {
            bail!(
                "--autotune-warm needs --autotune-cache DIR: the directory the tuning is kept in"
            );
        }
        if !COMPILED {
            bail!(
                "--autotune-cache: this binary does not autotune (rebuild with `--features \
                 autotune`; its CubeCL kernels are fixed)"
            );
        }
        if !autotunes(placement.backend) {
            bail!(
                "--autotune-cache applies to the CubeCL backends (cuda, wgpu); backend {} does \
                 not autotune",
                placement.backend.name()
            );
        }
        Ok(())
    }
}

/// Whether a backend runs CubeCL's autotuned kernels.
pub(crate) fn autotunes(kind: BackendKind) -> bool {
    kind.is_wgpu() || matches!(kind, BackendKind::Cuda | BackendKind::CudaFusion)
}

/// The device model a cache directory is named after: the GPU's name from the NVIDIA preflight,
/// or the wgpu adapter's, as a file name.
pub(crate) fn model_dir_name(preflight: Option<&Value>) -> String {
    let name = preflight
        .and_then(|p| {
            p["wgpu_adapter"]["name"].as_str().or_else(|| {
                let index = p["visible_gpus"][0]["index"].as_u64();
                let gpus = p["driver"]["gpus"].as_array()?;
                gpus.iter()
                    .find(|g| g["index"].as_u64() == index)
                    .or(gpus.first())?["name"]
                    .as_str()
            })
        })
        .unwrap_or("unknown-device");
    let safe: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
            _ => '_',
        })
        .collect();
    safe.trim_matches('_').chars().take(100).collect()
}

/// The cache as this run uses it, for the report after the run.
#[derive(Debug)]
pub(crate) struct Session {
    /// The directory CubeCL was given (the user's, or the private copy).
    pub dir: PathBuf,
    /// The user's directory, when CubeCL was given a private copy of it.
    pub private_of: Option<PathBuf>,
    /// Cached choices found before the run.
    pub cached: usize,
    /// Kernels tuned before the run, by CubeCL's log.
    tuned_before: usize,
}

/// The log CubeCL appends a line to for each kernel it tunes.
const LOG: &str = "autotune.log";

impl Session {
    /// Kernels tuned since the session began.
    pub(crate) fn tuned(&self) -> usize {
        tuned_in_log(&self.dir.join(LOG)).saturating_sub(self.tuned_before)
    }

    /// One line for the run's log.
    pub(crate) fn summary(&self) -> String {
        let tuned = self.tuned();
        let mut s = format!(
            "autotune: {tuned} kernel(s) tuned this run, {} cached choice(s) found in {}",
            self.cached,
            self.private_of.as_ref().unwrap_or(&self.dir).display()
        );
        if let Some(user) = &self.private_of
            && tuned > 0
        {
            s.push_str(&format!(
                " ({} is not writable: these new choices are not kept)",
                user.display()
            ));
        }
        s
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.private_of.is_some() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Lines of CubeCL's autotune log that record a tuning.
fn tuned_in_log(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .map(|t| t.matches("Fastest result").count())
        .unwrap_or(0)
}

/// The cache files under `dir` (CubeCL's `*.json.log`, one JSON entry per line).
fn cache_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(p),
                Ok(t) if t.is_file() && p.to_string_lossy().ends_with(".json.log") => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Entries that read and entries that do not (a line cut by a killed run, or garbage), per file.
fn scan(dir: &Path) -> (usize, Vec<(PathBuf, usize)>) {
    let (mut good, mut torn) = (0, Vec::new());
    for f in cache_files(dir) {
        let Ok(bytes) = std::fs::read(&f) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.split('\n').collect();
        let mut bad = 0;
        for (i, line) in lines.iter().enumerate() {
            // The last piece has no newline after it: a complete entry never ends there.
            let cut = i + 1 == lines.len();
            match serde_json::from_str::<Value>(line) {
                _ if line.is_empty() => {}
                Ok(_) if !cut => good += 1,
                _ => bad += 1,
            }
        }
        if bad > 0 {
            torn.push((f, bad));
        }
    }
    (good, torn)
}

/// Whether a file can be created in `dir`.
fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".trainer-probe-{}", std::process::id()));
    let ok = std::fs::File::create(&probe).is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// Copies the tree `from` into `to` (files and directories only).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let t = e.file_type()?;
        if t.is_dir() {
            copy_tree(&src, &dst)?;
        } else if t.is_file() && !src.to_string_lossy().ends_with(".lock") {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// Prepares `DIR/<model>` for CubeCL (created, or copied to a private directory when it cannot
/// be written), warns once about what is wrong with it, and returns the directory to give CubeCL.
pub(crate) fn prepare(user_dir: &Path, model: &str, tag: &str) -> Session {
    prepare_with(user_dir, model, tag, writable)
}

/// [`prepare`] with the writability test given (as root every directory is writable: the tests
/// give a read-only one this way).
fn prepare_with(user_dir: &Path, model: &str, tag: &str, writable: fn(&Path) -> bool) -> Session {
    let dir = user_dir.join(model);
    let private =
        std::env::temp_dir().join(format!("trainer-autotune-{}-{model}", std::process::id()));
    let created = std::fs::create_dir_all(&dir);
    let (use_dir, private_of) = match created {
        Ok(()) if writable(&dir) => (dir.clone(), None),
        Ok(()) => {
            eprintln!(
                "{tag} warning: autotune cache {} is not writable: CubeCL cannot lock its files \
                 there, so it is read from a private copy and this run's new choices are not \
                 kept",
                dir.display()
            );
            let _ = std::fs::remove_dir_all(&private);
            if let Err(e) = copy_tree(&dir, &private) {
                eprintln!(
                    "{tag} warning: autotune cache {}: cannot copy it ({e}); kernels are tuned \
                     anew",
                    dir.display()
                );
            }
            (private, Some(dir.clone()))
        }
        Err(e) => {
            eprintln!(
                "{tag} warning: autotune cache {}: cannot create it ({e}); kernels are tuned in \
                 a private directory and not kept",
                dir.display()
            );
            let _ = std::fs::create_dir_all(&private);
            (private, Some(dir.clone()))
        }
    };
    let (cached, torn) = scan(&use_dir);
    for (file, bad) in &torn {
        eprintln!(
            "{tag} warning: autotune cache file {} has {bad} unreadable entr{} (a run killed \
             while writing?): CubeCL skips {} and tunes those kernels again",
            file.display(),
            if *bad == 1 { "y" } else { "ies" },
            if *bad == 1 { "it" } else { "them" },
        );
    }
    let tuned_before = tuned_in_log(&use_dir.join(LOG));
    Session {
        dir: use_dir,
        private_of,
        cached,
        tuned_before,
    }
}

/// Points CubeCL's autotune cache and log at `dir`; false (with a warning) when CubeCL's
/// configuration was already read in this process and can no longer change.
#[cfg(all(feature = "autotune", any(feature = "cuda", feature = "wgpu")))]
pub fn set_cubecl_cache(dir: &Path, tag: &str) -> bool {
    use burn_cubecl::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig, cache::CacheConfig};
    if CubeClRuntimeConfig::storage().lock().is_some() {
        eprintln!(
            "{tag} warning: CubeCL's configuration was already read: the autotune cache stays \
             where it was"
        );
        return false;
    }
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    config.autotune.cache = CacheConfig::File(dir.to_path_buf());
    config.autotune.logger.file = Some(dir.join(LOG));
    config.autotune.logger.append = true;
    CubeClRuntimeConfig::set(config);
    true
}

/// Without CubeCL's autotune nothing is configured ([`Autotune::check`] refuses the flags).
#[cfg(not(all(feature = "autotune", any(feature = "cuda", feature = "wgpu"))))]
pub(crate) fn set_cubecl_cache(_: &Path, _: &str) -> bool {
    false
}

/// The session of a run: the cache prepared and given to CubeCL, or `None` without a cache flag.
pub(crate) fn configure(
    settings: &Autotune,
    placement: Placement,
    preflight: Option<&Value>,
    tag: &str,
) -> Option<Session> {
    let user_dir = settings.cache.as_ref()?;
    if !autotunes(placement.backend) {
        return None;
    }
    let session = prepare(user_dir, &model_dir_name(preflight), tag);
    set_cubecl_cache(&session.dir, tag).then_some(session)
}

#[cfg(test)]
mod tests;
