//! `compare … --against MODEL --group-by KEY[,KEY]`: one row per configuration (the values of
//! the keys) and metric instead of one per run.
//!
//! Each run of a configuration is paired with its partner as in the per-run table (the MODEL
//! run of its fold and seed, or its own identity forecast). For every test subject, its
//! figure is averaged over the configuration's paired runs (its folds and seeds: on a split
//! whose test subjects every fold shares, a subject is scored once per fold) and so is the
//! partner's over the same runs: the subject's fold-averaged error, beside the partner's. The
//! paired test runs on those per-subject means, one pair per subject (the bootstrap interval
//! and the Wilcoxon signed-rank test of [`crate::metrics::paired`]), and the p-values are
//! Holm-adjusted over the table's rows (configurations × metrics; one family against MODEL,
//! one against the identity), as in the per-run table. A subject enters a run's pair only
//! with a finite value on both sides; its mean is over the runs where it did (one without any
//! is counted as dropped). A configuration none of whose runs has a partner is shown
//! unpaired, saying why; one with some unpaired runs names them. The MODEL's own runs are a
//! row of their own (against the identity only), never pooled with another configuration's.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};
use serde::Serialize;

use super::export::{STATS, stats};
use super::render::{cells, count};
use super::{Compared, IDENTITY, Pairing, Subjects, has_column, pairing};
use crate::metrics::paired::{Paired, SEED, holm, paired_values};
use crate::outputs::group_table::{Format, csv_text, text_table};
use crate::outputs::text::csv_row;

/// One row: a configuration's runs, fold-averaged per subject, against their partners' and
/// against the identity, for one metric.
#[derive(Debug, Serialize)]
pub(crate) struct GroupedLine {
    /// The group keys' values (`model=clg-ode preset=residual`).
    pub configuration: String,
    /// The models of its runs (one, unless the keys pool models).
    pub model: String,
    /// Its runs, in the inputs' order.
    pub runs: Vec<String>,
    /// The folds and seeds of its runs (each once, in order of appearance).
    pub folds: Vec<String>,
    pub seeds: Vec<String>,
    /// The partners the paired runs were paired with (`identity`: each its own identity
    /// forecast); empty for the `--against` model's row and an unpaired configuration.
    pub against: Vec<String>,
    /// These are the `--against` model's runs.
    pub is_against: bool,
    /// Runs of the configuration left out of `vs_against` (no partner), each with why.
    pub unpaired: Vec<String>,
    pub metric: String,
    /// Over the subjects: the configuration's fold-averaged figure − the partners'.
    pub vs_against: Option<Paired>,
    /// Subjects of the paired runs without a finite pair in any of them.
    pub dropped_vs_against: usize,
    /// Over the subjects: the configuration's fold-averaged figure − the identity's.
    pub vs_identity: Paired,
    pub dropped_vs_identity: usize,
}

/// Per subject, the sums of (run, partner) over the runs where both were finite, and how many;
/// subjects seen without any such pair count as dropped.
#[derive(Default)]
struct Means {
    sums: BTreeMap<String, (f64, f64, usize)>,
}

impl Means {
    fn add(&mut self, subject: &str, pair: Option<(f64, f64)>) {
        let e = self.sums.entry(subject.to_string()).or_default();
        if let Some((a, b)) = pair.filter(|(a, b)| a.is_finite() && b.is_finite()) {
            *e = (e.0 + a, e.1 + b, e.2 + 1);
        }
    }

    /// The per-subject means (subjects in name order) and the number dropped.
    fn pairs(&self) -> (Vec<(f64, f64)>, usize) {
        let mut out = Vec::new();
        let mut dropped = 0;
        for &(a, b, n) in self.sums.values() {
            if n == 0 {
                dropped += 1;
            } else {
                out.push((a / n as f64, b / n as f64));
            }
        }
        (out, dropped)
    }
}

/// A subject's model figure of `metric` in `s` (`None`: missing, empty or not finite).
fn model_value(s: &Subjects, subject: &str, metric: &str) -> Option<f64> {
    s.values
        .get(subject)?
        .get(metric)?
        .0
        .filter(|v| v.is_finite())
}

/// The grouped paired table of `runs` (their `configuration`: the group keys' values) against
/// `against`, one row per configuration and metric, configurations in order of first appearance
/// (the `--against` model's runs apart), p-values Holm-adjusted over the rows.
pub(crate) fn grouped_lines(
    runs: &[Compared],
    against: &str,
    metrics: &[String],
) -> Result<Vec<GroupedLine>> {
    let Pairing {
        loaded,
        is_against,
        partners,
        metrics,
    } = pairing(runs, against, metrics)?;
    let own_identity = against == IDENTITY;
    // Configurations in order of first appearance; the model's own runs never pooled with
    // another configuration's.
    let mut groups: Vec<((&str, bool), Vec<usize>)> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        let key = (r.configuration.as_str(), is_against[i]);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => groups.push((key, vec![i])),
        }
    }
    let once = |v: Vec<String>| {
        let mut out: Vec<String> = Vec::new();
        for x in v {
            if !out.contains(&x) {
                out.push(x);
            }
        }
        out
    };
    let mut lines = Vec::new();
    for ((configuration, mine), members) in &groups {
        let paired: Vec<(usize, Option<usize>)> = members
            .iter()
            .filter_map(|&i| match &partners[i] {
                Ok(p) => Some((i, *p)),
                Err(_) => None,
            })
            .collect();
        let unpaired: Vec<String> = members
            .iter()
            .filter_map(|&i| {
                let why = partners[i].as_ref().err()?;
                Some(format!("{}: {why}", runs[i].name))
            })
            .collect();
        for metric in &metrics {
            let mut identity = Means::default();
            for &i in members {
                let s = &loaded[i];
                has_column(s, metric)?;
                for (subject, m) in &s.values {
                    identity.add(subject, m.get(metric).and_then(|c| Some((c.0?, c.1?))));
                }
            }
            let (ab, dropped_vs_identity) = identity.pairs();
            let vs_identity = paired_values(&ab, SEED);
            let (vs_against, dropped_vs_against) = if *mine {
                (None, 0)
            } else if own_identity {
                (Some(vs_identity), dropped_vs_identity)
            } else if paired.is_empty() {
                (None, 0)
            } else {
                let mut means = Means::default();
                for &(i, j) in &paired {
                    let j = j.context("a paired run without its partner")?;
                    let (own, other) = (&loaded[i], &loaded[j]);
                    has_column(other, metric)?;
                    let subjects: BTreeSet<&String> =
                        own.values.keys().chain(other.values.keys()).collect();
                    for subject in subjects {
                        let pair = model_value(own, subject, metric)
                            .zip(model_value(other, subject, metric));
                        means.add(subject, pair);
                    }
                }
                let (ab, dropped) = means.pairs();
                (Some(paired_values(&ab, SEED)), dropped)
            };
            let against_names = match () {
                _ if *mine => Vec::new(),
                _ if own_identity => vec![IDENTITY.to_string()],
                _ => paired
                    .iter()
                    .filter_map(|&(_, j)| Some(runs[j?].name.clone()))
                    .collect(),
            };
            lines.push(GroupedLine {
                configuration: configuration.to_string(),
                model: once(members.iter().map(|&i| loaded[i].model.clone()).collect()).join(","),
                runs: members.iter().map(|&i| runs[i].name.clone()).collect(),
                folds: once(members.iter().map(|&i| runs[i].fold.clone()).collect()),
                seeds: once(members.iter().map(|&i| runs[i].seed.clone()).collect()),
                against: against_names,
                is_against: *mine,
                unpaired: unpaired.clone(),
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

/// Holm's adjustment over the rows: against the model over the rows that have one, against the
/// identity over every row.
fn adjust(lines: &mut [GroupedLine]) {
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

/// `a, b, c` (at most three, then `… (N)`).
fn list(v: &[String]) -> String {
    match v.len() {
        0..=3 => v.join(", "),
        n => format!("{}, … ({n})", v[..2].join(", ")),
    }
}

/// The grouped table's header and rows.
fn table(lines: &[GroupedLine], against: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let own_identity = against == IDENTITY;
    let mut header: Vec<String> = ["configuration", "model", "runs", "folds", "seeds", "metric"]
        .map(String::from)
        .to_vec();
    let block = [
        "n subjects".to_string(),
        format!("− {against}"),
        "lower/higher".into(),
        "p".into(),
        "p_holm".into(),
    ];
    header.extend(block.clone());
    if !own_identity {
        header.extend(block.map(|h| h.replace(&format!("− {against}"), "− identity")));
    }
    let rows = lines
        .iter()
        .map(|l| {
            let mut row = vec![
                l.configuration.clone(),
                l.model.clone(),
                l.runs.len().to_string(),
                l.folds.join(","),
                l.seeds.join(","),
                l.metric.clone(),
            ];
            match (&l.vs_against, l.is_against) {
                (Some(p), _) => {
                    row.push(count(p.n, l.dropped_vs_against));
                    let mut c = cells(p);
                    if !l.unpaired.is_empty() {
                        c[0] = format!("{} ({} run(s) unpaired)", c[0], l.unpaired.len());
                    }
                    row.extend(c);
                }
                (None, true) => {
                    row.extend([String::new(), "(the --against runs)".into()]);
                    row.extend([String::new(), String::new(), String::new()]);
                }
                (None, false) => {
                    row.extend([String::new(), format!("unpaired: {}", list(&l.unpaired))]);
                    row.extend([String::new(), String::new(), String::new()]);
                }
            }
            if !own_identity {
                row.push(count(l.vs_identity.n, l.dropped_vs_identity));
                row.extend(cells(&l.vs_identity));
            }
            row
        })
        .collect();
    (header, rows)
}

/// CSV: one row per configuration and metric, `vs_against_<stat>` then `vs_identity_<stat>`;
/// lists (runs, folds, seeds, partners, unpaired) joined by `;`.
fn csv(lines: &[GroupedLine]) -> Result<String> {
    let mut header: Vec<String> = [
        "configuration",
        "model",
        "n_runs",
        "runs",
        "folds",
        "seeds",
        "partners",
        "is_against",
        "unpaired",
        "metric",
    ]
    .map(String::from)
    .to_vec();
    for side in ["vs_against", "vs_identity"] {
        header.extend(STATS.map(|s| format!("{side}_{s}")));
    }
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            let mut row = csv_row(&[
                l.configuration.as_str(),
                &l.model,
                &l.runs.len().to_string(),
                &l.runs.join(";"),
                &l.folds.join(";"),
                &l.seeds.join(";"),
                &l.against.join(";"),
                if l.is_against { "true" } else { "false" },
                &l.unpaired.join(";"),
                &l.metric,
            ]);
            row.extend(stats(l.vs_against.as_ref(), l.dropped_vs_against));
            row.extend(stats(Some(&l.vs_identity), l.dropped_vs_identity));
            row
        })
        .collect();
    csv_text(&header, &rows)
}

/// The grouped `--against` view of `lines` (grouped by `keys`) as `f`.
pub(crate) fn render_grouped_as(
    lines: &[GroupedLine],
    against: &str,
    keys: &[String],
    f: Format,
) -> Result<String> {
    Ok(match f {
        Format::Table | Format::Md => {
            let partner = if against == IDENTITY {
                "its own identity forecast".to_string()
            } else {
                format!("the partners' (each run's {against} run of the same fold and seed)")
            };
            let (header, rows) = table(lines, against);
            let mut out = format!(
                "one row per configuration ({}): each test subject's figure averaged over the \
                 configuration's runs (folds, seeds), paired with {partner} averaged over the same \
                 runs, and with the identity's; mean difference over the subjects [bootstrap 95% \
                 interval], subjects lower/higher, Wilcoxon signed-rank p, p_holm: that p \
                 Holm-adjusted over the column's rows (configurations × metrics)\n\n{}",
                keys.join(","),
                text_table(f, &header, &rows)
            );
            if lines
                .iter()
                .any(|l| l.dropped_vs_against + l.dropped_vs_identity > 0)
            {
                out.push_str(
                    "\ndropped: subjects without a finite pair in any run of the configuration \
                     (in one run only, or an empty or non-finite cell of per_subject.csv)\n",
                );
            }
            out
        }
        Format::Csv => csv(lines)?,
        Format::Json => {
            let out = serde_json::json!({
                "against": against,
                "group_by": keys,
                "configurations": lines,
            });
            serde_json::to_string_pretty(&out).context("JSON")? + "\n"
        }
    })
}
