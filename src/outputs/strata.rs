//! The strata of a run's `strata.json` (Δt terciles with their thresholds, horizons: written by
//! train-gnn and eval-gnn) as a table in any `--format` (`compare --strata`) and as bars of
//! skill, one colour per run when several runs share the chart (`plot-sc --strata`
//! ([`chart`]), each stratum with its n, and a warning where n is too small for its skill to
//! mean much.

use std::borrow::Cow;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;

use super::group_table::{Format, sig4, text_table};
use super::text::csv_cell;

mod chart;
pub(crate) mod pool;
pub use chart::StrataSkill;

/// Below this many forecasts a stratum's skill is one or two subjects' luck: marked and warned.
pub(crate) const MIN_N: u64 = 5;

/// One stratum: its label, n, the model's and the identity's sc_log_mse and the skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Stratum {
    pub label: String,
    /// The Δt range of a tercile (`≤ 1.92 y`); empty for a horizon.
    pub range: String,
    pub n: u64,
    pub mse: Option<f64>,
    pub identity_mse: Option<f64>,
    pub skill: Option<f64>,
    /// A configuration's pooled stratum ([`pool`]): the 95% interval of its mean skill over
    /// the runs; `None` for one run's.
    pub interval: Option<(f64, f64)>,
}

/// The strata of `strata.json`, in order: Δt short, middle, long, then the horizons.
pub(crate) fn read(strata: &Value) -> Vec<Stratum> {
    let mut out = Vec::new();
    let mut add = |label: String, range: String, s: &Value| {
        if let Some(n) = s["n"].as_u64() {
            out.push(Stratum {
                label,
                range,
                n,
                mse: s["model"]["sc_log_mse"].as_f64(),
                identity_mse: s["identity"]["sc_log_mse"].as_f64(),
                skill: s["skill"]["skill"].as_f64(),
                interval: None,
            });
        }
    };
    if let Some(t) = strata["dt_terciles"].as_object() {
        let years = |k: &str| t.get(k).and_then(Value::as_f64).map(|v| format!("{v:.2}"));
        let (p33, p67) = (years("p33_years"), years("p67_years"));
        for k in ["short", "middle", "long"] {
            let range = match (k, &p33, &p67) {
                ("short", Some(a), _) => format!("≤ {a} y"),
                ("middle", Some(a), Some(b)) => format!("{a}–{b} y"),
                ("long", _, Some(b)) => format!("≥ {b} y"),
                _ => String::new(),
            };
            if let Some(s) = t.get(k) {
                add(format!("Δt {k}"), range, s);
            }
        }
    }
    if let Some(h) = strata["horizons"].as_object() {
        for (k, s) in h.iter().filter(|(_, s)| s.is_object()) {
            add(k.replace('_', " "), String::new(), s);
        }
    }
    out
}

/// The strata with fewer than [`MIN_N`] forecasts, as a warning line (`None`: none).
pub(crate) fn small_warning(strata: &[Stratum]) -> Option<String> {
    let small: Vec<String> = strata
        .iter()
        .filter(|s| s.n < MIN_N)
        .map(|s| format!("{} (n={})", s.label, s.n))
        .collect();
    (!small.is_empty()).then(|| {
        format!(
            "{} stratum(s) with fewer than {MIN_N} forecasts, whose skill is a subject or two: {}",
            small.len(),
            small.join(", ")
        )
    })
}

/// The strata as a text table: stratum, its Δt range, n, mse, identity mse, skill; `*` marks
/// n < MIN_N.
pub(crate) fn table(strata: &[Stratum]) -> String {
    let cell = |v: Option<f64>| v.map_or("N/A".into(), sig4);
    let mut lines = vec![format!(
        "{:<36} {:>14} {:>4} {:>10} {:>10} {:>8}",
        "stratum", "range", "n", "mse", "identity", "skill"
    )];
    for s in strata {
        let mark = if s.n < MIN_N { "*" } else { "" };
        lines.push(format!(
            "{:<36} {:>14} {:>4} {:>10} {:>10} {:>8}",
            s.label,
            s.range,
            format!("{}{mark}", s.n),
            cell(s.mse),
            cell(s.identity_mse),
            cell(s.skill)
        ));
    }
    if strata.iter().any(|s| s.n < MIN_N) {
        lines.push(format!(
            "* fewer than {MIN_N} forecasts: read the skill as anecdote"
        ));
    }
    lines.join("\n") + "\n"
}

/// One stratum of one run, as the csv and json formats write it.
#[derive(Debug, Serialize)]
struct Record<'a> {
    run: Cow<'a, str>,
    stratum: Cow<'a, str>,
    range: Cow<'a, str>,
    n: u64,
    mse: Option<f64>,
    identity_mse: Option<f64>,
    skill: Option<f64>,
    /// n < MIN_N: the skill is a subject or two.
    few: bool,
}

/// Every run's strata as `f`: a text table per run (`table`), or one table of rows
/// `run, stratum, range, n, mse, identity_mse, skill, few` (`md`, `csv`, `json`; a figure a
/// stratum lacks is empty in csv, `null` in json).
pub fn render(runs: &[(String, Vec<Stratum>)], f: Format) -> Result<String> {
    let records: Vec<Record> = runs
        .iter()
        .flat_map(|(run, strata)| {
            strata.iter().map(move |s| Record {
                run: Cow::Borrowed(run),
                stratum: Cow::Borrowed(&s.label),
                range: Cow::Borrowed(&s.range),
                n: s.n,
                mse: s.mse,
                identity_mse: s.identity_mse,
                skill: s.skill,
                few: s.n < MIN_N,
            })
        })
        .collect();
    Ok(match f {
        Format::Table => runs
            .iter()
            .map(|(run, strata)| format!("{run}\n{}\n", table(strata)))
            .collect(),
        Format::Md => {
            let header: Vec<String> = ["run", "stratum", "range", "n", "mse", "identity", "skill"]
                .iter()
                .map(|h| h.to_string())
                .collect();
            let cell = |v: Option<f64>| v.map_or("N/A".into(), sig4);
            let rows: Vec<Vec<String>> = records
                .iter()
                .map(|r| {
                    let mark = if r.few { "*" } else { "" };
                    vec![
                        r.run.to_string(),
                        r.stratum.to_string(),
                        r.range.to_string(),
                        format!("{}{mark}", r.n),
                        cell(r.mse),
                        cell(r.identity_mse),
                        cell(r.skill),
                    ]
                })
                .collect();
            let mut md = text_table(f, &header, &rows);
            if records.iter().any(|r| r.few) {
                md.push_str(&format!(
                    "\n\\* fewer than {MIN_N} forecasts: read the skill as anecdote\n"
                ));
            }
            md
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            if records.is_empty() {
                w.write_record([
                    "run",
                    "stratum",
                    "range",
                    "n",
                    "mse",
                    "identity_mse",
                    "skill",
                    "few",
                ])?;
            }
            for r in &records {
                // The names are text cells: never a spreadsheet formula.
                w.serialize(Record {
                    run: csv_cell(&r.run),
                    stratum: csv_cell(&r.stratum),
                    range: csv_cell(&r.range),
                    ..*r
                })?;
            }
            String::from_utf8(w.into_inner().context("writing CSV")?)?
        }
        Format::Json => serde_json::to_string_pretty(&records)? + "\n",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strata_are_read_in_order_and_small_ones_are_marked() {
        let s = |n: u64, skill: f64| {
            json!({"n": n, "model": {"sc_log_mse": 1.0}, "identity": {"sc_log_mse": 2.0},
                   "skill": {"skill": skill}})
        };
        let strata = json!({
            "dt_terciles": {"p33_years": 1.0, "p67_years": 2.125, "long": s(1, -0.5),
                            "short": s(7, 0.25)},
            "horizons": {"note": "text", "baseline_to_2year": s(9, 0.1)}
        });
        let read = read(&strata);
        let labels: Vec<&str> = read.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["Δt short", "Δt long", "baseline to 2year"]);
        let ranges: Vec<&str> = read.iter().map(|s| s.range.as_str()).collect();
        assert_eq!(ranges, ["≤ 1.00 y", "≥ 2.12 y", ""]);
        let t = table(&read);
        assert!(
            t.contains("Δt long") && t.contains("1*") && t.contains("-0.5000"),
            "{t}"
        );
        assert!(small_warning(&read).unwrap().contains("Δt long (n=1)"));
        assert!(small_warning(&read[..1]).is_none());

        // Every format: csv and json one record per run and stratum, figures as numbers.
        let runs = vec![("a".to_string(), read.clone()), ("b,c".to_string(), read)];
        let csv = render(&runs, Format::Csv).unwrap();
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        let header: Vec<String> = r.headers().unwrap().iter().map(String::from).collect();
        assert_eq!(
            header,
            [
                "run",
                "stratum",
                "range",
                "n",
                "mse",
                "identity_mse",
                "skill",
                "few"
            ]
        );
        let rows: Vec<csv::StringRecord> = r.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 6);
        assert_eq!(&rows[4][0], "b,c");
        assert_eq!(&rows[1][7], "true");
        assert_eq!(rows[1][6].parse::<f64>().unwrap(), -0.5);
        let json: Value = serde_json::from_str(&render(&runs, Format::Json).unwrap()).unwrap();
        assert_eq!(json.as_array().unwrap().len(), 6);
        assert_eq!(json[0]["range"], "≤ 1.00 y");
        let md = render(&runs, Format::Md).unwrap();
        assert!(
            md.starts_with("| run | stratum |") && md.contains("| b,c | Δt long |"),
            "{md}"
        );
        assert!(render(&runs, Format::Table).unwrap().contains("≥ 2.12 y"));
        let empty = render(&[], Format::Csv).unwrap();
        assert!(empty.starts_with("run,stratum,"), "{empty}");
    }
}
