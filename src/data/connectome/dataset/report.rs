//! What the loader dropped, patched or ignored, said once at the end of loading.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What the loader dropped, patched or ignored (the reference does these silently).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct LoadReport {
    /// The SC directory (`--sc-dir`), named by the cohort-wide warnings.
    pub sc_dir: PathBuf,
    pub sc_files: usize,
    /// SC files that are not symmetric within `sc::SYMMETRY_TOLERANCE` (relative): file, the
    /// worst pair. Symmetrised as `(A + Aᵀ)/2`, as the reference does.
    pub sc_asymmetric: Vec<(PathBuf, String)>,
    /// SC file names whose session is empty or not one of the four canonical ids. They are kept
    /// (rank 999, sorted after the canonical visits), as in the reference; an empty session
    /// gives the scanid `<subject>` which no morphology file can match.
    pub non_canonical_sessions: Vec<String>,
    /// scanids that more than one SC file maps to (all are kept, sharing morphology and age;
    /// with an age from the subject table that is an error, the second visit not being older).
    pub duplicate_sc_scan_ids: Vec<String>,
    pub morph_files_indexed: usize,
    pub morph_ignored_no_subject: Vec<PathBuf>,
    pub morph_ignored_no_session: Vec<PathBuf>,
    pub morph_duplicates: Vec<PathBuf>,
    /// The file the ROI/metric order was inferred from.
    pub morph_layout_file: PathBuf,
    /// ROIs of the layout beyond N, dropped (reference: rows beyond max_nodes are truncated).
    pub morph_rois_truncated: usize,
    /// Scans without a morphology file: dropped (require_morph) or given zero morphology.
    pub scans_without_morph: Vec<String>,
    /// Subjects left with no scan after dropping, hence dropped.
    pub subjects_dropped: Vec<String>,
    /// Morphology files with a header but no data row (all-zero morphology).
    pub morph_files_without_data: Vec<PathBuf>,
    /// NaN morphology cells kept as NaN (they make the fold statistics NaN).
    pub morph_nan_cells: usize,
    /// The files those cells are in, with their count.
    #[serde(default)]
    pub morph_nan_files: Vec<(PathBuf, usize)>,
    /// Morphology files with more than one data row: the first is used, as the reference.
    #[serde(default)]
    pub morph_files_with_extra_rows: Vec<(PathBuf, usize)>,
    /// Kept scans absent from the subject table: age = visit index, sex/site unknown.
    pub scans_not_in_table: Vec<String>,
    /// No subject table was given (the baselines run the reference's way): every scan is
    /// "not in the table", said in one line instead of one per scan.
    #[serde(default)]
    pub no_subject_table: bool,
    /// Kept scans whose table age is missing or unparsable: age = visit index.
    pub ages_not_finite: Vec<String>,
    pub table_duplicate_scan_ids: Vec<String>,
    /// Age cells of the subject table that are not numbers (`line N (scanid): "cell"`).
    pub table_unparsable_ages: Vec<String>,
    /// Morphology files lacking columns of the layout (zero-filled): file, what it lacks.
    pub morph_missing_columns: Vec<(PathBuf, String)>,
    pub table_rows_without_scanid: usize,
    /// Subjects whose visits take some ages from the table and others from the visit index
    /// (`<subject>: …`): Δt between the two kinds is meaningless (the reference does the same).
    pub subjects_mixing_ages: Vec<String>,
    /// Subjects with two scans or more (with none, nothing is forecast).
    pub subjects_with_two_scans: usize,
    pub n_subjects: usize,
    pub n_scans: usize,
}

impl LoadReport {
    /// One warning per affected file or row, for what the reference tolerates and the port
    /// keeps (docs/guide/gnn.md, "Input formats": which defects are errors and which are warnings).
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.n_subjects > 0 && self.subjects_with_two_scans == 0 {
            out.push(format!(
                "{}: no subject has two scans: nothing can be forecast (only each visit's \
                 reconstruction trains, as in the reference; the forecast losses are undefined \
                 and the test metrics score visit 0's reconstruction, not a forecast)",
                self.sc_dir.display()
            ));
        }
        for (file, what) in &self.sc_asymmetric {
            out.push(format!(
                "{}: {what}; symmetrised as (A + Aᵀ)/2, as the reference",
                file.display()
            ));
        }
        for s in &self.subjects_mixing_ages {
            out.push(format!(
                "subject {s}: Δt between a table age and a visit index is meaningless (fill in \
                 the missing ages)"
            ));
        }
        for (file, what) in &self.morph_missing_columns {
            out.push(format!(
                "{}: lacks {what} (zero-filled, as the reference)",
                file.display()
            ));
        }
        for d in &self.table_duplicate_scan_ids {
            out.push(format!("subject table: scanid {d}"));
        }
        for a in &self.table_unparsable_ages {
            out.push(format!(
                "subject table: age is not a number at {a}; that scan's age is its visit index"
            ));
        }
        for s in &self.ages_not_finite {
            out.push(format!(
                "scan {s}: no usable age in the subject table; its age is its visit index"
            ));
        }
        if self.no_subject_table {
            if !self.scans_not_in_table.is_empty() {
                out.push(format!(
                    "no subject table (--subject-info-csv): the {} scans' ages are their visit \
                     indices, sex and site unknown (as the reference's baseline scripts, which \
                     read none)",
                    self.scans_not_in_table.len()
                ));
            }
        } else {
            for s in &self.scans_not_in_table {
                out.push(format!(
                    "scan {s}: not in the subject table; age = visit index, sex and site unknown"
                ));
            }
        }
        for f in &self.morph_files_without_data {
            out.push(format!(
                "{}: no data row; the scan's morphology is all zeros",
                f.display()
            ));
        }
        for (f, n) in &self.morph_nan_files {
            out.push(format!(
                "{}: {n} empty or NA cell(s), kept as NaN as the reference: the fold \
                 normalisation of a model that reads morphology (clg-ode) becomes NaN",
                f.display()
            ));
        }
        for (f, n) in &self.morph_files_with_extra_rows {
            out.push(format!(
                "{}: {} data rows; only the first is read, as the reference",
                f.display(),
                n + 1
            ));
        }
        for f in &self.morph_duplicates {
            out.push(format!(
                "{}: a second morphology file for the same scan; ignored",
                f.display()
            ));
        }
        for f in self
            .morph_ignored_no_subject
            .iter()
            .chain(&self.morph_ignored_no_session)
        {
            out.push(format!(
                "{}: no subject or session in its path; ignored",
                f.display()
            ));
        }
        if self.morph_rois_truncated > 0 {
            out.push(format!(
                "{}: {} morphology ROI(s) beyond the {} SC nodes dropped, as the reference",
                self.morph_layout_file.display(),
                self.morph_rois_truncated,
                "N"
            ));
        }
        for s in &self.scans_without_morph {
            out.push(format!("scan {s}: no morphology file"));
        }
        for s in &self.subjects_dropped {
            out.push(format!("subject {s}: no scan left after dropping; dropped"));
        }
        for s in &self.non_canonical_sessions {
            out.push(format!(
                "SC file {s}: a session that is not one of the four canonical ids (kept, \
                 sorted last, as the reference)"
            ));
        }
        for s in &self.duplicate_sc_scan_ids {
            out.push(format!("scanid {s}: more than one SC file (all kept)"));
        }
        if self.table_rows_without_scanid > 0 {
            out.push(format!(
                "subject table: {} row(s) without a scanid; ignored",
                self.table_rows_without_scanid
            ));
        }
        out
    }

    /// The first `max` of [`Self::warnings`], then one line saying how many more the log has
    /// (for `run_meta.json`: a cohort of thousands of scans must not fill it).
    pub(crate) fn warnings_capped(&self, max: usize) -> Vec<String> {
        let mut all = self.warnings();
        if all.len() > max {
            let more = all.len() - max;
            all.truncate(max);
            all.push(format!("… and {more} more (see the run's log)"));
        }
        all
    }

    /// How many of each defect, for `run_meta.json`.
    pub(crate) fn counts(&self) -> serde_json::Value {
        serde_json::json!({
            "sc_asymmetric": self.sc_asymmetric.len(),
            "subjects_mixing_ages": self.subjects_mixing_ages.len(),
            "subjects_with_two_scans": self.subjects_with_two_scans,
            "morph_files_missing_columns": self.morph_missing_columns.len(),
            "morph_files_without_data": self.morph_files_without_data.len(),
            "morph_nan_cells": self.morph_nan_cells,
            "morph_files_with_nan": self.morph_nan_files.len(),
            "morph_files_with_extra_rows": self.morph_files_with_extra_rows.len(),
            "morph_ignored": self.morph_ignored_no_subject.len() + self.morph_ignored_no_session.len(),
            "non_canonical_sessions": self.non_canonical_sessions.len(),
            "duplicate_sc_scan_ids": self.duplicate_sc_scan_ids.len(),
            "morph_rois_truncated": self.morph_rois_truncated,
            "morph_duplicates": self.morph_duplicates.len(),
            "scans_without_morph": self.scans_without_morph.len(),
            "scans_not_in_table": self.scans_not_in_table.len(),
            "ages_not_finite": self.ages_not_finite.len(),
            "table_unparsable_ages": self.table_unparsable_ages.len(),
            "table_duplicate_scan_ids": self.table_duplicate_scan_ids.len(),
            "table_rows_without_scanid": self.table_rows_without_scanid,
            "subjects_dropped": self.subjects_dropped.len(),
        })
    }
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} subjects, {} scans from {} SC files; morphology: {} indexed ({} ignored, {} duplicates)",
            self.n_subjects,
            self.n_scans,
            self.sc_files,
            self.morph_files_indexed,
            self.morph_ignored_no_subject.len() + self.morph_ignored_no_session.len(),
            self.morph_duplicates.len()
        )?;
        let notes = [
            (self.scans_without_morph.len(), "scans without morphology"),
            (
                self.subjects_dropped.len(),
                "subjects dropped (no scan left)",
            ),
            (
                self.non_canonical_sessions.len(),
                "SC files with a non-canonical session",
            ),
            (self.duplicate_sc_scan_ids.len(), "duplicate SC scan ids"),
            (
                self.sc_asymmetric.len(),
                "asymmetric SC matrices (symmetrised)",
            ),
            (
                self.subjects_mixing_ages.len(),
                "subjects mixing table ages and visit indices",
            ),
            (
                self.scans_not_in_table.len(),
                "scans missing from the subject table (age = visit index)",
            ),
            (
                self.ages_not_finite.len(),
                "scans without a usable age (age = visit index)",
            ),
            (
                self.morph_files_without_data.len(),
                "morphology files without a data row",
            ),
            (self.morph_nan_cells, "NaN morphology cells"),
            (
                self.morph_rois_truncated,
                "morphology ROIs beyond N truncated",
            ),
            (
                self.table_duplicate_scan_ids.len(),
                "duplicate scanids in the subject table",
            ),
            (
                self.morph_missing_columns.len(),
                "morphology files lacking columns (zero-filled)",
            ),
        ];
        for (n, what) in notes {
            if n > 0 {
                write!(f, "; {n} {what}")?;
            }
        }
        Ok(())
    }
}
