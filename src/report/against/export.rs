//! `compare --against` in every `--format`: the text tables ([`super::render`]), JSON (the
//! lines and the fold spread, every statistic a number or `null`) and CSV (one row per run and
//! metric, one numeric column per statistic, empty where there is none; the text cells never a
//! spreadsheet formula: `crate::outputs::text::csv_cell`).

use anyhow::{Context, Result};

use super::render::render_text;
use super::{AgainstLine, fold_spread};
use crate::metrics::paired::Paired;
use crate::outputs::group_table::{Format, csv_text};
use crate::outputs::text::csv_row;

/// The statistics of a comparison in CSV, in order (after `<side>_`).
pub(super) const STATS: [&str; 10] = [
    "n",
    "dropped",
    "mean",
    "ci_low",
    "ci_high",
    "lower",
    "higher",
    "p_wilcoxon",
    "p_holm",
    "rounding_only",
];

/// A finite number as itself, anything else (not computed) as an empty cell.
fn number(x: f64) -> String {
    if x.is_finite() {
        x.to_string()
    } else {
        String::new()
    }
}

/// A comparison's cells as [`STATS`] (all empty without one).
pub(super) fn stats(p: Option<&Paired>, dropped: usize) -> Vec<String> {
    let Some(p) = p else {
        return vec![String::new(); STATS.len()];
    };
    vec![
        p.n.to_string(),
        dropped.to_string(),
        number(p.mean),
        number(p.ci_low),
        number(p.ci_high),
        p.below.to_string(),
        p.above.to_string(),
        number(p.p_wilcoxon),
        number(p.p_holm.unwrap_or(f64::NAN)),
        p.rounding_only.to_string(),
    ]
}

/// One row per line: who, then `vs_against_<stat>`, then `vs_identity_<stat>`.
fn csv(lines: &[AgainstLine]) -> Result<String> {
    let mut header: Vec<String> = [
        "run",
        "configuration",
        "model",
        "fold",
        "seed",
        "partner",
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
            // The names and settings are text cells: never a spreadsheet formula.
            let mut row = csv_row(&[
                l.run.as_str(),
                &l.configuration,
                &l.model,
                &l.fold,
                &l.seed,
                l.against.as_deref().unwrap_or_default(),
                if l.is_against { "true" } else { "false" },
                l.unpaired.as_deref().unwrap_or_default(),
                &l.metric,
            ]);
            row.extend(stats(l.vs_against.as_ref(), l.dropped_vs_against));
            row.extend(stats(Some(&l.vs_identity), l.dropped_vs_identity));
            row
        })
        .collect();
    csv_text(&header, &rows)
}

/// The `--against` view of `lines` as `f`. CSV has the paired rows only (the fold spread is
/// their summary: in the text tables and JSON).
pub fn render_as(lines: &[AgainstLine], against: &str, f: Format) -> Result<String> {
    Ok(match f {
        Format::Table | Format::Md => render_text(lines, against, f),
        Format::Csv => csv(lines)?,
        Format::Json => {
            let out = serde_json::json!({
                "against": against,
                "runs": lines,
                "fold_spread": fold_spread(lines),
            });
            serde_json::to_string_pretty(&out).context("JSON")? + "\n"
        }
    })
}
