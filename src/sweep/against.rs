//! `trainer compare … --against MODEL`: every run against one forecaster on the same test
//! subjects, paired by subject (issue 34's statistics: [`crate::metrics::paired`]).
//!
//! The `--against` run is, among the compared runs of ours, the one whose model (`model` of
//! `clg_ode_results.json`, e.g. `eb-drift`) or run directory name is MODEL and which scored the
//! same test subjects (the forecast rows of `per_subject.csv`); a run with no such partner says
//! so. Every run is also compared with the identity forecast of its own subjects. For each
//! metric asked (default `sc_log_mse`): n subjects, the mean paired difference (run − partner;
//! lower is better for errors) with its bootstrap 95% interval, how many subjects went each
//! way, and the Wilcoxon signed-rank p-value.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::metrics::paired::{Paired, paired};
use crate::outputs::RunDir;

/// Seed of the bootstrap (fixed: a table printed twice is the same table).
const SEED: u64 = 0x5eed;

/// One run's per-subject test figures: subject → metric → (model, identity).
struct Subjects {
    model: String,
    values: BTreeMap<String, BTreeMap<String, (f64, f64)>>,
}

/// The forecast rows of a run's `per_subject.csv`.
fn read_subjects(dir: &RunDir) -> Result<Subjects> {
    let path = dir.per_subject_csv();
    let mut reader = csv::Reader::from_path(&path)
        .with_context(|| format!("{}: cannot read", path.display()))?;
    let header: Vec<String> = reader
        .headers()
        .with_context(|| format!("{}: no header", path.display()))?
        .iter()
        .map(str::to_string)
        .collect();
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(subject), Some(forecast)) = (col("subject"), col("forecast")) else {
        bail!("{}: no `subject` and `forecast` columns", path.display());
    };
    let mut values = BTreeMap::new();
    for (line, record) in reader.records().enumerate() {
        let record =
            record.with_context(|| format!("{}: line {}: malformed", path.display(), line + 2))?;
        if record.get(forecast) != Some("1") {
            continue;
        }
        let mut metrics = BTreeMap::new();
        for (i, h) in header.iter().enumerate() {
            let Some(name) = h.strip_prefix("model_") else {
                continue;
            };
            let parse = |i: Option<usize>| {
                i.and_then(|i| record.get(i))
                    .and_then(|v| v.parse::<f64>().ok())
            };
            if let (Some(m), Some(id)) = (parse(Some(i)), parse(col(&format!("identity_{name}")))) {
                metrics.insert(name.to_string(), (m, id));
            }
        }
        values.insert(record.get(subject).unwrap_or_default().to_string(), metrics);
    }
    let results: Option<serde_json::Value> =
        crate::outputs::run_files::read_json(&dir.results_json()).ok();
    let model = results
        .as_ref()
        .and_then(|r| r.get("model"))
        .and_then(|m| m.as_str())
        .unwrap_or("?")
        .to_string();
    Ok(Subjects { model, values })
}

/// One line of the table: a run against its partner and against the identity, per metric.
#[derive(Debug, Serialize)]
pub struct AgainstLine {
    pub run: String,
    pub model: String,
    /// The partner run (`None`: none scored the same subjects, or this is the `--against` run).
    pub against: Option<String>,
    /// This run is the `--against` model's.
    pub is_against: bool,
    pub metric: String,
    pub vs_against: Option<Paired>,
    pub vs_identity: Paired,
}

/// The paired comparison of `runs` (name, directory) against the run of `against`.
pub fn against_lines(
    runs: &[(String, &Path)],
    against: &str,
    metrics: &[String],
) -> Result<Vec<AgainstLine>> {
    let loaded: Vec<(String, Subjects)> = runs
        .iter()
        .map(|(name, dir)| Ok((name.clone(), read_subjects(&RunDir::new(dir))?)))
        .collect::<Result<_>>()?;
    let is_partner = |name: &str, s: &Subjects| {
        s.model == against
            || Path::new(name)
                .file_name()
                .is_some_and(|f| f.to_string_lossy() == against)
    };
    if !loaded.iter().any(|(name, s)| is_partner(name, s)) {
        let models: Vec<&str> = loaded.iter().map(|(_, s)| s.model.as_str()).collect();
        bail!(
            "--against {against}: no compared run is that model or run name (models here: {})",
            models.join(", ")
        );
    }
    let metrics: Vec<String> = if metrics.is_empty() {
        vec!["sc_log_mse".into()]
    } else {
        metrics.to_vec()
    };
    let mut lines = Vec::new();
    for (name, s) in &loaded {
        let partner = loaded
            .iter()
            .find(|(n, p)| n != name && is_partner(n, p) && p.values.keys().eq(s.values.keys()));
        for metric in &metrics {
            let pairs = |other: Option<&Subjects>| -> Result<Vec<f64>> {
                s.values
                    .iter()
                    .map(|(subject, m)| {
                        let (own, identity) = *m.get(metric).with_context(|| {
                            format!("{name}: no per-subject `{metric}` for {subject}")
                        })?;
                        Ok(match other {
                            Some(o) => own - o.values[subject][metric].0,
                            None => own - identity,
                        })
                    })
                    .collect()
            };
            lines.push(AgainstLine {
                run: name.clone(),
                model: s.model.clone(),
                against: partner.map(|(n, _)| n.clone()),
                is_against: is_partner(name, s),
                metric: metric.clone(),
                vs_against: match partner {
                    Some((_, p)) => Some(paired(&pairs(Some(p))?, SEED)),
                    None => None,
                },
                vs_identity: paired(&pairs(None)?, SEED),
            });
        }
    }
    Ok(lines)
}

/// Three significant figures.
fn sig(x: f64) -> String {
    if !x.is_finite() {
        return "N/A".into();
    }
    format!("{x:.2e}")
}

fn cell(p: &Paired) -> String {
    format!(
        "{} [{}, {}] | {}/{} | {}",
        sig(p.mean),
        sig(p.ci_low),
        sig(p.ci_high),
        p.below,
        p.above,
        if p.p_wilcoxon.is_finite() {
            format!("{:.2e}", p.p_wilcoxon)
        } else {
            "N/A".into()
        }
    )
}

/// The Markdown table of `lines`.
pub fn render(lines: &[AgainstLine], against: &str) -> String {
    let mut out = format!(
        "paired over the test subjects (forecasts), run − {against} and run − identity; \
         mean [bootstrap 95% interval], subjects lower/higher, Wilcoxon signed-rank p\n\n\
         | run | model | metric | n | − {against} | lower/higher | p | − identity | \
         lower/higher | p |\n| --- | --- | --- | ---: | --- | --- | ---: | --- | --- | ---: |\n"
    );
    for l in lines {
        let vs = match (&l.vs_against, l.is_against) {
            (Some(p), _) => cell(p),
            (None, true) => "(the --against run) | | ".into(),
            (None, false) => "no run on the same subjects | | ".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {vs} | {} |\n",
            l.run,
            l.model,
            l.metric,
            l.vs_identity.n,
            cell(&l.vs_identity)
        ));
    }
    out
}
