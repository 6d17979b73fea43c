//! `plot-sc --new-edges`: how well each run's forecast ranks the edges that appear. The
//! candidates are the upper-triangle edges absent from a test subject's visit 0; the score of
//! one is the forecast's log1p weight there (any model: a model that never adds an edge scores
//! all of them 0, which is chance); it came true when the edge is present at visit 1. Pooled
//! over the test subjects with two scans, drawn as precision–recall curves, and with
//! `--scores` every candidate written as a row (run, subject, i, j, score, appeared).

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::super::super::protocol::saved_run::{Horizon, SavedRun};
use super::super::reopen::Forecast;
use super::PlotScSettings;
use crate::backend;
use crate::files::write_atomic;
use crate::metrics::pr::{PrCurve, pr_curve};
use crate::outputs::heatmap;
use crate::outputs::pr_chart::{PrChart, PrLine};

/// One candidate edge of one subject.
struct Candidate {
    subject: usize,
    i: usize,
    j: usize,
    score: f64,
    appeared: bool,
}

/// The candidates of `run`'s test subjects with two scans, scored by its forecast of visit 1.
fn candidates(run: &SavedRun, s: &PlotScSettings) -> Result<Vec<Candidate>> {
    let cohort = &run.prep.cohort;
    let subjects = run.forecast_test_subjects();
    if subjects.is_empty() {
        bail!("no test subject has two scans: no edge can appear");
    }
    let job = Forecast {
        run,
        subjects: &subjects,
        horizon: Horizon::NextVisit,
    };
    let preds = backend::dispatch_checked(s.device.placement()?, job)?;
    let mut out = Vec::new();
    for (&subject, pred) in subjects.iter().zip(&preds.matrices) {
        let scans = &cohort.subjects[subject].scans;
        let (start, next) = (scans[0].a_raw.dense(), scans[1].a_raw.dense());
        let n = start.nrows();
        for i in 0..n {
            for j in i + 1..n {
                if start[(i, j)] > 0.0 {
                    continue;
                }
                out.push(Candidate {
                    subject,
                    i,
                    j,
                    score: f64::from(pred[(i, j)].max(0.0)).ln_1p(),
                    appeared: next[(i, j)] > 0.0,
                });
            }
        }
    }
    Ok(out)
}

/// `plot-sc RUN… --new-edges --out FIG [--scores FILE.csv]`.
pub(super) fn run(s: &PlotScSettings) -> Result<()> {
    let labels = crate::outputs::run_label::configuration_names(&s.labels, &s.runs)?;
    if s.scores.is_some() {
        for (i, name) in labels.iter().enumerate() {
            if labels[..i].contains(name) {
                bail!(
                    "--scores names each row by its run, and --label {name} is given to several \
                     runs: give each run its own name for --scores (the figure pools a shared \
                     name)"
                );
            }
        }
    }
    let mut curves = Vec::new();
    let mut rows: Vec<(String, SavedRun, Vec<Candidate>)> = Vec::new();
    for (dir, label) in s.runs.iter().zip(labels) {
        let run = SavedRun::open(dir, &s.checkpoint, &s.paths)?;
        let cands = candidates(&run, s).with_context(|| dir.display().to_string())?;
        let pairs: Vec<(f64, bool)> = cands.iter().map(|c| (c.score, c.appeared)).collect();
        let Some(curve) = pr_curve(&pairs) else {
            bail!(
                "{}: none of the {} edges absent at visit 0 appears at visit 1 in the test \
                 subjects (or a score is not finite): there is no precision–recall curve",
                dir.display(),
                pairs.len()
            );
        };
        eprintln!(
            "[plot-sc] {label}: {} of {} absent edges appear (chance {:.4}); average precision \
             {:.4}",
            curve.positives,
            curve.total,
            curve.chance(),
            curve.average_precision
        );
        curves.push((label.clone(), curve));
        if s.scores.is_some() {
            rows.push((label, run, cands));
        }
    }
    if let Some(path) = &s.scores {
        write_scores(path, &rows)?;
        eprintln!("[plot-sc] wrote {}", path.display());
    }
    let chart = PrChart {
        title: s
            .title
            .clone()
            .unwrap_or_else(|| "new edges: precision–recall of the forecast".into()),
        lines: pooled_lines(&curves),
        layout: s.layout(),
    };
    heatmap::render(&chart, &s.out)?;
    eprintln!("[plot-sc] wrote {}", s.out.display());
    Ok(())
}

/// One line per name, in order of first appearance: a run's curve, or the mean of the runs
/// given one `--label` name (a configuration's folds or seeds), said on stderr.
fn pooled_lines(curves: &[(String, PrCurve)]) -> Vec<PrLine> {
    let mut names: Vec<&str> = Vec::new();
    for (name, _) in curves {
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let of: Vec<&PrCurve> = curves
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, c)| c)
                .collect();
            let line = PrLine::pooled(name, &of);
            if of.len() > 1 {
                eprintln!(
                    "[plot-sc] {name}: {} runs pooled, mean average precision {:.4}{}",
                    of.len(),
                    line.ap,
                    line.ap_interval.map_or(String::new(), |(lo, hi)| format!(
                        " [{lo:.4}, {hi:.4}] (95% t-interval over the runs)"
                    ))
                );
            }
            line
        })
        .collect()
}

/// Every candidate as a CSV row (`run,subject,i,j,score,appeared`; `i < j`, 0-based node
/// indices), written atomically.
fn write_scores(path: &Path, runs: &[(String, SavedRun, Vec<Candidate>)]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--scores {}: cannot create its folder", path.display()))?;
    }
    write_atomic(path, |w| {
        let mut csv = csv::Writer::from_writer(w);
        csv.write_record(["run", "subject", "i", "j", "score", "appeared"])?;
        for (label, run, cands) in runs {
            for c in cands {
                let id = &run.prep.cohort.subjects[c.subject].id;
                csv.write_record([
                    label.as_str(),
                    id.as_str(),
                    &c.i.to_string(),
                    &c.j.to_string(),
                    &c.score.to_string(),
                    if c.appeared { "1" } else { "0" },
                ])?;
            }
        }
        csv.flush()?;
        Ok(())
    })
    .with_context(|| format!("--scores {}", path.display()))
}
