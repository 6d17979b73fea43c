//! `trainer compare … --against MODEL`: every run against one forecaster on the same test
//! subjects, paired by subject (issue 34's statistics: [`crate::metrics::paired`]).
//!
//! A run's partner is, among the compared runs of ours, the one whose model (`model` of
//! `clg_ode_results.json`, e.g. `eb-drift`) or run directory name is MODEL and which has the
//! same fold (`cv_fold` of the results) and the same seed (`seed` of `args.json`): every row
//! names it. A run without such a partner is shown *unpaired*, saying why (its identity
//! comparison still stands); two candidates for one run are an error naming both. A MODEL that
//! is no run's model names one run (its directory's name, its name or its path): a name
//! matching several runs, or runs beside the model's, is an error naming them all. Every run is
//! also compared with the identity forecast of its own subjects; `--against identity` makes that
//! forecast the reference: every run is paired with its own identity (the `identity_<metric>`
//! columns of its `per_subject.csv`), and no run of another model is needed.
//!
//! A comparison pairs only the subjects that both sides have a finite value for (a forecast row
//! of `per_subject.csv` each, a non-empty, finite cell): the others are counted as *dropped*,
//! never read as a value. For each metric asked (default `sc_log_mse`): n subjects, the mean
//! paired difference (run − partner; lower is better for errors) with its bootstrap 95%
//! interval, how many subjects went each way, the Wilcoxon signed-rank p-value and that p-value
//! adjusted by Holm's method over the table (each column of comparisons, against MODEL and
//! against the identity, one family: every run and metric of the table); what cannot be
//! computed (no subject left) is shown as such, never as a number.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Serialize;

use crate::metrics::paired::{Paired, SEED, holm, paired_values};
use crate::outputs::RunDir;

mod export;
mod grouped;
mod render;
pub use export::render_as;
pub(crate) use grouped::{grouped_lines, render_grouped_as};
pub(crate) use render::fold_spread;
#[cfg(test)]
use render::render;

/// `--against identity`: every run against its own identity forecast.
pub(crate) const IDENTITY: &str = "identity";

/// A subject's figure of one metric: the model's and the identity's (`None`: an empty or
/// unreadable cell).
type Cell = (Option<f64>, Option<f64>);

/// One run's per-subject test figures: subject → metric → (model, identity).
struct Subjects {
    path: PathBuf,
    model: String,
    /// The metrics of the file's `model_<metric>` columns.
    columns: BTreeSet<String>,
    values: BTreeMap<String, BTreeMap<String, Cell>>,
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
    let columns: Vec<(String, usize, Option<usize>)> = header
        .iter()
        .enumerate()
        .filter_map(|(i, h)| {
            let name = h.strip_prefix("model_")?;
            Some((name.to_string(), i, col(&format!("identity_{name}"))))
        })
        .collect();
    let mut values = BTreeMap::new();
    for (line, record) in reader.records().enumerate() {
        let record =
            record.with_context(|| format!("{}: line {}: malformed", path.display(), line + 2))?;
        if record.get(forecast) != Some("1") {
            continue;
        }
        let parse = |i: Option<usize>| {
            i.and_then(|i| record.get(i))
                .and_then(|v| v.trim().parse::<f64>().ok())
        };
        let metrics = columns
            .iter()
            .map(|(name, m, id)| (name.clone(), (parse(Some(*m)), parse(*id))))
            .collect();
        values.insert(record.get(subject).unwrap_or_default().to_string(), metrics);
    }
    let model = dir.read_results().ok().and_then(|r| r.model);
    let model = model.unwrap_or_else(|| "?".into());
    Ok(Subjects {
        path,
        model,
        columns: columns.into_iter().map(|(name, _, _)| name).collect(),
        values,
    })
}

/// One line of the table: a run against its partner and against the identity, per metric.
#[derive(Debug, Serialize)]
pub struct AgainstLine {
    pub run: String,
    /// What the run is apart from its fold and seed (`model=clg-ode preset=residual …`).
    pub configuration: String,
    pub model: String,
    pub fold: String,
    pub seed: String,
    /// The partner run: the `--against` model's run of the same fold and seed, or `identity`
    /// (`--against identity`: the run's own identity forecast); `None`: this is the `--against`
    /// run, or it has no partner and `unpaired` says why.
    pub against: Option<String>,
    /// This run is the `--against` model's.
    pub is_against: bool,
    /// Why a run that is not the `--against` model's has no partner.
    pub unpaired: Option<String>,
    pub metric: String,
    pub vs_against: Option<Paired>,
    /// Subjects of either run left out of `vs_against`: in one run only, or without a finite
    /// value of the metric in both.
    pub dropped_vs_against: usize,
    pub vs_identity: Paired,
    /// Subjects of the run left out of `vs_identity` (no finite value of the model or of the
    /// identity).
    pub dropped_vs_identity: usize,
}

/// A run to compare: its name, directory, configuration (what it is apart from its fold and
/// seed), fold and seed (`?` when the run does not say).
pub(crate) struct Compared<'a> {
    pub name: String,
    pub dir: &'a Path,
    pub configuration: String,
    pub fold: String,
    pub seed: String,
}

/// The paired comparison of `runs` against the runs of `against`, each run with the one of the
/// same fold and seed ([`IDENTITY`]: each run with its own identity forecast), the p-values
/// Holm-adjusted over the lines.
pub(crate) fn against_lines(
    runs: &[Compared],
    against: &str,
    metrics: &[String],
) -> Result<Vec<AgainstLine>> {
    let Pairing {
        loaded,
        is_against,
        partners,
        metrics,
    } = pairing(runs, against, metrics)?;
    let own_identity = against == IDENTITY;
    let mut lines = Vec::new();
    for (i, (run, s)) in runs.iter().zip(&loaded).enumerate() {
        let is_against = is_against[i];
        let partner = &partners[i];
        for metric in &metrics {
            has_column(s, metric)?;
            let (ab, dropped_vs_identity) = versus_identity(s, metric);
            let vs_identity = paired_values(&ab, SEED);
            let (vs_against, dropped_vs_against) = match &partner {
                Ok(Some(j)) => {
                    has_column(&loaded[*j], metric)?;
                    let (ab, dropped) = versus(s, &loaded[*j], metric);
                    (Some(paired_values(&ab, SEED)), dropped)
                }
                _ if own_identity => (Some(vs_identity), dropped_vs_identity),
                _ => (None, 0),
            };
            lines.push(AgainstLine {
                run: run.name.clone(),
                configuration: run.configuration.clone(),
                model: s.model.clone(),
                fold: run.fold.clone(),
                seed: run.seed.clone(),
                against: match &partner {
                    Ok(Some(j)) => Some(runs[*j].name.clone()),
                    _ if own_identity => Some(IDENTITY.into()),
                    _ => None,
                },
                is_against,
                unpaired: partner.as_ref().err().cloned(),
                metric: metric.clone(),
                vs_against,
                dropped_vs_against,
                vs_identity,
                dropped_vs_identity,
            });
        }
    }
    adjust(&mut lines);
    Ok(lines)
}

/// The compared runs read and paired: each run's per-subject figures, whether it is one of the
/// `--against` model's runs, its partner (`Ok(None)`: none needed, being the model's run or
/// against its own identity; `Err`: why it has none), and the metrics asked (default
/// `sc_log_mse`).
struct Pairing {
    loaded: Vec<Subjects>,
    is_against: Vec<bool>,
    partners: Vec<std::result::Result<Option<usize>, String>>,
    metrics: Vec<String>,
}

/// Reads and pairs `runs` against `against` ([`Pairing`]); no run of `against` (unless the
/// identity) is an error naming the models there.
fn pairing(runs: &[Compared], against: &str, metrics: &[String]) -> Result<Pairing> {
    let loaded: Vec<Subjects> = runs
        .iter()
        .map(|r| read_subjects(&RunDir::new(r.dir)))
        .collect::<Result<_>>()?;
    let own_identity = against == IDENTITY;
    let designated = designated(runs, &loaded, against)?;
    let is_partner = |i: usize| designated[i];
    if !own_identity && !(0..runs.len()).any(is_partner) {
        let models: Vec<&str> = loaded.iter().map(|s| s.model.as_str()).collect();
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
    let is_against: Vec<bool> = (0..runs.len())
        .map(|i| !own_identity && is_partner(i))
        .collect();
    let partners = (0..runs.len())
        .map(|i| {
            if is_against[i] || own_identity {
                Ok(Ok(None))
            } else {
                Ok(partner_of(runs, i, is_partner, against)?.map(Some))
            }
        })
        .collect::<Result<_>>()?;
    Ok(Pairing {
        loaded,
        is_against,
        partners,
        metrics,
    })
}

/// Holm's adjustment of the lines' p-values: those against the model over the lines that have
/// one, those against the identity over every line.
fn adjust(lines: &mut [AgainstLine]) {
    let p: Vec<f64> = lines
        .iter()
        .map(|l| l.vs_against.map_or(f64::NAN, |p| p.p_wilcoxon))
        .collect();
    for (l, h) in lines.iter_mut().zip(holm(&p)) {
        if let Some(v) = &mut l.vs_against {
            v.p_holm = Some(h);
        }
    }
    let p: Vec<f64> = lines.iter().map(|l| l.vs_identity.p_wilcoxon).collect();
    for (l, h) in lines.iter_mut().zip(holm(&p)) {
        l.vs_identity.p_holm = Some(h);
    }
}

/// The runs `--against NAME` designates: the runs of model NAME (one per fold and seed), or
/// else the one run NAME names (its directory's name, its name or its path). A name that
/// designates several runs, or a model's runs and another run beside them, is refused with the
/// candidates: a run's name never picks one of several silently.
fn designated(runs: &[Compared], loaded: &[Subjects], against: &str) -> Result<Vec<bool>> {
    let by_model: Vec<bool> = loaded.iter().map(|s| s.model == against).collect();
    let named = |r: &Compared| {
        r.name == against
            || r.dir == Path::new(against)
            || Path::new(&r.name)
                .file_name()
                .is_some_and(|f| f.to_string_lossy() == against)
    };
    let only_named: Vec<usize> = (0..runs.len())
        .filter(|&i| named(&runs[i]) && !by_model[i])
        .collect();
    let of_model = by_model.iter().any(|&m| m);
    match only_named[..] {
        [] => return Ok(by_model),
        [i] if !of_model => return Ok((0..runs.len()).map(|j| j == i).collect()),
        _ => {}
    }
    let candidates: Vec<String> = (0..runs.len())
        .filter(|&i| by_model[i] || only_named.contains(&i))
        .map(|i| {
            let r = &runs[i];
            let dir = r.dir.display().to_string();
            let dir = if dir == r.name {
                String::new()
            } else {
                format!("{dir}; ")
            };
            let model = &loaded[i].model;
            format!(
                "{} ({dir}model {model}, fold {}, seed {})",
                r.name, r.fold, r.seed
            )
        })
        .collect();
    let mut models: Vec<&str> = only_named
        .iter()
        .map(|&i| loaded[i].model.as_str())
        .collect();
    models.sort_unstable();
    models.dedup();
    let model_hint = match models[..] {
        [m] if !of_model => format!(
            ", or their model (--against {m}) to pair each run with the {m} run of its fold and \
             seed"
        ),
        _ => String::new(),
    };
    let what = if of_model {
        "is the model of some runs and the name of others".to_string()
    } else {
        format!("names {} runs", only_named.len())
    };
    bail!(
        "--against {against} {what}, and a run's name must name one run: {}; give the one to \
         pair with by its directory (--against DIR){model_hint}",
        candidates.join(", ")
    )
}

/// The partner of run `i`: the one run of `against` with its fold and seed (`Err`: why there is
/// none). Two such runs are an error naming both.
fn partner_of(
    runs: &[Compared],
    i: usize,
    is_partner: impl Fn(usize) -> bool,
    against: &str,
) -> Result<std::result::Result<usize, String>> {
    let me = &runs[i];
    let all: Vec<usize> = (0..runs.len())
        .filter(|&j| j != i && is_partner(j))
        .collect();
    let same: Vec<usize> = all
        .iter()
        .copied()
        .filter(|&j| runs[j].fold == me.fold && runs[j].seed == me.seed)
        .collect();
    match same[..] {
        [j] => Ok(Ok(j)),
        [] => {
            let theirs: Vec<String> = all
                .iter()
                .map(|&j| {
                    format!(
                        "{} (fold {}, seed {})",
                        runs[j].name, runs[j].fold, runs[j].seed
                    )
                })
                .collect();
            Ok(Err(format!(
                "no {against} run of fold {} and seed {} (the {against} runs: {})",
                me.fold,
                me.seed,
                theirs.join(", ")
            )))
        }
        [a, b, ..] => bail!(
            "--against {against}: {} has two partners of fold {} and seed {}, {} and {}: name \
             the one to pair with (--against with its run directory's name)",
            me.name,
            me.fold,
            me.seed,
            runs[a].name,
            runs[b].name
        ),
    }
}

/// A metric must be a column of the run's `per_subject.csv`.
fn has_column(s: &Subjects, metric: &str) -> Result<()> {
    if !s.columns.contains(metric) {
        bail!(
            "{}: no column model_{metric} (--metric {metric}); its metrics: {}",
            s.path.display(),
            s.columns.iter().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    Ok(())
}

/// The values (run, partner) of `metric` over the subjects both have a finite value for, and
/// how many subjects of either were left out.
fn versus(own: &Subjects, other: &Subjects, metric: &str) -> (Vec<(f64, f64)>, usize) {
    let subjects: BTreeSet<&String> = own.values.keys().chain(other.values.keys()).collect();
    let value =
        |x: &Subjects, s: &String| x.values.get(s)?.get(metric)?.0.filter(|v| v.is_finite());
    let mut d = Vec::new();
    let mut dropped = 0;
    for s in subjects {
        match (value(own, s), value(other, s)) {
            (Some(a), Some(b)) => d.push((a, b)),
            _ => dropped += 1,
        }
    }
    (d, dropped)
}

/// The values (model, identity) of `metric` over the run's subjects with both finite, and how
/// many were left out.
fn versus_identity(own: &Subjects, metric: &str) -> (Vec<(f64, f64)>, usize) {
    let mut d = Vec::new();
    let mut dropped = 0;
    for m in own.values.values() {
        match m.get(metric) {
            Some((Some(a), Some(b))) if a.is_finite() && b.is_finite() => d.push((*a, *b)),
            _ => dropped += 1,
        }
    }
    (d, dropped)
}

#[cfg(test)]
mod tests;
