//! The text tables of `compare --against` (Markdown or aligned columns) and its fold spread.

use serde::Serialize;

use super::AgainstLine;
use crate::metrics::paired::Paired;
use crate::outputs::group_table::{Format, Stats, text_table};

/// Three significant figures.
fn sig(x: f64) -> String {
    if !x.is_finite() {
        return "N/A".into();
    }
    format!("{x:.2e}")
}

/// A comparison's cells: mean [low, high], lower/higher, p, Holm-adjusted p ("not computable"
/// without a finite difference; "same forecast (rounding)" for differences of float rounding
/// only).
pub(super) fn cells(p: &Paired) -> [String; 4] {
    let counts = format!("{}/{}", p.below, p.above);
    if !p.computable() {
        let why = if p.n == 0 {
            "not computable (no subject)"
        } else {
            "not computable (non-finite)"
        };
        return [why.into(), counts, "not computable".into(), String::new()];
    }
    let p_value = |p: f64| {
        if p.is_finite() {
            format!("{p:.2e}")
        } else {
            "N/A".into()
        }
    };
    if p.rounding_only {
        // One forecast up to float rounding: no test (metrics::paired::ROUNDING).
        return [
            format!("{} [{}, {}]", sig(p.mean), sig(p.ci_low), sig(p.ci_high)),
            counts,
            "same forecast (rounding)".into(),
            String::new(),
        ];
    }
    [
        format!("{} [{}, {}]", sig(p.mean), sig(p.ci_low), sig(p.ci_high)),
        counts,
        p_value(p.p_wilcoxon),
        p_value(p.p_holm.unwrap_or(f64::NAN)),
    ]
}

/// n subjects, with the dropped ones when there are.
pub(super) fn count(n: usize, dropped: usize) -> String {
    if dropped == 0 {
        n.to_string()
    } else {
        format!("{n} ({dropped} dropped)")
    }
}

/// The paired table's header and rows; against the identity (`--against identity`) the
/// identity's columns once.
fn paired_table(lines: &[AgainstLine], against: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let own_identity = against == super::IDENTITY;
    let mut header: Vec<String> = ["run", "model", "fold", "seed", "partner", "metric"]
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
            let partner = match (&l.against, l.is_against) {
                (Some(_), _) if own_identity => "(its own identity)".into(),
                (Some(a), _) => a.clone(),
                (None, true) => "(itself)".into(),
                (None, false) => "none".into(),
            };
            let mut row = vec![
                l.run.clone(),
                l.model.clone(),
                l.fold.clone(),
                l.seed.clone(),
                partner,
                l.metric.clone(),
            ];
            match (&l.vs_against, l.is_against, &l.unpaired) {
                (Some(p), _, _) => {
                    row.push(count(p.n, l.dropped_vs_against));
                    row.extend(cells(p));
                }
                (None, true, _) => {
                    row.extend([String::new(), "(the --against run)".into()]);
                    row.extend([String::new(), String::new(), String::new()]);
                }
                (None, false, why) => {
                    let why = why.as_deref().unwrap_or("no partner");
                    row.extend([String::new(), format!("unpaired: {why}")]);
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

/// The Markdown table of `lines`.
#[cfg(test)]
pub(crate) fn render(lines: &[AgainstLine], against: &str) -> String {
    render_text(lines, against, Format::Md)
}

/// The table of `lines` and its fold spread as text: Markdown (`Format::Md`) or aligned
/// columns.
pub(super) fn render_text(lines: &[AgainstLine], against: &str, f: Format) -> String {
    let partner = if against == super::IDENTITY {
        "run − its own identity forecast".to_string()
    } else {
        format!("run − partner (the {against} run of the same fold and seed) and run − identity")
    };
    let (header, rows) = paired_table(lines, against);
    let mut out = format!(
        "paired over the test subjects (forecasts), {partner}; mean [bootstrap 95% interval], \
         subjects lower/higher, Wilcoxon signed-rank p, p_holm: that p Holm-adjusted over the \
         column's comparisons (every row of the table)\n\n{}",
        text_table(f, &header, &rows)
    );
    if lines
        .iter()
        .any(|l| l.dropped_vs_against + l.dropped_vs_identity > 0)
    {
        out.push_str(
            "\ndropped: subjects left out of a comparison, in one run only or without a finite \
             value in both (an empty or non-finite cell of per_subject.csv)\n",
        );
    }
    let spread = fold_spread(lines);
    if spread.iter().any(|f| f.n_folds > 1) {
        out.push_str(
            "\nfold spread: each fold's mean paired difference, over the folds of a \
             configuration (mean ± sd: training reruns on the same subjects, not evidence \
             about subjects)\n\n",
        );
        let mut header: Vec<String> = ["configuration", "metric", "n folds", "n subjects"]
            .map(String::from)
            .to_vec();
        header.push(format!("− {against} over folds"));
        let own_identity = against == super::IDENTITY;
        if !own_identity {
            header.push("− identity over folds".into());
        }
        let rows: Vec<Vec<String>> = spread
            .iter()
            .filter(|f| f.n_folds > 1)
            .map(|f| {
                let mut row = vec![
                    f.configuration.clone(),
                    f.metric.clone(),
                    f.n_folds.to_string(),
                    f.n_subjects.to_string(),
                    f.vs_against.as_ref().map_or("N/A".into(), spread_cell),
                ];
                if !own_identity {
                    row.push(f.vs_identity.as_ref().map_or("N/A".into(), spread_cell));
                }
                row
            })
            .collect();
        out.push_str(&text_table(f, &header, &rows));
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
pub(crate) struct FoldSpread {
    pub configuration: String,
    pub metric: String,
    pub n_folds: usize,
    /// Subjects per fold (the smallest, when folds differ).
    pub n_subjects: usize,
    /// Each fold's mean difference, over the folds (mean, sd, min, max, n folds); `None` when
    /// a fold has none (unpaired, or not computable).
    pub vs_against: Option<Stats>,
    pub vs_identity: Option<Stats>,
}

/// The lines of each (configuration, metric), in order of appearance, summarised over folds.
pub(crate) fn fold_spread(lines: &[AgainstLine]) -> Vec<FoldSpread> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for l in lines {
        let k = (l.configuration.as_str(), l.metric.as_str());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    // Every fold's mean, or none when one fold has no finite mean.
    let over_folds = |means: Vec<Option<f64>>| -> Option<Stats> {
        let finite: Option<Vec<f64>> = means
            .into_iter()
            .map(|m| m.filter(|m| m.is_finite()))
            .collect();
        Stats::of(&finite?)
    };
    keys.into_iter()
        .map(|(configuration, metric)| {
            let of: Vec<&AgainstLine> = lines
                .iter()
                .filter(|l| l.configuration == configuration && l.metric == metric)
                .collect();
            FoldSpread {
                configuration: configuration.to_string(),
                metric: metric.to_string(),
                n_folds: of.len(),
                n_subjects: of.iter().map(|l| l.vs_identity.n).min().unwrap_or(0),
                vs_against: over_folds(
                    of.iter()
                        .map(|l| Some(l.vs_against.as_ref()?.mean))
                        .collect(),
                ),
                vs_identity: over_folds(of.iter().map(|l| Some(l.vs_identity.mean)).collect()),
            }
        })
        .collect()
}
