//! SC matrix files (docs/clg-ode-model.md §1.1): one dense N×N CSV per scan, directly inside `sc_dir`.

use std::path::{Path, PathBuf};

use ndarray::Array2;

use super::naming::{parse_subject_session, scan_id, session_rank};
use super::{ConnectomeError, Result};

/// One SC file and the ids parsed from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScFile {
    pub path: PathBuf,
    pub file_name: String,
    pub subject: String,
    /// Canonical or verbatim session id; may be empty (see [`parse_subject_session`]).
    pub session: String,
    /// `<subject>_<session>` (or `<subject>`): the join key.
    pub scan_id: String,
}

/// All regular files directly inside `dir` whose name ends in `.csv`, sorted by file name.
///
/// Errors: the directory cannot be read, holds no `.csv` file, or a file name yields an empty
/// subject id (e.g. `.csv` or `_ses-x.csv`).
pub(crate) fn list_sc_files(dir: &Path) -> Result<Vec<ScFile>> {
    let io = |err| ConnectomeError::Io {
        path: dir.to_path_buf(),
        err,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if !file_name.ends_with(".csv") || !path.is_file() {
            continue;
        }
        let stem = &file_name[..file_name.len() - ".csv".len()];
        let (subject, session) = parse_subject_session(stem);
        if subject.is_empty() {
            return Err(ConnectomeError::NoSubject { path });
        }
        files.push(ScFile {
            scan_id: scan_id(&subject, &session),
            path,
            file_name,
            subject,
            session,
        });
    }
    if files.is_empty() {
        return Err(ConnectomeError::Empty {
            dir: dir.to_path_buf(),
            what: "SC matrix files (*.csv)".into(),
        });
    }
    files.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    Ok(files)
}

/// Group files into per-subject sequences: subjects sorted by id (byte order), each subject's
/// scans stably sorted by (session rank, session string).
pub(crate) fn group_sequences(files: Vec<ScFile>) -> Vec<(String, Vec<ScFile>)> {
    let mut by_subject: std::collections::BTreeMap<String, Vec<ScFile>> = Default::default();
    for f in files {
        by_subject.entry(f.subject.clone()).or_default().push(f);
    }
    by_subject
        .into_iter()
        .map(|(subject, mut scans)| {
            scans.sort_by(|a, b| {
                (session_rank(&a.session), &a.session).cmp(&(session_rank(&b.session), &b.session))
            });
            (subject, scans)
        })
        .collect()
}

/// Read a dense square matrix of reals (comma separated, no header, no index column) as f32.
///
/// Values are parsed as f64 and rounded to f32 (as numpy reading into float32 does). Rejected,
/// with the file and 1-based line/column in the error: empty files, rows of different lengths,
/// non-square shapes, cells that are not numbers, NaN/±inf (also finite f64 values that
/// overflow f32) and negative weights (an SC weight is a count or a density: `log1p` of a
/// weight below −1 is NaN, and every log-domain metric with it).
pub fn read_sc_matrix(path: &Path) -> Result<Array2<f32>> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(path)
        .map_err(|source| csv_error(path, source))?;
    let mut values: Vec<f32> = Vec::new();
    let mut cols = 0usize;
    let mut rows = 0usize;
    let mut record = csv::StringRecord::new();
    while reader
        .read_record(&mut record)
        .map_err(|source| csv_error(path, source))?
    {
        let line = record.position().map_or(rows as u64 + 1, |p| p.line());
        if rows == 0 {
            cols = record.len();
            // The first row only claims N rows to come: a row of 50 000 commas must not
            // reserve N² values (10 GB) before the file shows them. Grow with what arrives.
            values.reserve(cols);
        } else if record.len() != cols {
            return Err(ConnectomeError::Ragged {
                path: path.to_path_buf(),
                line,
                expected: cols,
                found: record.len(),
            });
        }
        for (c, cell) in record.iter().enumerate() {
            let cell = if rows == 0 && c == 0 {
                cell.trim_start_matches('\u{feff}')
            } else {
                cell
            };
            let parsed: f64 = cell
                .trim()
                .parse()
                .map_err(|_| ConnectomeError::NonNumeric {
                    path: path.to_path_buf(),
                    line,
                    column: c + 1,
                    value: cell.to_string(),
                })?;
            let v = parsed as f32;
            if !v.is_finite() {
                return Err(ConnectomeError::NonFinite {
                    path: path.to_path_buf(),
                    line,
                    column: c + 1,
                    value: cell.to_string(),
                });
            }
            if v < 0.0 {
                return Err(ConnectomeError::Negative {
                    path: path.to_path_buf(),
                    line,
                    column: c + 1,
                    value: cell.to_string(),
                });
            }
            values.push(v);
        }
        rows += 1;
    }
    if rows == 0 {
        return Err(ConnectomeError::EmptyFile {
            path: path.to_path_buf(),
        });
    }
    if rows != cols {
        return Err(ConnectomeError::NotSquare {
            path: path.to_path_buf(),
            rows,
            cols,
        });
    }
    Ok(Array2::from_shape_vec((rows, cols), values).expect("rows*cols values were pushed"))
}

/// Relative tolerance of [`asymmetry`]: `|A[i,j] − A[j,i]|` above this fraction of the larger
/// magnitude is an asymmetric pair (a CSV written from a symmetric f32 matrix round-trips
/// exactly; a float64 one printed to 7 significant digits differs by ≤ 5e-7).
pub(crate) const SYMMETRY_TOLERANCE: f32 = 1e-6;

/// The worst asymmetric pair of a square matrix: 1-based row and column of `A[i,j]` (i < j),
/// its value and the value of `A[j,i]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Asymmetry {
    pub row: usize,
    pub column: usize,
    pub upper: f32,
    pub lower: f32,
    /// Number of pairs (i < j) beyond the tolerance.
    pub pairs: usize,
}

impl std::fmt::Display for Asymmetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not symmetric: {} pair(s) differ by more than {SYMMETRY_TOLERANCE:e} relative, the \
             largest at row {r}, column {c} ({u}) against row {c}, column {r} ({l})",
            self.pairs,
            r = self.row,
            c = self.column,
            u = self.upper,
            l = self.lower,
        )
    }
}

/// The worst pair `(i, j)`, `i < j`, whose values differ by more than [`SYMMETRY_TOLERANCE`]
/// relative (`|a − b| > tol · max(|a|, |b|)`), with the count of such pairs; `None` when the
/// matrix is symmetric within the tolerance.
pub(crate) fn asymmetry(a: ndarray::ArrayView2<f32>) -> Option<Asymmetry> {
    let n = a.nrows().min(a.ncols());
    let mut worst: Option<(f32, Asymmetry)> = None;
    let mut pairs = 0;
    for i in 0..n {
        for j in i + 1..n {
            let (u, l) = (a[(i, j)], a[(j, i)]);
            let diff = (u - l).abs();
            let scale = u.abs().max(l.abs());
            if diff > SYMMETRY_TOLERANCE * scale {
                pairs += 1;
                let rel = diff / scale;
                if worst.as_ref().is_none_or(|(w, _)| rel > *w) {
                    let at = Asymmetry {
                        row: i + 1,
                        column: j + 1,
                        upper: u,
                        lower: l,
                        pairs: 0,
                    };
                    worst = Some((rel, at));
                }
            }
        }
    }
    worst.map(|(_, at)| Asymmetry { pairs, ..at })
}

pub(crate) fn csv_error(path: &Path, source: csv::Error) -> ConnectomeError {
    match source.kind() {
        csv::ErrorKind::Io(_) => match source.into_kind() {
            csv::ErrorKind::Io(source) => ConnectomeError::Io {
                path: path.to_path_buf(),
                err: source,
            },
            _ => unreachable!("kind checked above"),
        },
        _ => ConnectomeError::Csv {
            path: path.to_path_buf(),
            err: source,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::connectome::test_util::write;

    #[test]
    fn reads_square_matrix() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a.csv",
            "\u{feff}0, 1.5,2\n1.5,0,3e-1\r\n2,0.3,-0\n",
        );
        let m = read_sc_matrix(&p).unwrap();
        assert_eq!(m.dim(), (3, 3));
        assert_eq!(m[(0, 1)], 1.5);
        assert_eq!(m[(1, 2)], 0.3);
        assert!(asymmetry(m.view()).is_none());
    }

    #[test]
    fn rejects_bad_matrices() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            (
                "nonsquare.csv",
                "0,1,2\n1,0,2\n",
                "not square (2 rows × 3 columns)",
            ),
            (
                "ragged.csv",
                "0,1\n1\n",
                "line 2 has 1 columns but line 1 has 2",
            ),
            (
                "text.csv",
                "0,1\n1,abc\n",
                "line 2, column 2: \"abc\" is not a number",
            ),
            (
                "empty_cell.csv",
                "0,\n1,0\n",
                "line 1, column 2: \"\" is not a number",
            ),
            (
                "nan.csv",
                "0,nan\n1,0\n",
                "line 1, column 2: \"nan\" is not finite",
            ),
            (
                "inf.csv",
                "0,1\n-inf,0\n",
                "line 2, column 1: \"-inf\" is not finite",
            ),
            ("overflow.csv", "0,1e39\n1,0\n", "\"1e39\" is not finite"),
            (
                "negative.csv",
                "0,1,2\n1,0,3\n2,-3e-1,0\n",
                "line 3, column 2: negative edge weight \"-3e-1\"",
            ),
            ("empty.csv", "", "is empty: expected an N×N matrix"),
        ];
        for (name, text, want) in cases {
            let p = write(dir.path(), name, text);
            let err = read_sc_matrix(&p).unwrap_err().to_string();
            assert!(err.contains(want), "{name}: {err}");
            assert!(
                err.contains(name),
                "{name}: error must name the file: {err}"
            );
        }
        let missing = dir.path().join("missing.csv");
        let err = read_sc_matrix(&missing).unwrap_err().to_string();
        assert!(err.contains("missing.csv"), "{err}");
    }

    #[test]
    fn finds_the_worst_asymmetric_pair() {
        let m = ndarray::array![[0.0f32, 1.0, 2.0], [1.0, 0.0, 3.0], [2.5, 3.000001, 0.0]];
        let a = asymmetry(m.view()).unwrap();
        assert_eq!(
            (a.row, a.column, a.upper, a.lower, a.pairs),
            (1, 3, 2.0, 2.5, 1)
        );
        let text = a.to_string();
        assert!(
            text.contains("row 1, column 3 (2) against row 3, column 1 (2.5)"),
            "{text}"
        );
        // Within the relative tolerance (3 vs 3.000001 is 3.3e-7), and zeros on both sides.
        let m = ndarray::array![[0.0f32, 0.0], [0.0, 0.0]];
        assert!(asymmetry(m.view()).is_none());
        let m = ndarray::array![[0.0f32, 1e-30], [0.0, 0.0]];
        assert_eq!(asymmetry(m.view()).map(|a| a.pairs), Some(1));
    }

    #[test]
    fn lists_and_groups_files() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "sub-B_ses-4YearFollowUpYArm1.csv",
            "sub-B_ses-baselineYear1Arm1.csv",
            "sub-B_ses-zzz.csv",
            "sub-A_ses-2YearFollowUpYArm1.csv",
            "sub-B_ses-aaa.csv",
            "notes.txt",
        ] {
            write(dir.path(), name, "0\n");
        }
        std::fs::create_dir(dir.path().join("dir.csv")).unwrap();
        let files = list_sc_files(dir.path()).unwrap();
        assert_eq!(files.len(), 5);
        let groups = group_sequences(files);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].0, "sub-A");
        let sessions: Vec<_> = groups[1].1.iter().map(|f| f.session.as_str()).collect();
        assert_eq!(
            sessions,
            [
                "ses-baselineYear1Arm1",
                "ses-4YearFollowUpYArm1",
                "ses-aaa",
                "ses-zzz"
            ]
        );
    }

    #[test]
    fn empty_dir_and_empty_subject_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "readme.txt", "x");
        let err = list_sc_files(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no SC matrix files"), "{err}");
        write(dir.path(), "_ses-x.csv", "0\n");
        let err = list_sc_files(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("_ses-x.csv") && err.contains("subject"),
            "{err}"
        );
        let err = list_sc_files(&dir.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nope"), "{err}");
    }
}
