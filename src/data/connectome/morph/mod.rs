//! Morphology files (docs/clg-ode-model.md §1.2): `Schaefer400_Morphology_<subid>.csv` found recursively under
//! `morph_root`, one header row plus a data row of `<ROI>_<Metric>` columns.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ndarray::Array2;

use super::naming::{infer_session, scan_id};
use super::sc::csv_error;
use super::{ConnectomeError, Result, is_na};

/// File-name prefix of a morphology file.
pub(crate) const MORPH_PREFIX: &str = "Schaefer400_Morphology_";
/// Default metrics, in order.
pub const DEFAULT_METRICS: [&str; 4] = ["Thickness", "Area", "Curv", "GWC"];

/// scanid → morphology file, built from a recursive walk.
#[derive(Debug, Default, Clone)]
pub(crate) struct MorphIndex {
    /// scanid → the first path (in sorted path-string order) for that scanid.
    pub files: HashMap<String, PathBuf>,
    /// The first indexed file in sorted order: ROI and metric order are inferred from it.
    pub first: Option<PathBuf>,
    /// Files with the prefix whose subject id does not start with `sub-` (ignored).
    pub ignored_no_subject: Vec<PathBuf>,
    /// Files whose whole path names no known session (ignored).
    pub ignored_no_session: Vec<PathBuf>,
    /// Later files for a scanid already indexed (ignored).
    pub duplicates: Vec<PathBuf>,
}

/// Walk `root` recursively (symlinked directories are not followed), keep files named
/// `Schaefer400_Morphology_*.csv`, sort by path string, and index them by scanid.
///
/// The session comes from the whole path as built from `root` (so a relative `root` gives
/// relative path strings). Error if `root` cannot be read or no file gets indexed.
pub(crate) fn index_morphology(root: &Path) -> Result<MorphIndex> {
    let mut paths = Vec::new();
    walk(root, &mut paths)?;
    let mut keyed: Vec<(String, PathBuf)> = paths
        .into_iter()
        .map(|p| (p.to_string_lossy().into_owned(), p))
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut index = MorphIndex::default();
    for (text, path) in keyed {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let subject = &name[MORPH_PREFIX.len()..name.len() - ".csv".len()];
        if !subject.starts_with("sub-") {
            index.ignored_no_subject.push(path);
            continue;
        }
        let Some(session) = infer_session(&text) else {
            index.ignored_no_session.push(path);
            continue;
        };
        let id = scan_id(subject, session);
        if index.files.contains_key(&id) {
            index.duplicates.push(path);
            continue;
        }
        if index.first.is_none() {
            index.first = Some(path.clone());
        }
        index.files.insert(id, path);
    }
    if index.files.is_empty() {
        return Err(ConnectomeError::Empty {
            dir: root.to_path_buf(),
            what: format!("morphology file ({MORPH_PREFIX}sub-*.csv under a session directory)"),
        });
    }
    Ok(index)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let io = |err| ConnectomeError::Io {
        path: dir.to_path_buf(),
        err,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let kind = entry.file_type().map_err(io)?;
        let path = entry.path();
        if kind.is_dir() {
            walk(&path, out)?;
            continue;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(MORPH_PREFIX)
            && name.ends_with(".csv")
            && name.len() >= MORPH_PREFIX.len() + ".csv".len()
            && path.is_file()
        {
            out.push(path);
        }
    }
    Ok(())
}

/// The metric a column belongs to: the first metric in `metrics` whose `_<Metric>` is a suffix
/// of the column name; returns (ROI = name without that suffix, metric index).
pub(crate) fn match_column<'c>(column: &'c str, metrics: &[String]) -> Option<(&'c str, usize)> {
    metrics.iter().enumerate().find_map(|(m, metric)| {
        column
            .strip_suffix(metric.as_str())
            .and_then(|rest| rest.strip_suffix('_'))
            .map(|roi| (roi, m))
    })
}

/// ROI and metric order from one header (docs/clg-ode-model.md §1.2): ROIs = the distinct ROI names of matching
/// columns, sorted lexicographically (byte order; **not** the SC atlas order — reference quirk);
/// metrics = `metrics` restricted to those present, in `metrics` order. `SubjectID` is ignored.
pub(crate) fn infer_roi_metric_order(
    columns: &[String],
    metrics: &[String],
) -> (Vec<String>, Vec<String>) {
    let mut rois = std::collections::BTreeSet::new();
    let mut present = vec![false; metrics.len()];
    for column in columns.iter().filter(|c| c.as_str() != "SubjectID") {
        if let Some((roi, m)) = match_column(column, metrics) {
            rois.insert(roi.to_string());
            present[m] = true;
        }
    }
    let metric_order = metrics
        .iter()
        .zip(present)
        .filter(|(_, p)| *p)
        .map(|(m, _)| m.clone())
        .collect();
    (rois.into_iter().collect(), metric_order)
}

/// ROI and metric order of a cohort, inferred once from its first indexed file.
#[derive(Debug, Clone, PartialEq)]
pub struct MorphLayout {
    pub rois: Vec<String>,
    pub metrics: Vec<String>,
    roi_index: HashMap<String, usize>,
}

impl MorphLayout {
    pub fn new(rois: Vec<String>, metrics: Vec<String>) -> Self {
        let roi_index = rois
            .iter()
            .enumerate()
            .map(|(i, r)| (r.clone(), i))
            .collect();
        Self {
            rois,
            metrics,
            roi_index,
        }
    }

    /// Infer the layout from the header of `path` (the first indexed file).
    /// Error if no column matches one of `metrics`.
    pub fn infer(path: &Path, metrics: &[String]) -> Result<Self> {
        let (header, _, _) = read_header_and_first_row(path)?;
        let (rois, metric_order) = infer_roi_metric_order(&header, metrics);
        if rois.is_empty() {
            return Err(ConnectomeError::NoMorphColumns {
                path: path.to_path_buf(),
                metrics: metrics.to_vec(),
            });
        }
        Ok(Self::new(rois, metric_order))
    }

    /// What a file lacks of this layout, in words: per metric, all its columns or the names of
    /// the missing ones.
    pub fn describe_missing(&self, missing: &[(usize, usize)]) -> String {
        let mut parts = Vec::new();
        for (m, metric) in self.metrics.iter().enumerate() {
            let rois: Vec<&str> = missing
                .iter()
                .filter(|(_, mm)| *mm == m)
                .map(|(r, _)| self.rois[*r].as_str())
                .collect();
            if rois.len() == self.rois.len() {
                parts.push(format!("all {} `_{metric}` columns", rois.len()));
            } else if !rois.is_empty() {
                let names: Vec<String> = rois.iter().map(|r| format!("{r}_{metric}")).collect();
                parts.push(names.join(", "));
            }
        }
        parts.join("; ")
    }

    /// (row, column) of a header cell in the `[n_roi × F]` matrix, if it is a known pair.
    pub fn locate(&self, column: &str) -> Option<(usize, usize)> {
        let (roi, m) = match_column(column, &self.metrics)?;
        Some((*self.roi_index.get(roi)?, m))
    }
}

/// A loaded morphology file.
#[derive(Debug, Clone)]
pub struct MorphFile {
    /// `[n_roi × F]` in layout order; missing (ROI, metric) pairs are 0, empty/NA cells NaN.
    pub x: Array2<f32>,
    /// Number of NaN cells (kept as NaN, like the reference).
    pub nan_cells: usize,
    /// False when the file has a header but no data row (then `x` is all zeros).
    pub had_data_row: bool,
    /// (ROI, metric) columns of the layout the file lacks (zero-filled, as the reference).
    pub missing: Vec<(usize, usize)>,
    /// Data rows after the first (not read; the loader names the file).
    pub extra_rows: usize,
}

/// Load one morphology file into `[n_roi × F]` using only its first data row.
///
/// Unknown ROIs/metrics and `SubjectID` are ignored. Errors: unreadable file, no column that
/// maps to a (ROI, metric) of `layout`, a cell that is neither a number nor a missing-value
/// marker (named by line and column).
pub fn load_morph(path: &Path, layout: &MorphLayout) -> Result<MorphFile> {
    let (header, row, extra_rows) = read_header_and_first_row(path)?;
    let mut x = Array2::<f32>::zeros((layout.rois.len(), layout.metrics.len()));
    let targets: Vec<Option<(usize, usize)>> = header.iter().map(|c| layout.locate(c)).collect();
    if targets.iter().all(Option::is_none) {
        return Err(ConnectomeError::NoMorphColumns {
            path: path.to_path_buf(),
            metrics: layout.metrics.clone(),
        });
    }
    let present: std::collections::HashSet<(usize, usize)> =
        targets.iter().flatten().copied().collect();
    let missing = (0..layout.rois.len())
        .flat_map(|r| (0..layout.metrics.len()).map(move |m| (r, m)))
        .filter(|rm| !present.contains(rm))
        .collect();
    let Some((line, row)) = row else {
        return Ok(MorphFile {
            x,
            nan_cells: 0,
            had_data_row: false,
            missing,
            extra_rows,
        });
    };
    let mut nan_cells = 0;
    for (c, target) in targets.iter().enumerate() {
        let Some((r, m)) = *target else { continue };
        // pandas pads short rows with NaN.
        let cell = row.get(c).map_or("", String::as_str);
        let v = if is_na(cell) {
            f32::NAN
        } else {
            cell.trim()
                .parse::<f64>()
                .map_err(|_| ConnectomeError::NonNumeric {
                    path: path.to_path_buf(),
                    line,
                    column: c + 1,
                    value: cell.to_string(),
                })? as f32
        };
        if v.is_nan() {
            nan_cells += 1;
        }
        x[(r, m)] = v;
    }
    Ok(MorphFile {
        x,
        nan_cells,
        had_data_row: true,
        missing,
        extra_rows,
    })
}

/// The header, the first data row with its line, and how many data rows follow it.
type HeaderAndRow = (Vec<String>, Option<(u64, Vec<String>)>, usize);

fn read_header_and_first_row(path: &Path) -> Result<HeaderAndRow> {
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
    let mut record = csv::StringRecord::new();
    let row = if reader
        .read_record(&mut record)
        .map_err(|e| csv_error(path, e))?
    {
        let line = record.position().map_or(2, |p| p.line());
        Some((line, record.iter().map(str::to_string).collect()))
    } else {
        None
    };
    // The rest is counted, not parsed: a malformed later row is not read, as the reference.
    let mut extra = 0;
    while let Ok(true) = reader.read_record(&mut record) {
        if record.iter().any(|c| !c.trim().is_empty()) {
            extra += 1;
        }
    }
    Ok((header, row, extra))
}

#[cfg(test)]
mod tests;
