//! `plot-sc RUN --trajectories [--subject ID,…] [--measure M]…`: subjects' observed scans and
//! the run's forecast from each one's first scan, over age, for summary measures or chosen
//! edges. The forecast is drawn at 12 horizons up to the subject's last scan (the first at a
//! twelfth of the way; the line does not start at the first scan, which a forecast of the
//! expected weight need not pass through), within what the
//! fold's training subjects cover (beyond it the model extrapolates: the line stops, and the
//! log says where).

use anyhow::{Context, Result, bail};
use ndarray::Array2;

use super::super::super::protocol::saved_run::{Horizon, SavedRun};
use super::super::coverage::Coverage;
use super::super::reopen::Forecast;
use super::PlotScSettings;
use crate::backend;
use crate::outputs::heatmap;
use crate::outputs::trajectory::{self, Panel, Track, Trajectories};

/// Forecast points per subject.
const STEPS: usize = 12;
/// Subjects drawn by default (the first test subjects with two scans).
const DEFAULT_SUBJECTS: usize = 4;

/// What a panel shows of a matrix (in log1p weight, upper triangle).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Measure {
    /// The mean over all edges.
    Mean,
    /// The mean over a node's edges.
    Node(usize),
    /// One edge.
    Edge(usize, usize),
}

impl Measure {
    /// `mean`, `node:K` or `edge:I-J` (0-based node indices below `n`).
    fn parse(s: &str, n: usize) -> Result<Self> {
        let index = |t: &str| -> Result<usize> {
            let k: usize = t.trim().parse().with_context(|| {
                format!("--measure {s}: `{t}` is not a node index (0-based, below {n})")
            })?;
            if k >= n {
                bail!("--measure {s}: node {k} is not below the {n} nodes of the matrices");
            }
            Ok(k)
        };
        if s == "mean" {
            return Ok(Self::Mean);
        }
        if let Some(k) = s.strip_prefix("node:") {
            return Ok(Self::Node(index(k)?));
        }
        if let Some((i, j)) = s.strip_prefix("edge:").and_then(|e| e.split_once('-')) {
            let (i, j) = (index(i)?, index(j)?);
            if i == j {
                bail!("--measure {s}: an edge joins two different nodes");
            }
            return Ok(Self::Edge(i.min(j), i.max(j)));
        }
        bail!("--measure {s}: expected `mean`, `node:K` or `edge:I-J`")
    }

    fn label(self) -> String {
        match self {
            Self::Mean => "mean log1p weight (all edges)".into(),
            Self::Node(k) => format!("mean log1p weight of node {k}'s edges"),
            Self::Edge(i, j) => format!("log1p weight of edge {i}–{j}"),
        }
    }

    fn of(self, m: &Array2<f32>) -> f64 {
        let w = |i: usize, j: usize| f64::from(m[(i, j)].max(0.0)).ln_1p();
        let n = m.nrows();
        match self {
            Self::Mean => {
                let (mut sum, mut k) = (0.0, 0usize);
                for i in 0..n {
                    for j in i + 1..n {
                        sum += w(i, j);
                        k += 1;
                    }
                }
                sum / k.max(1) as f64
            }
            Self::Node(k) => {
                (0..n).filter(|&j| j != k).map(|j| w(k, j)).sum::<f64>() / (n - 1).max(1) as f64
            }
            Self::Edge(i, j) => w(i, j),
        }
    }
}

/// `plot-sc RUN --trajectories`.
pub(super) fn run(s: &PlotScSettings) -> Result<()> {
    let [run_dir] = s.runs.as_slice() else {
        bail!("--trajectories draws one run ({} given)", s.runs.len());
    };
    let label = s.label()?;
    let run = SavedRun::open(run_dir, &s.checkpoint, &s.paths)?;
    let kind = run.config.settings.model_kind;
    if !kind.info().time_input {
        bail!("--model {kind}: no time input, it predicts only the next visit: no trajectory");
    }
    let cohort = &run.prep.cohort;
    let subjects: Vec<usize> = if s.subject.is_empty() {
        let mut all = run.forecast_test_subjects();
        all.truncate(DEFAULT_SUBJECTS);
        all
    } else {
        s.subject
            .iter()
            .map(|id| run.subject_index(id))
            .collect::<Result<_>>()?
    };
    if subjects.is_empty() {
        bail!("no test subject has two scans: pass --subject");
    }
    let n = run.data.n_nodes();
    let measures: Vec<Measure> = if s.measure.is_empty() {
        vec![Measure::Mean]
    } else {
        s.measure
            .iter()
            .map(|m| Measure::parse(m, n))
            .collect::<Result<_>>()?
    };
    // The horizons of every subject: STEPS evenly up to its last scan, within the coverage.
    let coverage = Coverage::of(&run);
    let (mut who, mut dts) = (Vec::new(), Vec::new());
    for &sub in &subjects {
        let scans = &cohort.subjects[sub].scans;
        let age0 = scans[0].age;
        let end = scans.last().map_or(0.0, |l| l.age - age0);
        let steps: Vec<f64> = (1..=STEPS).map(|k| end * k as f64 / STEPS as f64).collect();
        let kept: Vec<f64> = steps
            .iter()
            .copied()
            .filter(|&dt| dt > 0.0 && coverage.covers(dt, age0))
            .collect();
        if kept.len() < steps.len() {
            eprintln!(
                "[plot-sc] {}: the forecast stops at Δt {:.2} y of {end:.2}: the fold's training \
                 subjects cover Δt up to {:.2} y, ages {:.2}–{:.2}",
                cohort.subjects[sub].id,
                kept.last().copied().unwrap_or(0.0),
                coverage.dt_max,
                coverage.age_min,
                coverage.age_max
            );
        }
        who.extend(std::iter::repeat_n(sub, kept.len()));
        dts.extend(kept);
    }
    let targets = vec![None; dts.len()];
    let job = Forecast {
        run: &run,
        subjects: &who,
        horizon: Horizon::Years {
            dts: &dts,
            targets: &targets,
        },
    };
    let preds = backend::dispatch_checked(s.device.placement()?, job)?;
    if preds
        .matrices
        .iter()
        .any(|m| m.iter().any(|v| !v.is_finite()))
    {
        bail!("the forecast is not finite at some horizon: nothing drawn");
    }
    let panels: Vec<Panel> = measures
        .iter()
        .map(|&m| Panel {
            measure: m.label(),
            tracks: subjects
                .iter()
                .map(|&sub| {
                    let scans = &cohort.subjects[sub].scans;
                    let age0 = scans[0].age;
                    // From the first horizon on: a forecast is an expectation, which need not
                    // pass through the noisy first scan it starts from.
                    let forecast = who
                        .iter()
                        .zip(&dts)
                        .zip(&preds.matrices)
                        .filter(|((w, _), _)| **w == sub)
                        .map(|((_, dt), p)| (age0 + dt, m.of(p)))
                        .collect();
                    Track {
                        subject: cohort.subjects[sub].id.clone(),
                        observed: scans
                            .iter()
                            .map(|sc| (sc.age, m.of(&sc.a_raw.dense())))
                            .collect(),
                        forecast,
                    }
                })
                .collect(),
        })
        .collect();
    for p in panels.iter().filter(|p| trajectory::flat(p)) {
        eprintln!(
            "[plot-sc] warning: the panel \"{}\" is flat (one value in every scan and forecast \
             shown; an edge these subjects never have?): choose another measure",
            p.measure
        );
    }
    let fig = Trajectories {
        title: s.title.clone().unwrap_or_else(|| {
            let name = label.unwrap_or_else(|| kind.to_string());
            format!("observed scans and the forecast from the first ({name})")
        }),
        panels,
        layout: s.layout(),
    };
    heatmap::render(&fig, &s.out)?;
    eprintln!("[plot-sc] wrote {}", s.out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_parse_check_their_nodes_and_read_the_log1p_upper_triangle() {
        assert_eq!(Measure::parse("mean", 4).unwrap(), Measure::Mean);
        assert_eq!(Measure::parse("node:2", 4).unwrap(), Measure::Node(2));
        assert_eq!(Measure::parse("edge:3-1", 4).unwrap(), Measure::Edge(1, 3));
        for bad in ["edge:1-1", "edge:0-4", "node:x", "density", "edge:2"] {
            let e = Measure::parse(bad, 4).unwrap_err().to_string();
            assert!(e.starts_with(&format!("--measure {bad}:")), "{e}");
        }
        // Weights e − 1 give log1p 1; a negative weight counts as 0.
        let e1 = std::f32::consts::E - 1.0;
        let m = ndarray::arr2(&[
            [0.0, e1, 0.0, -2.0],
            [e1, 0.0, e1, 0.0],
            [0.0, e1, 0.0, e1],
            [-2.0, 0.0, e1, 0.0],
        ]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(close(Measure::Mean.of(&m), 3.0 / 6.0));
        assert!(close(Measure::Node(1).of(&m), 2.0 / 3.0));
        assert!(close(Measure::Node(3).of(&m), 1.0 / 3.0));
        assert!(close(Measure::Edge(0, 1).of(&m), 1.0));
        assert_eq!(Measure::Edge(0, 3).of(&m), 0.0);
    }
}
