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

use crate::metrics::paired::{Paired, SEED, paired};
use crate::outputs::RunDir;
use crate::outputs::group_table::Stats;

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
    /// What the run is apart from its fold and seed (`model=clg-ode preset=residual …`).
    pub configuration: String,
    pub model: String,
    /// The partner run (`None`: none scored the same subjects, or this is the `--against` run).
    pub against: Option<String>,
    /// This run is the `--against` model's.
    pub is_against: bool,
    pub metric: String,
    pub vs_against: Option<Paired>,
    pub vs_identity: Paired,
}

/// A run to compare: its name, directory and configuration (what it is apart from its fold and
/// seed).
pub struct Compared<'a> {
    pub name: String,
    pub dir: &'a Path,
    pub configuration: String,
}

/// The paired comparison of `runs` against the run of `against`.
pub fn against_lines(
    runs: &[Compared],
    against: &str,
    metrics: &[String],
) -> Result<Vec<AgainstLine>> {
    let loaded: Vec<(String, Subjects)> = runs
        .iter()
        .map(|r| Ok((r.name.clone(), read_subjects(&RunDir::new(r.dir))?)))
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
    for ((name, s), run) in loaded.iter().zip(runs) {
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
                configuration: run.configuration.clone(),
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
         | run | model | metric | n subjects | − {against} | lower/higher | p | − identity | \
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
    let spread = fold_spread(lines);
    if spread.iter().any(|f| f.n_folds > 1) {
        out.push_str(&format!(
            "\nfold spread: each fold's mean paired difference, over the folds of a \
             configuration (mean ± sd: training reruns on the same subjects, not evidence \
             about subjects)\n\n| configuration | metric | n folds | n subjects | − {against} \
             over folds | − identity over folds |\n| --- | --- | ---: | ---: | --- | --- |\n"
        ));
        for f in spread.iter().filter(|f| f.n_folds > 1) {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                f.configuration,
                f.metric,
                f.n_folds,
                f.n_subjects,
                f.vs_against.as_ref().map_or("N/A".into(), spread_cell),
                spread_cell(&f.vs_identity)
            ));
        }
    }
    out
}

/// "mean ± sd" of per-fold mean differences (the mean alone for one fold).
fn spread_cell(s: &Stats) -> String {
    match s.sd {
        Some(sd) => format!("{} ± {}", sig(s.mean), sig(sd)),
        None => sig(s.mean),
    }
}

/// The fold spread of one configuration and metric.
#[derive(Debug, Serialize)]
pub struct FoldSpread {
    pub configuration: String,
    pub metric: String,
    pub n_folds: usize,
    /// Subjects per fold (the smallest, when folds differ).
    pub n_subjects: usize,
    /// Each fold's mean difference, over the folds (mean, sd, min, max, n folds).
    pub vs_against: Option<Stats>,
    pub vs_identity: Stats,
}

/// The lines of each (configuration, metric), in order of appearance, summarised over folds.
pub fn fold_spread(lines: &[AgainstLine]) -> Vec<FoldSpread> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for l in lines {
        let k = (l.configuration.as_str(), l.metric.as_str());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .filter_map(|(configuration, metric)| {
            let of: Vec<&AgainstLine> = lines
                .iter()
                .filter(|l| l.configuration == configuration && l.metric == metric)
                .collect();
            let vs_against: Vec<f64> = of
                .iter()
                .filter_map(|l| Some(l.vs_against.as_ref()?.mean))
                .collect();
            Some(FoldSpread {
                configuration: configuration.to_string(),
                metric: metric.to_string(),
                n_folds: of.len(),
                n_subjects: of.iter().map(|l| l.vs_identity.n).min().unwrap_or(0),
                vs_against: (vs_against.len() == of.len())
                    .then(|| Stats::of(&vs_against))
                    .flatten(),
                vs_identity: Stats::of(&of.iter().map(|l| l.vs_identity.mean).collect::<Vec<_>>())?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(configuration: &str, against: Option<f64>, identity: f64) -> AgainstLine {
        let p = |mean: f64| Paired {
            n: 5,
            mean,
            ci_low: mean - 1.0,
            ci_high: mean + 1.0,
            below: 0,
            above: 5,
            p_wilcoxon: 0.0625,
        };
        AgainstLine {
            run: format!("{configuration}/fold"),
            configuration: configuration.into(),
            model: "clg-ode".into(),
            against: against.map(|_| "lin".into()),
            is_against: false,
            metric: "sc_log_mse".into(),
            vs_against: against.map(p),
            vs_identity: p(identity),
        }
    }

    #[test]
    fn the_fold_spread_is_over_folds_of_one_configuration() {
        let lines = [
            line("a", Some(1.0), -2.0),
            line("b", None, 0.5),
            line("a", Some(3.0), -4.0),
        ];
        let spread = fold_spread(&lines);
        assert_eq!(spread.len(), 2);
        let a = &spread[0];
        assert_eq!((a.n_folds, a.n_subjects), (2, 5));
        let vs = a.vs_against.as_ref().unwrap();
        assert_eq!(
            (vs.mean, vs.sd, vs.min, vs.max),
            (2.0, Some(2f64.sqrt()), 1.0, 3.0)
        );
        assert_eq!(a.vs_identity.mean, -3.0);
        assert!(spread[1].vs_against.is_none() && spread[1].vs_identity.sd.is_none());
        let table = render(&lines, "lin");
        assert!(table.contains("| n subjects |"), "{table}");
        assert!(
            table.contains("| a | sc_log_mse | 2 | 5 | 2.00e0 ± 1.41e0 |"),
            "{table}"
        );
        assert!(
            !table.contains("| b | sc_log_mse | 1 |"),
            "one fold: no spread row"
        );
    }
}
