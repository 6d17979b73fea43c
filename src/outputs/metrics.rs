//! Per-epoch metrics, appended to `metrics.csv` and `metrics.jsonl` in the run directory.
//! Each append rewrites the file atomically, so a kill never leaves a torn line.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::files::write_atomic;

/// `metrics.jsonl`.
pub(crate) const METRICS_JSONL: &str = "metrics.jsonl";
/// `metrics.csv`.
pub(crate) const METRICS_CSV: &str = "metrics.csv";

pub(crate) use super::metrics_row::{MetricsRow, Row, TRAIN_LOSS};

pub(crate) struct MetricsFiles {
    csv: PathBuf,
    jsonl: PathBuf,
}

impl MetricsFiles {
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            csv: dir.join(METRICS_CSV),
            jsonl: dir.join(METRICS_JSONL),
        }
    }

    /// Rows already written (one JSON object each), in order. A torn last line (a process
    /// killed while the file was written outside this program's atomic writes, a full disk) is
    /// dropped with a warning; an unreadable line before the last is an error naming it.
    pub(crate) fn rows(&self) -> Result<Vec<MetricsRow>> {
        let text = match std::fs::read_to_string(&self.jsonl) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", self.jsonl.display()));
            }
        };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let mut rows = Vec::with_capacity(lines.len());
        for (i, l) in lines.iter().enumerate() {
            match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(m)) => rows.push(MetricsRow::from(m)),
                // Cut short (the line ends inside the object): a torn write, only last.
                Err(e) if e.is_eof() && i + 1 == lines.len() => eprintln!(
                    "warning: {}: dropping its last line {}, which ends before its JSON object \
                     does (a torn write); the rows before it are kept",
                    self.jsonl.display(),
                    i + 1
                ),
                Err(e) => bail!(
                    "{}: line {}: not valid JSON ({e}); a value that is not a number is written \
                     null, never NaN or Infinity",
                    self.jsonl.display(),
                    i + 1
                ),
                Ok(_) => bail!(
                    "{}: line {} is not a JSON object",
                    self.jsonl.display(),
                    i + 1
                ),
            }
        }
        Ok(rows)
    }

    /// Appends `row` unless a row with the same values in the `key` columns is there already
    /// (a resumed run re-appends the row its checkpoint carries, in case the process died
    /// between writing the checkpoint and the row).
    pub(crate) fn append_unless_present(&self, row: &MetricsRow, key: &[String]) -> Result<()> {
        let same = |r: &MetricsRow| key.iter().all(|k| r.get(k) == row.get(k));
        if self.rows()?.iter().any(same) {
            return Ok(());
        }
        self.append(row)
    }

    /// Appends one row. Columns come from the row's keys, in order; every row must have the
    /// same columns. Both files are rewritten atomically from the rows read back (so a torn
    /// line is repaired), the JSON lines being the source of the CSV.
    pub(crate) fn append(&self, row: &MetricsRow) -> Result<()> {
        let mut rows = self.rows()?;
        let header: Vec<&str> = row.keys().map(String::as_str).collect();
        if let Some(first) = rows.first() {
            let existing: Vec<&str> = first.keys().map(String::as_str).collect();
            if existing != header {
                bail!(
                    "{}: existing columns `{}` differ from this run's `{}`",
                    self.jsonl.display(),
                    existing.join(","),
                    header.join(",")
                );
            }
        }
        rows.push(row.clone());
        write_atomic(&self.jsonl, |w| {
            for r in &rows {
                writeln!(w, "{}", serde_json::to_string(r)?)?;
            }
            Ok(())
        })?;
        write_atomic(&self.csv, |w| {
            writeln!(w, "{}", header.join(","))?;
            for r in &rows {
                let values: Vec<String> = r.values().map(csv_cell).collect();
                writeln!(w, "{}", values.join(","))?;
            }
            Ok(())
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_last_line_is_torn_but_a_nan_literal_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        let files = MetricsFiles::new(t.path());
        let path = t.path().join(METRICS_JSONL);
        std::fs::write(&path, "{\"epoch\": 1}\n{\"epoch\": 2, \"lo").unwrap();
        assert_eq!(files.rows().unwrap().len(), 1);
        std::fs::write(&path, "{\"epoch\": 1}\n{\"epoch\": 2, \"loss\": NaN}\n").unwrap();
        let e = files.rows().unwrap_err().to_string();
        assert!(
            e.contains("line 2: not valid JSON") && e.contains("null"),
            "{e}"
        );
    }
}
