//! What `trainer predict` predicts: the subjects, and one item per subject and horizon, each
//! checked against what the fold's training subjects cover and given a distinct file name.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::PredictSettings;
use crate::train::gnn::protocol::fold_data::delta_t;
use crate::train::gnn::protocol::saved_run::SavedRun;
use crate::train::gnn::saved::coverage::Coverage;

/// One prediction to make.
pub(super) struct Item {
    pub(super) subject: usize,
    pub(super) dt: f64,
    pub(super) target_age: f64,
    /// The visit at that Δt, if the subject has one.
    pub(super) truth: Option<usize>,
    /// The file name under `sc/`.
    pub(super) file: String,
}

/// The cohort's subject indices named by `--subjects` (ids or a file of ids).
pub(super) fn named_subjects(run: &SavedRun, spec: &str) -> Result<Vec<usize>> {
    let looks_like_file = spec.contains('/') || spec.ends_with(".txt") || spec.ends_with(".csv");
    let ids: Vec<String> = if Path::new(spec).is_file() {
        let ids: Vec<String> = std::fs::read_to_string(spec)
            .with_context(|| format!("--subjects {spec}: cannot read"))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        if ids.is_empty() {
            bail!("--subjects {spec}: the file names no subject (one id per line expected)");
        }
        ids
    } else if looks_like_file {
        bail!(
            "--subjects {spec}: no such file (a file of ids, one per line, or ids separated by commas)"
        );
    } else {
        spec.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    let cohort = &run.prep.cohort;
    ids.iter()
        .map(|id| {
            cohort
                .subjects
                .iter()
                .position(|s| &s.id == id)
                .with_context(|| {
                    format!(
                        "--subjects: {id} is not a subject of the cohort ({} subjects with SC and \
                         morphology)",
                        cohort.subjects.len()
                    )
                })
        })
        .collect()
}

/// The visit of `subject` at `dt` years after visit 0, if any.
fn visit_at(run: &SavedRun, subject: usize, dt: f64) -> Option<usize> {
    let scans = run.data.scans(subject);
    (1..scans.len()).find(|&v| (delta_t(scans, 0, v) - dt).abs() < 1e-3)
}

/// `age` as a file-name part: at most three decimals, trailing zeros dropped (`12`, `12.001`).
fn age_label(age: f64) -> String {
    let s = format!("{age:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

pub(super) fn plan(run: &SavedRun, s: &PredictSettings, subjects: &[usize]) -> Result<Vec<Item>> {
    let h = &s.horizon;
    let coverage = Coverage::of(run);
    let mut items = Vec::new();
    let mut files = std::collections::BTreeSet::new();
    for &sub in subjects {
        let subject = &run.prep.cohort.subjects[sub];
        let scans = &subject.scans;
        let age0 = scans[0].age;
        let mut at = |dt: f64, truth: Option<usize>| -> Result<Item> {
            if truth.is_none() {
                coverage.check(dt, age0, s.extrapolate, &subject.id)?;
            }
            let session = match truth {
                Some(v) => scans[v].session.clone(),
                None => format!("ses-age{}", age_label(age0 + dt)),
            };
            let mut file = format!("{}_{session}.csv", subject.id);
            let mut k = 2;
            while !files.insert(file.clone()) {
                file = format!("{}_{session}-{k}.csv", subject.id);
                k += 1;
            }
            Ok(Item {
                subject: sub,
                dt,
                target_age: age0 + dt,
                truth,
                file,
            })
        };
        if h.next_visit {
            if scans.len() >= 2 {
                items.push(at(delta_t(scans, 0, 1), Some(1))?);
            }
        } else if let Some(a) = h.target_age {
            if a < age0 {
                bail!(
                    "--target-age {a}: before the start scan of {} ({}, age {age0})",
                    subject.id,
                    scans[0].scan_id
                );
            }
            items.push(at(a - age0, visit_at(run, sub, a - age0))?);
        } else if let Some(dts) = &h.dt_years {
            for &d in dts {
                items.push(at(d, visit_at(run, sub, d))?);
            }
        } else if let Some(ages) = &h.ages {
            for &a in ages.iter().filter(|&&a| a >= age0) {
                items.push(at(a - age0, visit_at(run, sub, a - age0))?);
            }
        }
    }
    if items.is_empty() {
        bail!("nothing to predict: no subject has a target for this horizon");
    }
    Ok(items)
}
