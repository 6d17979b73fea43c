//! The grouped table of `trainer compare` (`--group-by`, `--metric`, `--format`): runs grouped
//! by the values of the keys, each metric's mean, sd, min, max and n per group.
//!
//! Text and Markdown print every number with four significant figures, a column's mean and sd
//! in one style (`0.5028 ± 0.04170`, or `(2.508 ± 0.2542)e-4` when the mean is below 1e-3 or
//! above 1e5); CSV and JSON carry one full-precision numeric column per statistic
//! (`skill_mean`, `skill_sd`, …), never text; their text cells (the keys, the missing runs)
//! are never a spreadsheet formula ([`super::text::csv_cell`]).

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::text::{csv_cell, csv_row};

/// How the grouped table is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Md,
    Csv,
    Json,
}

/// One run as the grouped table sees it: its name, its value of each grouping key, and its
/// value of each metric (`None` while it has no results: named under `missing`).
pub struct Grouping {
    pub name: String,
    pub key: Vec<String>,
    pub values: Option<Vec<Option<f64>>>,
}

/// One metric over one group.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Stats {
    pub mean: f64,
    /// Sample sd (n − 1); `None` below two values.
    pub sd: Option<f64>,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

impl Stats {
    /// The statistics of `v` (`None` when it is empty).
    pub(crate) fn of(v: &[f64]) -> Option<Self> {
        if v.is_empty() {
            return None;
        }
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let sd = (v.len() > 1)
            .then(|| (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt());
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Self {
            mean,
            sd,
            min,
            max,
            n: v.len(),
        })
    }
}

/// A group: its key values, its finished runs' count, each metric's statistics and the names of
/// its runs without results.
pub(crate) struct Group {
    pub key: Vec<String>,
    pub n: usize,
    pub stats: Vec<Option<Stats>>,
    pub missing: Vec<String>,
}

/// The grouped table.
pub struct GroupTable {
    pub keys: Vec<String>,
    pub metrics: Vec<String>,
    pub(crate) groups: Vec<Group>,
}

/// Groups `runs` by their keys, groups in order of their first run (the order of the inputs: a
/// sweep's tasks in the spec's order, then the identity's rows), and gives each metric's
/// statistics over the group's finished runs (their finite values: a cell with fewer says
/// `(n=…)`).
pub fn grouped(keys: &[String], metrics: &[String], runs: &[Grouping]) -> GroupTable {
    /// A group's key, its finished runs (their metric values) and the names of the others.
    type Members<'a> = (&'a [String], Vec<&'a [Option<f64>]>, Vec<String>);
    let mut groups: Vec<Members<'_>> = Vec::new();
    for r in runs {
        let i = match groups.iter().position(|g| g.0 == r.key.as_slice()) {
            Some(i) => i,
            None => {
                groups.push((&r.key, Vec::new(), Vec::new()));
                groups.len() - 1
            }
        };
        match &r.values {
            Some(v) => groups[i].1.push(v),
            None => groups[i].2.push(r.name.clone()),
        }
    }
    let groups = groups
        .into_iter()
        .map(|(key, done, missing)| Group {
            key: key.to_vec(),
            n: done.len(),
            stats: (0..metrics.len())
                .map(|i| {
                    // A non-finite value (a reference run's NaN) is no number to average.
                    let finite = done.iter().filter_map(|v| v[i]).filter(|x| x.is_finite());
                    Stats::of(&finite.collect::<Vec<_>>())
                })
                .collect(),
            missing,
        })
        .collect();
    GroupTable {
        keys: keys.to_vec(),
        metrics: metrics.to_vec(),
        groups,
    }
}

/// `x` with four significant figures: plain between 1e-3 and 1e5, else scientific.
pub fn sig4(x: f64) -> String {
    match exponent(x) {
        Some(e) if !(-3..5).contains(&e) => format!("{x:.3e}"),
        Some(e) => format!("{x:.*}", (3 - e).max(0) as usize),
        None => format!("{x}"),
    }
}

/// The decimal exponent of a finite non-zero `x`.
fn exponent(x: f64) -> Option<i32> {
    (x.is_finite() && x != 0.0).then(|| x.abs().log10().floor() as i32)
}

/// "mean ± sd" in the mean's style: the sd with the mean's decimals, or both scaled by the
/// mean's power of ten; the value alone without an sd (one value).
pub fn mean_sd(mean: f64, sd: Option<f64>) -> String {
    let Some(sd) = sd else {
        return sig4(mean);
    };
    match exponent(mean) {
        Some(e) if !(-3..5).contains(&e) => {
            let scale = 10f64.powi(e);
            format!("({:.3} ± {:.3})e{e}", mean / scale, sd / scale)
        }
        Some(e) => {
            let d = (3 - e).max(0) as usize;
            format!("{mean:.d$} ± {sd:.d$}")
        }
        None => format!("{} ± {}", sig4(mean), sig4(sd)),
    }
}

impl GroupTable {
    /// The text header and rows (table and Markdown).
    fn text(&self) -> (Vec<String>, Vec<Vec<String>>) {
        let mut header = self.keys.clone();
        header.push("n".into());
        for m in &self.metrics {
            header.extend([
                format!("{m} mean ± sd"),
                format!("{m} min"),
                format!("{m} max"),
            ]);
        }
        header.push("missing".into());
        let rows = self
            .groups
            .iter()
            .map(|g| {
                let mut row = g.key.clone();
                row.push(g.n.to_string());
                for s in &g.stats {
                    match s {
                        None => row.extend(["N/A".into(), "N/A".into(), "N/A".into()]),
                        Some(s) => {
                            let of = if s.n < g.n {
                                format!(" (n={})", s.n)
                            } else {
                                String::new()
                            };
                            row.extend([
                                format!("{}{of}", mean_sd(s.mean, s.sd)),
                                sig4(s.min),
                                sig4(s.max),
                            ]);
                        }
                    }
                }
                row.push(g.missing.join(" "));
                row
            })
            .collect();
        (header, rows)
    }

    /// One JSON record per group: the keys by name, n, each metric's statistics as numbers.
    pub fn records(&self) -> Vec<Value> {
        self.groups
            .iter()
            .map(|g| {
                let group: serde_json::Map<String, Value> = self
                    .keys
                    .iter()
                    .cloned()
                    .zip(g.key.iter().map(|v| json!(v)))
                    .collect();
                let mut rec = json!({ "group": group, "n": g.n });
                for (m, s) in self.metrics.iter().zip(&g.stats) {
                    rec[m] = s.map_or(Value::Null, |s| {
                        json!({"mean": s.mean, "sd": s.sd, "min": s.min, "max": s.max, "n": s.n})
                    });
                }
                rec["missing"] = json!(g.missing);
                rec
            })
            .collect()
    }

    /// CSV: the keys, n, then `<metric>_mean`, `_sd`, `_min`, `_max`, `_n` as numbers (empty
    /// where there is none), then the missing runs separated by spaces. The keys and the missing
    /// runs are text cells ([`csv_cell`]: never a spreadsheet formula).
    pub fn csv(&self) -> Result<String> {
        let mut header = self.keys.clone();
        header.push("n".into());
        for m in &self.metrics {
            for stat in ["mean", "sd", "min", "max", "n"] {
                header.push(format!("{m}_{stat}"));
            }
        }
        header.push("missing".into());
        let rows: Vec<Vec<String>> = self
            .groups
            .iter()
            .map(|g| {
                let mut row = csv_row(&g.key);
                row.push(g.n.to_string());
                for s in &g.stats {
                    match s {
                        None => row.extend(std::iter::repeat_n(String::new(), 5)),
                        Some(s) => row.extend([
                            s.mean.to_string(),
                            s.sd.map_or(String::new(), |v| v.to_string()),
                            s.min.to_string(),
                            s.max.to_string(),
                            s.n.to_string(),
                        ]),
                    }
                }
                row.push(csv_cell(&g.missing.join(" ")).into_owned());
                row
            })
            .collect();
        csv_text(&header, &rows)
    }

    /// The table as `f`, on standard output.
    pub fn print(&self, f: Format) -> Result<()> {
        match f {
            Format::Json => println!("{}", serde_json::to_string_pretty(&self.records())?),
            Format::Csv => print!("{}", self.csv()?),
            Format::Md | Format::Table => {
                let (header, rows) = self.text();
                print!("{}", text_table(f, &header, &rows));
            }
        }
        Ok(())
    }
}

/// `header` and `rows` as Markdown (`Format::Md`) or as columns aligned by spaces (any other
/// format), one line each.
pub(crate) fn text_table(f: Format, header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    if f == Format::Md {
        out.push_str(&format!("| {} |\n", header.join(" | ")));
        out.push_str(&format!("|{}\n", " --- |".repeat(header.len())));
        for r in rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        return out;
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| -> String {
        let cells = cells.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}"));
        cells.collect::<Vec<_>>().join("  ").trim_end().to_string()
    };
    out.push_str(&line(header));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out
}

/// `header` and `rows` as CSV (quoted where a cell needs it). The header's cells are text
/// ([`csv_cell`]); a row's text cells are the caller's to pass through [`csv_cell`] (its
/// numeric cells stay numbers).
pub(crate) fn csv_text(header: &[String], rows: &[Vec<String>]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(csv_row(header))?;
    for r in rows {
        w.write_record(r)?;
    }
    let bytes = w.into_inner().context("writing CSV")?;
    String::from_utf8(bytes).context("CSV is UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_pool_finished_runs_and_name_the_missing() {
        let run = |name: &str, key: &str, v: Option<Vec<Option<f64>>>| Grouping {
            name: name.into(),
            key: vec![key.into()],
            values: v,
        };
        let runs = [
            run("a", "x", Some(vec![Some(1.0), None])),
            run("b", "x", Some(vec![Some(3.0), Some(5.0)])),
            run("c", "x", None),
            run("d", "y", Some(vec![Some(2.0), None])),
            run("e", "x", Some(vec![Some(f64::NAN), Some(f64::INFINITY)])),
        ];
        let t = grouped(&["k".into()], &["m".into(), "w".into()], &runs);
        let (header, rows) = t.text();
        assert_eq!(header[..3], ["k", "n", "m mean ± sd"]);
        assert_eq!(rows[0][..3], ["x", "3", "2.000 ± 1.414 (n=2)"]);
        assert_eq!(rows[0][5], "5.000 (n=1)");
        assert_eq!(rows[0].last().unwrap(), "c");
        assert_eq!(rows[1][5], "N/A");
        let records = t.records();
        assert_eq!(records[0]["group"]["k"], "x");
        assert_eq!(records[0]["m"]["n"], 2);
        assert_eq!(records[0]["m"]["sd"], json!(2f64.sqrt()));
        assert!(records[1]["w"].is_null());
    }

    #[test]
    fn numbers_have_four_significant_figures_in_one_style_per_cell() {
        assert_eq!(sig4(0.50283), "0.5028");
        assert_eq!(sig4(24.84891), "24.85");
        assert_eq!(sig4(0.0039), "0.003900");
        assert_eq!(sig4(2.5081e-4), "2.508e-4");
        assert_eq!(sig4(-13370.0), "-13370");
        assert_eq!(sig4(-204_900.0), "-2.049e5");
        assert_eq!(sig4(0.0), "0");
        assert_eq!(mean_sd(0.5886, Some(0.0417)), "0.5886 ± 0.0417");
        assert_eq!(mean_sd(2.508e-4, Some(2.542e-5)), "(2.508 ± 0.254)e-4");
        assert_eq!(mean_sd(-1.337e4, Some(1497.5397)), "-13370 ± 1498");
        assert_eq!(mean_sd(-6.832e5, Some(1.183e5)), "(-6.832 ± 1.183)e5");
        assert_eq!(mean_sd(1.0, None), "1.000");
    }
}
