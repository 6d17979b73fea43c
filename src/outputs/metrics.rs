//! Per-epoch metrics, appended to `metrics.csv` and `metrics.jsonl` in the run directory.
//! Each append rewrites the file atomically, so a kill never leaves a torn line.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value};

use crate::files::write_atomic;

/// A metrics row (or part of one): named values, in column order.
pub type Row = Map<String, Value>;

pub struct MetricsFiles {
    csv: PathBuf,
    jsonl: PathBuf,
}

impl MetricsFiles {
    pub fn new(dir: &Path) -> Self {
        Self {
            csv: dir.join("metrics.csv"),
            jsonl: dir.join("metrics.jsonl"),
        }
    }

    /// Rows already written (one JSON object each), in order.
    pub fn rows(&self) -> Result<Vec<Map<String, Value>>> {
        let text = match std::fs::read_to_string(&self.jsonl) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", self.jsonl.display()));
            }
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .map(|(i, l)| match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(m)) => Ok(m),
                _ => bail!(
                    "{}: line {} is not a JSON object",
                    self.jsonl.display(),
                    i + 1
                ),
            })
            .collect()
    }

    /// Appends `row` unless a row with the same values in the `key` columns is there already
    /// (a resumed run re-appends the row its checkpoint carries, in case the process died
    /// between writing the checkpoint and the row).
    pub fn append_unless_present(&self, row: &Map<String, Value>, key: &[String]) -> Result<()> {
        let same = |r: &Map<String, Value>| key.iter().all(|k| r.get(k) == row.get(k));
        if self.rows()?.iter().any(same) {
            return Ok(());
        }
        self.append(row)
    }

    /// Appends one row. Columns come from the row's keys, in order; the CSV header is written
    /// with the first row, and later rows must have the same columns.
    pub fn append(&self, row: &Map<String, Value>) -> Result<()> {
        let line = serde_json::to_string(row)?;
        append_line(&self.jsonl, &line)?;
        let header: Vec<&str> = row.keys().map(String::as_str).collect();
        let values: Vec<String> = row.values().map(csv_cell).collect();
        let existing = std::fs::read_to_string(&self.csv).unwrap_or_default();
        if existing.is_empty() {
            write_atomic(&self.csv, |w| {
                writeln!(w, "{}", header.join(","))?;
                writeln!(w, "{}", values.join(","))?;
                Ok(())
            })
        } else {
            let first = existing.lines().next().unwrap_or("");
            if first != header.join(",") {
                bail!(
                    "{}: existing header `{first}` differs from this run's columns",
                    self.csv.display()
                );
            }
            append_line(&self.csv, &values.join(","))
        }
    }
}

fn csv_cell(v: &Value) -> String {
    match v {
        Value::String(s) if s.contains([',', '"', '\n']) => {
            format!("\"{}\"", s.replace('"', "\"\""))
        }
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn append_line(path: &Path, line: &str) -> Result<()> {
    let mut text = std::fs::read_to_string(path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    write_atomic(path, |w| {
        w.write_all(text.as_bytes())?;
        Ok(())
    })
}
