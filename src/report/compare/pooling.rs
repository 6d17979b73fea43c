//! What `trainer compare` may count together: every run once (a run given twice, under another
//! spelling of its path or through a symbolic link, would count twice), and the runs of one
//! pool (a group of the grouped view, the runs of `--against`) from one cohort unless
//! `--pool-cohorts` says otherwise.
//!
//! A run's cohort is the MD5 of the data it loaded (`cohort_fingerprint` of `args.json`); runs
//! that do not record it (older runs, the reference trainer's) are told apart by the SC
//! directory they read (`sc_dir`, resolved when it exists here). Runs recording neither are
//! never refused.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};

use super::{Run, group_value};

/// Refuses a run that is in `runs` twice (the same directory once its path is resolved, and the
/// same fold of a reference run), naming both spellings.
pub(super) fn check_distinct(runs: &[Run]) -> Result<()> {
    let mut seen: BTreeMap<(PathBuf, Option<i64>), &str> = BTreeMap::new();
    for r in runs {
        let dir = r.dir.path();
        let resolved = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let fold = r.reference.as_ref().and_then(|f| f.fold());
        if let Some(first) = seen.insert((resolved.clone(), fold), &r.name) {
            bail!(
                "the same run is given twice: `{first}` and `{}` are both {}; a run counts once \
                 (its subjects would count as more runs), so give each run once",
                r.name,
                resolved.display()
            );
        }
    }
    Ok(())
}

/// A run's cohort: the MD5 of its loaded data, and the SC directory it read.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Cohort {
    fingerprint: Option<String>,
    sc_dir: Option<String>,
}

impl Cohort {
    pub(super) fn of(run: &Run) -> Self {
        let known = |key: &str| {
            Some(group_value(run, key)).filter(|v| !v.is_empty() && v != "?" && v != "null")
        };
        let sc_dir = known("sc_dir")
            .map(|d| std::fs::canonicalize(&d).map_or(d, |p| p.display().to_string()));
        Self {
            fingerprint: known("cohort_fingerprint"),
            sc_dir,
        }
    }

    /// Whether the two are known to be different cohorts: different fingerprints, else (one
    /// without) different SC directories.
    fn differs(&self, other: &Self) -> bool {
        match (&self.fingerprint, &other.fingerprint) {
            (Some(a), Some(b)) => a != b,
            _ => matches!((&self.sc_dir, &other.sc_dir), (Some(a), Some(b)) if a != b),
        }
    }

    /// The value of the `cohort` key: the fingerprint's first 12 digits, else the SC directory.
    pub(super) fn key(&self) -> String {
        match (&self.fingerprint, &self.sc_dir) {
            (Some(f), _) => f.chars().take(12).collect(),
            (None, Some(d)) => d.clone(),
            (None, None) => "?".into(),
        }
    }

    /// How the cohort is named in a message.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(f) = &self.fingerprint {
            parts.push(format!("cohort_fingerprint {f}"));
        }
        if let Some(d) = &self.sc_dir {
            parts.push(format!("sc_dir {d}"));
        }
        if parts.is_empty() {
            "no cohort recorded".into()
        } else {
            parts.join(", ")
        }
    }
}

/// Refuses a pool (the finished runs of a group, or of `--against`) holding runs of different
/// cohorts, naming two of them and their cohorts; with `allow` (`--pool-cohorts`) it warns.
/// `apart` says how to keep them apart.
pub(super) fn check_cohorts(pools: &[Vec<&Run>], allow: bool, apart: &str) -> Result<()> {
    for pool in pools {
        // The first run of each distinct cohort.
        let mut firsts: BTreeMap<Cohort, &Run> = BTreeMap::new();
        for &r in pool {
            firsts.entry(Cohort::of(r)).or_insert(r);
        }
        let firsts: Vec<(Cohort, &Run)> = firsts.into_iter().collect();
        let differing = firsts.iter().enumerate().find_map(|(i, (a, ra))| {
            let (b, rb) = firsts[i + 1..].iter().find(|(b, _)| a.differs(b))?;
            Some(((a, ra), (b, rb)))
        });
        let Some(((a, ra), (b, rb))) = differing else {
            continue;
        };
        let what = format!(
            "{} and {} are runs of different cohorts ({} vs {})",
            ra.name,
            rb.name,
            a.describe(),
            b.describe()
        );
        if allow {
            eprintln!("[compare] warning: {what}; pooled as --pool-cohorts asks");
        } else {
            bail!(
                "{what}: their statistics would pool two cohorts; {apart}, or give \
                 --pool-cohorts to pool them anyway"
            );
        }
    }
    Ok(())
}
