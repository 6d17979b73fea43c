//! What a sweep asks of a scheduler, one trait ([`SweepScheduler`]) that each scheduler's file
//! implements (`slurm.rs`, `lsf.rs`, `gflow.rs`, `local.rs`): its directives for the spec's
//! `[resources]`, and the scripts of a submission with the command that submits them. The list
//! of schedulers is `scripts.rs` (`of`, one line each); the job's side (detection, ranks, job
//! ids) is `crate::cluster::env`, one file per scheduler there too.

use std::path::{Path, PathBuf};

use super::Manifest;
use super::resources::Resources;
use super::script_parts::Array;

/// A submission to write: the sweep directory (absolute), its manifest, the arrays of the
/// tasks, `all` or `missing`, and the sweep's job name.
pub struct Submission<'a> {
    pub dir: &'a Path,
    pub manifest: &'a Manifest,
    pub arrays: &'a [Array],
    pub which: &'a str,
    pub name: &'a str,
}

/// The scripts of a submission, (file, text) each, and the command that submits them.
pub type Scripts = (Vec<(PathBuf, String)>, Vec<String>);

/// One scheduler a sweep can be written for.
pub trait SweepScheduler {
    /// Whether it has a directive for `[resources]` key `key` (one of
    /// `Resources::optional_keys`).
    fn has_directive(&self, key: &str) -> bool;
    /// The directive lines of `r` (without the warning-signal lines of the script).
    fn directives(&self, r: &Resources) -> Vec<String>;
    /// The scripts of `s` and the command that submits them.
    fn scripts(&self, s: &Submission<'_>) -> Scripts;
}

/// The file stem of array `a` of a submission (`submit`, `submit-phase2`, …).
pub fn stem(which: &str, a: &Array) -> String {
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
pub fn array_job(name: &str, a: &Array) -> String {
    if a.offset == 0 {
        name.to_string()
    } else {
        format!("{name}-phase2")
    }
}
