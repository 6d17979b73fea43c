//! The subject table `subject_info_sc.csv` (docs/clg-ode-model.md §1.3).

use std::collections::HashMap;
use std::path::Path;

use super::sc::csv_error;
use super::{ConnectomeError, Result, is_na};

/// Sex vocabulary size: 0 unknown, 1 male, 2 female.
pub(crate) const SEX_VOCAB: usize = 3;

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ScanInfo {
    /// Age in years; NaN when empty or unparsable.
    pub age: f64,
    /// 0 unknown, 1 male, 2 female.
    pub sex: usize,
    /// 1..=K for the K distinct sites of the whole table, 0 unknown.
    pub site: usize,
    /// ICV (or TIV) when the table has such a column; NaN otherwise.
    pub icv: f64,
}

/// The parsed table, keyed by `scanid`.
#[derive(Debug, Clone, Default)]
pub struct SubjectTable {
    pub(crate) rows: HashMap<String, ScanInfo>,
    /// Distinct non-missing `siteid` strings, sorted; site id i+1 ↔ `sites[i]`.
    pub sites: Vec<String>,
    /// scanids that occur on more than one row, with those rows' line numbers (the last row
    /// wins, as a dict built row by row).
    pub duplicate_scan_ids: Vec<String>,
    /// Age cells that are not numbers (nor a missing-value marker): `line N (scanid): "cell"`.
    /// Their age is NaN (then the visit index), as the reference's coercion.
    pub unparsable_ages: Vec<String>,
    /// Rows skipped because their `scanid` is empty.
    pub rows_without_scanid: usize,
    /// The 1-based line of each scanid's row (the last one, which wins).
    pub lines: HashMap<String, u64>,
}

impl SubjectTable {
    /// Site vocabulary size K + 1 (K = distinct sites in the whole table).
    pub fn site_vocab(&self) -> usize {
        self.sites.len() + 1
    }
}

/// Sex id of a cell: trimmed, lower-cased `m`/`male`/`1` → 1, `f`/`female`/`2` → 2, else 0.
/// (`1.0` → 0, as in the reference; unlike pandas we never turn an integer column into
/// floats because of a missing value, so a literal `1` always maps to 1.)
pub(crate) fn sex_id(cell: &str) -> usize {
    match cell.trim().to_lowercase().as_str() {
        "m" | "male" | "1" => 1,
        "f" | "female" | "2" => 2,
        _ => 0,
    }
}

/// Read the table. Only `scanid` is required; `age`, `sex`, `siteid` (case-sensitive) and
/// `icv` or else `tiv` (case-insensitive) are used when present, other columns are ignored.
///
/// Site strings are taken verbatim (trimmed); pandas would print a numeric site column with
/// missing values as `1.0`, `2.0`, …, which changes only the names, not the id order.
pub fn read_subject_table(path: &Path) -> Result<SubjectTable> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .from_path(path)
        .map_err(|e| csv_error(path, e))?;
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| csv_error(path, e))?
        .iter()
        .map(|h| h.trim_start_matches('\u{feff}').to_string())
        .collect();
    let find = |name: &str| header.iter().position(|h| h == name);
    let find_ci = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
    let scanid_col = find("scanid").ok_or_else(|| ConnectomeError::MissingColumn {
        path: path.to_path_buf(),
        column: "scanid".into(),
    })?;
    let (age_col, sex_col, site_col) = (find("age"), find("sex"), find("siteid"));
    // Without ages every Δt would silently be the visit index: a missing column is an error.
    if age_col.is_none() {
        return Err(ConnectomeError::MissingColumn {
            path: path.to_path_buf(),
            column: "age".into(),
        });
    }
    let icv_col = find_ci("icv").or_else(|| find_ci("tiv"));

    let mut raw: Vec<(String, f64, usize, Option<String>, f64, u64)> = Vec::new();
    let mut table = SubjectTable::default();
    // Sites of the whole table, rows without a scanid included.
    let mut sites: Vec<String> = Vec::new();
    let mut record = csv::StringRecord::new();
    while reader
        .read_record(&mut record)
        .map_err(|e| csv_error(path, e))?
    {
        let cell = |col: Option<usize>| col.and_then(|c| record.get(c)).unwrap_or("");
        let site = cell(site_col).trim();
        let site = (!is_na(site)).then(|| site.to_string());
        if let Some(site) = &site {
            sites.push(site.clone());
        }
        let scanid = cell(Some(scanid_col)).trim();
        if is_na(scanid) {
            table.rows_without_scanid += 1;
            continue;
        }
        let line = record.position().map_or(0, |p| p.line());
        let age = parse_float(cell(age_col));
        if age < 0.0 {
            return Err(ConnectomeError::NegativeAge {
                path: path.to_path_buf(),
                line,
                scan_id: scanid.to_string(),
                value: cell(age_col).trim().to_string(),
            });
        }
        if age.is_nan() && !is_na(cell(age_col)) {
            table
                .unparsable_ages
                .push(format!("line {line} ({scanid}): \"{}\"", cell(age_col)));
        }
        raw.push((
            scanid.to_string(),
            age,
            sex_id(cell(sex_col)),
            site,
            parse_float(cell(icv_col)),
            line,
        ));
    }
    sites.sort();
    sites.dedup();
    let mut lines: HashMap<String, Vec<u64>> = HashMap::new();
    for (scanid, age, sex, site, icv, line) in raw {
        let site = site.map_or(0, |s| sites.binary_search(&s).map_or(0, |i| i + 1));
        let info = ScanInfo {
            age,
            sex,
            site,
            icv,
        };
        lines.entry(scanid.clone()).or_default().push(line);
        table.lines.insert(scanid.clone(), line);
        table.rows.insert(scanid, info);
    }
    let mut duplicates: Vec<(u64, String)> = lines
        .into_iter()
        .filter(|(_, l)| l.len() > 1)
        .map(|(id, l)| {
            let rows: Vec<String> = l.iter().map(u64::to_string).collect();
            (
                l[0],
                format!("{id} (lines {}; the last wins)", rows.join(", ")),
            )
        })
        .collect();
    duplicates.sort();
    table.duplicate_scan_ids = duplicates.into_iter().map(|(_, d)| d).collect();
    table.sites = sites;
    Ok(table)
}

/// Float of a cell, NaN when missing or unparsable (like `float()` after pandas' NA handling).
fn parse_float(cell: &str) -> f64 {
    if is_na(cell) {
        f64::NAN
    } else {
        cell.trim().parse().unwrap_or(f64::NAN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::connectome::test_util::write;

    #[test]
    fn sex_encoding() {
        for (cell, want) in [
            ("M", 1),
            (" male ", 1),
            ("1", 1),
            ("F", 2),
            ("Female", 2),
            ("2", 2),
            ("1.0", 0),
            ("", 0),
            ("NaN", 0),
            ("x", 0),
        ] {
            assert_eq!(sex_id(cell), want, "{cell:?}");
        }
    }

    #[test]
    fn reads_table() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "subject_info_sc.csv",
            "subid,scanid,age,sex,siteid,ICV\n\
             A,sub-A_ses-baselineYear1Arm1,9.5,M,site10,1500000\n\
             A,sub-A_ses-2YearFollowUpYArm1,abc,,site02,\n\
             B,,10,F,site99,1\n\
             C,sub-C_ses-baselineYear1Arm1,10.25,female,,1e6\n\
             C,sub-C_ses-baselineYear1Arm1,11,female,site02,1e6\n\
             D,sub-D\n",
        );
        let t = read_subject_table(&p).unwrap();
        // Sites of the whole table, sorted as strings, including the skipped row's.
        assert_eq!(t.sites, ["site02", "site10", "site99"]);
        assert_eq!(t.site_vocab(), 4);
        assert_eq!(t.rows_without_scanid, 1);
        assert_eq!(
            t.duplicate_scan_ids,
            ["sub-C_ses-baselineYear1Arm1 (lines 5, 6; the last wins)"]
        );
        assert_eq!(
            t.unparsable_ages,
            ["line 3 (sub-A_ses-2YearFollowUpYArm1): \"abc\""]
        );
        // Without an age column: an error naming the column.
        let p = write(
            dir.path(),
            "no_age.csv",
            "scanid,sex
sub-A,M
",
        );
        let err = read_subject_table(&p).unwrap_err().to_string();
        assert!(err.contains("no_age.csv") && err.contains("age"), "{err}");
        let a = t.rows["sub-A_ses-baselineYear1Arm1"];
        assert_eq!((a.age, a.sex, a.site, a.icv), (9.5, 1, 2, 1.5e6));
        let a2 = t.rows["sub-A_ses-2YearFollowUpYArm1"];
        assert!(a2.age.is_nan() && a2.icv.is_nan());
        assert_eq!((a2.sex, a2.site), (0, 1));
        assert_eq!(t.rows["sub-C_ses-baselineYear1Arm1"].age, 11.0);
        let d = t.rows["sub-D"];
        assert!(d.age.is_nan());
        assert_eq!((d.sex, d.site), (0, 0));
        // The winning row's line of each scanid.
        assert_eq!(t.lines["sub-C_ses-baselineYear1Arm1"], 6);
        assert_eq!(t.lines["sub-D"], 7);
    }

    #[test]
    fn negative_age_is_an_error_naming_file_line_and_scan() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "ages.csv",
            "scanid,age\nsub-A_ses-baselineYear1Arm1,0\nsub-A_ses-2YearFollowUpYArm1, -2.5\n",
        );
        let err = read_subject_table(&p).unwrap_err().to_string();
        for needle in [
            "ages.csv",
            "line 3",
            "sub-A_ses-2YearFollowUpYArm1",
            "\"-2.5\"",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }

    #[test]
    fn missing_scanid_column_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "t.csv", "subid,age\nA,1\n");
        let err = read_subject_table(&p).unwrap_err().to_string();
        assert!(err.contains("t.csv") && err.contains("\"scanid\""), "{err}");
        let err = read_subject_table(&dir.path().join("none.csv"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("none.csv"), "{err}");
    }
}
