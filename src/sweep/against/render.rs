//! The Markdown table of `compare --against` and its fold spread.

use serde::Serialize;

use super::AgainstLine;
use crate::metrics::paired::Paired;
use crate::outputs::group_table::Stats;

/// Three significant figures.
fn sig(x: f64) -> String {
    if !x.is_finite() {
        return "N/A".into();
    }
    format!("{x:.2e}")
}

/// "mean [low, high] | lower/higher | p"; "not computable" without a finite difference.
fn cell(p: &Paired) -> String {
    let counts = format!("{}/{}", p.below, p.above);
    if !p.computable() {
        let why = if p.n == 0 {
            "not computable (no subject)"
        } else {
            "not computable (non-finite)"
        };
        return format!("{why} | {counts} | not computable");
    }
    let p_value = if p.p_wilcoxon.is_finite() {
        format!("{:.2e}", p.p_wilcoxon)
    } else {
        "N/A".into()
    };
    format!(
        "{} [{}, {}] | {counts} | {p_value}",
        sig(p.mean),
        sig(p.ci_low),
        sig(p.ci_high)
    )
}

/// n subjects, with the dropped ones when there are.
fn count(n: usize, dropped: usize) -> String {
    if dropped == 0 {
        n.to_string()
    } else {
        format!("{n} ({dropped} dropped)")
    }
}

/// The Markdown table of `lines`.
pub fn render(lines: &[AgainstLine], against: &str) -> String {
    let mut out = format!(
        "paired over the test subjects (forecasts), run − partner (the {against} run of the \
         same fold and seed) and run − identity; mean [bootstrap 95% interval], subjects \
         lower/higher, Wilcoxon signed-rank p\n\n\
         | run | model | fold | seed | partner | metric | n subjects | − {against} | \
         lower/higher | p | n subjects | − identity | lower/higher | p |\n\
         | --- | --- | ---: | ---: | --- | --- | ---: | --- | --- | ---: | ---: | --- | --- | \
         ---: |\n"
    );
    for l in lines {
        let (n, vs) = match (&l.vs_against, l.is_against, &l.unpaired) {
            (Some(p), _, _) => (count(p.n, l.dropped_vs_against), cell(p)),
            (None, true, _) => (String::new(), "(the --against run) | | ".into()),
            (None, false, why) => (
                String::new(),
                format!("unpaired: {} | | ", why.as_deref().unwrap_or("no partner")),
            ),
        };
        let partner = match (&l.against, l.is_against) {
            (Some(a), _) => a.as_str(),
            (None, true) => "(itself)",
            (None, false) => "none",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {partner} | {} | {n} | {vs} | {} | {} |\n",
            l.run,
            l.model,
            l.fold,
            l.seed,
            l.metric,
            count(l.vs_identity.n, l.dropped_vs_identity),
            cell(&l.vs_identity)
        ));
    }
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
                f.vs_identity.as_ref().map_or("N/A".into(), spread_cell)
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
    /// Each fold's mean difference, over the folds (mean, sd, min, max, n folds); `None` when
    /// a fold has none (unpaired, or not computable).
    pub vs_against: Option<Stats>,
    pub vs_identity: Option<Stats>,
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
