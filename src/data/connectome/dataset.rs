//! The assembled cohort (spec §1): per subject its ordered scans with SC, morphology, age and
//! covariates, plus the per-fold normalisation statistics (§1.4).

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, s};
use serde::{Deserialize, Serialize};

use super::morph::{DEFAULT_METRICS, MorphLayout, index_morphology, load_morph};
use super::naming::{UNKNOWN_SESSION_RANK, session_rank};
use super::preprocess::{ecc, preprocess, strengths};
use super::sc::{ScFile, group_sequences, list_sc_files, read_sc_matrix};
use super::subjects::{SEX_VOCAB, ScanInfo, read_subject_table};
use super::{ConnectomeError, Result, par_map};

/// The three inputs of a cohort (`--sc_dir`, `--morph_root`, `--subject_info_csv`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CohortPaths {
    pub sc_dir: PathBuf,
    pub morph_root: PathBuf,
    pub subject_info_csv: PathBuf,
}

impl CohortPaths {
    /// The layout written by [`super::write_synthetic_cohort`]: `<root>/sc`, `<root>/morph`,
    /// `<root>/subject_info_sc.csv`.
    pub fn under(root: &Path) -> Self {
        Self {
            sc_dir: root.join("sc"),
            morph_root: root.join("morph"),
            subject_info_csv: root.join("subject_info_sc.csv"),
        }
    }
}

/// Loader settings (reference defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadOptions {
    /// ECC bins of the covariate (32).
    pub topo_bins: usize,
    /// Drop SC scans without a morphology file (true). When false they get all-zero morphology.
    pub require_morph: bool,
    /// Morphology metrics, in order (Thickness, Area, Curv, GWC).
    pub metrics: Vec<String>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            topo_bins: 32,
            require_morph: true,
            metrics: DEFAULT_METRICS.iter().map(|m| m.to_string()).collect(),
        }
    }
}

/// One scan (visit) of a subject, preprocessed. Holds two N×N f32 matrices (1.25 MiB at
/// N = 400), so a cohort of 10 000 scans needs about 12.5 GiB.
#[derive(Debug, Clone)]
pub struct Scan {
    pub scan_id: String,
    pub session: String,
    pub sc_path: PathBuf,
    pub morph_path: Option<PathBuf>,
    /// Symmetrised SC with zero diagonal, N×N.
    pub a_raw: Array2<f32>,
    /// `log1p(a_raw)`, the model input and regression domain.
    pub a_log: Array2<f32>,
    /// Morphology, N×F, un-normalised (row r = r-th ROI in lexicographic order).
    pub x: Array2<f32>,
    /// Years (table value), or the visit index when the table has none (see `age_from_table`).
    pub age: f64,
    pub age_from_table: bool,
    /// ICV/TIV from the table, NaN if absent.
    pub icv: f64,
    pub s: f64,
    pub s_mean: f64,
    /// ECC of `a_log` with `topo_bins` bins (raw, not z-scored).
    pub ecc: Array1<f64>,
}

impl Scan {
    /// The model's numeric covariates for this visit: `[age, s, s_mean?, z-scored ECC…]`
    /// (35 values by default; `s_mean` left out with `include_s_mean = false`).
    pub fn numeric_covariates(&self, z_ecc: ArrayView1<f32>, include_s_mean: bool) -> Vec<f32> {
        let mut v = vec![self.age as f32, self.s as f32];
        if include_s_mean {
            v.push(self.s_mean as f32);
        }
        v.extend(z_ecc.iter().copied());
        v
    }
}

/// A subject and its ordered scans (at least one).
#[derive(Debug, Clone)]
pub struct Subject {
    pub id: String,
    /// First non-zero sex id along the scans (0 unknown, 1 male, 2 female).
    pub sex: usize,
    /// First non-zero site id along the scans (0 unknown, else 1..=K).
    pub site: usize,
    pub scans: Vec<Scan>,
}

/// A loaded cohort: subjects sorted by id, the shared node count and vocabularies.
#[derive(Debug, Clone)]
pub struct Cohort {
    pub subjects: Vec<Subject>,
    /// N, the node count of the first loaded SC file (every file must match).
    pub n_nodes: usize,
    /// Morphology ROI names of rows 0..N (lexicographic order, reference quirk).
    pub rois: Vec<String>,
    /// Morphology metrics present, F = `metrics.len()`.
    pub metrics: Vec<String>,
    pub topo_bins: usize,
    /// 3.
    pub sex_vocab: usize,
    /// K + 1, K = distinct sites of the whole subject table.
    pub site_vocab: usize,
    /// Site names; id i+1 ↔ `sites[i]`.
    pub sites: Vec<String>,
}

/// What the loader dropped, patched or ignored (the reference does these silently).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LoadReport {
    pub sc_files: usize,
    /// SC file names whose session is empty or not one of the four canonical ids. They are kept
    /// (rank 999, sorted after the canonical visits), as in the reference; an empty session
    /// gives the scanid `<subject>` which no morphology file can match.
    pub non_canonical_sessions: Vec<String>,
    /// scanids that more than one SC file maps to (all are kept, sharing morphology and age).
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
    /// Kept scans absent from the subject table: age = visit index, sex/site unknown.
    pub scans_not_in_table: Vec<String>,
    /// Kept scans whose table age is missing or unparsable: age = visit index.
    pub ages_not_finite: Vec<String>,
    pub table_duplicate_scan_ids: Vec<String>,
    pub table_rows_without_scanid: usize,
    pub n_subjects: usize,
    pub n_scans: usize,
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
        ];
        for (n, what) in notes {
            if n > 0 {
                write!(f, "; {n} {what}")?;
            }
        }
        Ok(())
    }
}

struct Job {
    file: ScFile,
    morph: Option<PathBuf>,
}

struct Loaded {
    a_raw: Array2<f32>,
    a_log: Array2<f32>,
    s: f64,
    s_mean: f64,
    ecc: Array1<f64>,
    x: Option<super::morph::MorphFile>,
}

/// Load a cohort from its three inputs (spec §1), reading files on all cores.
///
/// Errors (each naming the file): unreadable/empty inputs, malformed SC matrices, SC files
/// whose size differs from the first loaded one, morphology files without a usable column or
/// with non-numeric cells, fewer morphology ROIs than SC nodes, a subject table without
/// `scanid`, or no subject left. Everything the reference drops or patches silently is listed in
/// the returned [`LoadReport`].
pub fn load_cohort(paths: &CohortPaths, opts: &LoadOptions) -> Result<(Cohort, LoadReport)> {
    let mut report = LoadReport::default();
    let files = list_sc_files(&paths.sc_dir)?;
    report.sc_files = files.len();
    let mut seen = HashSet::new();
    for f in &files {
        if session_rank(&f.session) == UNKNOWN_SESSION_RANK {
            report.non_canonical_sessions.push(f.file_name.clone());
        }
        if !seen.insert(f.scan_id.clone()) {
            report.duplicate_sc_scan_ids.push(f.scan_id.clone());
        }
    }

    let index = index_morphology(&paths.morph_root)?;
    report.morph_files_indexed = index.files.len();
    report.morph_ignored_no_subject = index.ignored_no_subject.clone();
    report.morph_ignored_no_session = index.ignored_no_session.clone();
    report.morph_duplicates = index.duplicates.clone();
    let layout_file = index
        .first
        .clone()
        .expect("index_morphology errors when empty");
    let layout = MorphLayout::infer(&layout_file, &opts.metrics)?;
    report.morph_layout_file = layout_file.clone();

    let table = read_subject_table(&paths.subject_info_csv)?;
    report.table_duplicate_scan_ids = table.duplicate_scan_ids.clone();
    report.table_rows_without_scanid = table.rows_without_scanid;

    // Sequences, dropping scans without morphology (and subjects left empty).
    let mut plan: Vec<(String, usize)> = Vec::new(); // (subject, number of jobs)
    let mut jobs = Vec::new();
    for (subject, scans) in group_sequences(files) {
        let before = jobs.len();
        for file in scans {
            let morph = index.files.get(&file.scan_id).cloned();
            if morph.is_none() {
                report.scans_without_morph.push(file.scan_id.clone());
                if opts.require_morph {
                    continue;
                }
            }
            jobs.push(Job { file, morph });
        }
        if jobs.len() == before {
            report.subjects_dropped.push(subject);
        } else {
            plan.push((subject, jobs.len() - before));
        }
    }
    if jobs.is_empty() {
        return Err(ConnectomeError::NothingLeft {
            dropped: report.scans_without_morph.len(),
        });
    }

    let topo_bins = opts.topo_bins;
    let loaded = par_map(&jobs, |job| -> Result<Loaded> {
        let a = read_sc_matrix(&job.file.path)?;
        let (a_raw, a_log) = preprocess(a.view());
        let (s, s_mean) = strengths(a_raw.view());
        let ecc = ecc(a_log.view(), topo_bins);
        let x = job
            .morph
            .as_deref()
            .map(|p| load_morph(p, &layout))
            .transpose()?;
        Ok(Loaded {
            a_raw,
            a_log,
            s,
            s_mean,
            ecc,
            x,
        })
    });
    let loaded: Vec<Loaded> = loaded.into_iter().collect::<Result<_>>()?;

    let n_nodes = loaded[0].a_raw.nrows();
    for (job, l) in jobs.iter().zip(&loaded) {
        if l.a_raw.nrows() != n_nodes {
            return Err(ConnectomeError::NodeCountMismatch {
                path: job.file.path.clone(),
                found: l.a_raw.nrows(),
                first: jobs[0].file.path.clone(),
                expected: n_nodes,
            });
        }
    }
    if layout.rois.len() < n_nodes {
        return Err(ConnectomeError::TooFewRois {
            path: layout_file,
            n_rois: layout.rois.len(),
            n_nodes,
        });
    }
    report.morph_rois_truncated = layout.rois.len() - n_nodes;
    let n_metrics = layout.metrics.len();
    let vol_metrics: Vec<usize> = (0..n_metrics)
        .filter(|&m| layout.metrics[m].to_lowercase().contains("vol"))
        .collect();

    let mut jobs = jobs.into_iter().zip(loaded);
    let mut subjects = Vec::with_capacity(plan.len());
    for (id, n_jobs) in plan {
        let mut scans = Vec::with_capacity(n_jobs);
        let (mut sex, mut site) = (0, 0);
        for (visit, (job, l)) in jobs.by_ref().take(n_jobs).enumerate() {
            let info = table.rows.get(&job.file.scan_id).copied();
            let info = info.unwrap_or_else(|| {
                report.scans_not_in_table.push(job.file.scan_id.clone());
                ScanInfo {
                    age: f64::NAN,
                    sex: 0,
                    site: 0,
                    icv: f64::NAN,
                }
            });
            let age_from_table = info.age.is_finite();
            if !age_from_table && table.rows.contains_key(&job.file.scan_id) {
                report.ages_not_finite.push(job.file.scan_id.clone());
            }
            if sex == 0 {
                sex = info.sex;
            }
            if site == 0 {
                site = info.site;
            }
            let mut x = match l.x {
                Some(m) => {
                    if !m.had_data_row {
                        report
                            .morph_files_without_data
                            .push(job.morph.clone().unwrap_or_default());
                    }
                    report.morph_nan_cells +=
                        m.x.slice(s![..n_nodes, ..])
                            .iter()
                            .filter(|v| v.is_nan())
                            .count();
                    m.x.slice(s![..n_nodes, ..]).to_owned()
                }
                None => Array2::zeros((n_nodes, n_metrics)),
            };
            if info.icv.is_finite() && info.icv > 0.0 {
                for &m in &vol_metrics {
                    x.column_mut(m)
                        .mapv_inplace(|v| (f64::from(v) / info.icv) as f32);
                }
            }
            scans.push(Scan {
                scan_id: job.file.scan_id,
                session: job.file.session,
                sc_path: job.file.path,
                morph_path: job.morph,
                a_raw: l.a_raw,
                a_log: l.a_log,
                x,
                age: if age_from_table {
                    info.age
                } else {
                    visit as f64
                },
                age_from_table,
                icv: info.icv,
                s: l.s,
                s_mean: l.s_mean,
                ecc: l.ecc,
            });
        }
        subjects.push(Subject {
            id,
            sex,
            site,
            scans,
        });
    }
    report.n_subjects = subjects.len();
    report.n_scans = subjects.iter().map(|s| s.scans.len()).sum();
    let cohort = Cohort {
        subjects,
        n_nodes,
        rois: layout.rois[..n_nodes].to_vec(),
        metrics: layout.metrics.clone(),
        topo_bins,
        sex_vocab: SEX_VOCAB,
        site_vocab: table.site_vocab(),
        sites: table.sites,
    };
    Ok((cohort, report))
}

impl Cohort {
    /// F, the number of morphology metrics.
    pub fn n_metrics(&self) -> usize {
        self.metrics.len()
    }

    pub fn n_scans(&self) -> usize {
        self.subjects.iter().map(|s| s.scans.len()).sum()
    }

    /// Normalisation statistics from all scans of the given subjects (a fold's training
    /// subjects; indices into `subjects`). Error if the list is empty or out of range.
    pub fn norm_stats(&self, train_subjects: &[usize]) -> Result<NormStats> {
        if let Some(&bad) = train_subjects.iter().find(|&&i| i >= self.subjects.len()) {
            return Err(ConnectomeError::Split(format!(
                "subject index {bad} out of range ({} subjects)",
                self.subjects.len()
            )));
        }
        NormStats::from_scans(
            train_subjects
                .iter()
                .flat_map(|&i| self.subjects[i].scans.iter()),
            self.n_nodes,
            self.n_metrics(),
            self.topo_bins,
        )
    }

    /// z-scored morphology and ECC of every scan, indexed `[subject][scan]`.
    pub fn normalized(&self, stats: &NormStats) -> Vec<Vec<NormalizedScan>> {
        self.subjects
            .iter()
            .map(|subject| {
                subject
                    .scans
                    .iter()
                    .map(|scan| NormalizedScan {
                        x: stats.normalize_x(scan.x.view()),
                        ecc: stats.normalize_ecc(scan.ecc.view()),
                    })
                    .collect()
            })
            .collect()
    }
}

/// z-scored inputs of one scan.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizedScan {
    /// N×F.
    pub x: Array2<f32>,
    /// `topo_bins`.
    pub ecc: Array1<f32>,
}

/// Per-fold normalisation statistics (spec §1.4): per (ROI, metric) element of the morphology and
/// per ECC bin, mean = Σv/n and var = Σv²/n − mean² accumulated in f64, std = sqrt(max(var,
/// 1e-6)). Serialisable so that it can be saved next to a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormStats {
    pub n_nodes: usize,
    pub n_metrics: usize,
    /// Number of scans the statistics were computed from.
    pub n_scans: usize,
    /// Row-major N×F.
    pub x_mean: Vec<f64>,
    pub x_std: Vec<f64>,
    pub ecc_mean: Vec<f64>,
    pub ecc_std: Vec<f64>,
}

impl NormStats {
    /// Statistics over `scans`. Error if there is none.
    pub fn from_scans<'a>(
        scans: impl IntoIterator<Item = &'a Scan>,
        n_nodes: usize,
        n_metrics: usize,
        topo_bins: usize,
    ) -> Result<Self> {
        let nx = n_nodes * n_metrics;
        let (mut xs, mut xs2) = (vec![0.0f64; nx], vec![0.0f64; nx]);
        let (mut es, mut es2) = (vec![0.0f64; topo_bins], vec![0.0f64; topo_bins]);
        let mut n = 0usize;
        for scan in scans {
            for ((v, s1), s2) in scan.x.iter().zip(&mut xs).zip(&mut xs2) {
                let v = f64::from(*v);
                *s1 += v;
                *s2 += v * v;
            }
            for ((v, s1), s2) in scan.ecc.iter().zip(&mut es).zip(&mut es2) {
                *s1 += v;
                *s2 += v * v;
            }
            n += 1;
        }
        if n == 0 {
            return Err(ConnectomeError::Split(
                "normalisation statistics need at least one training scan".into(),
            ));
        }
        let finish = |s1: Vec<f64>, s2: Vec<f64>| -> (Vec<f64>, Vec<f64>) {
            s1.iter()
                .zip(&s2)
                .map(|(a, b)| {
                    let mean = a / n as f64;
                    let var = b / n as f64 - mean * mean;
                    (mean, var.max(1e-6).sqrt())
                })
                .unzip()
        };
        let (x_mean, x_std) = finish(xs, xs2);
        let (ecc_mean, ecc_std) = finish(es, es2);
        Ok(Self {
            n_nodes,
            n_metrics,
            n_scans: n,
            x_mean,
            x_std,
            ecc_mean,
            ecc_std,
        })
    }

    /// `(x − mean)/std` per element; `x` must be `n_nodes × n_metrics` (panics otherwise).
    pub fn normalize_x(&self, x: ArrayView2<f32>) -> Array2<f32> {
        let f = self.n_metrics;
        Array2::from_shape_fn(x.dim(), |(r, m)| {
            let k = r * f + m;
            ((f64::from(x[(r, m)]) - self.x_mean[k]) / self.x_std[k]) as f32
        })
    }

    /// `(ecc − mean)/std` per bin; `ecc` must have the statistics' bin count.
    pub fn normalize_ecc(&self, ecc: ArrayView1<f64>) -> Array1<f32> {
        Array1::from_shape_fn(ecc.len(), |q| {
            ((ecc[q] - self.ecc_mean[q]) / self.ecc_std[q]) as f32
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::connectome::split::{cv_fold, test_split};
    use crate::data::connectome::test_util::write;

    const HEADER: &str = "SubjectID,R2_Thickness,R1_Thickness,R3_Thickness,R1_Area,R2_Area,R3_Area";

    fn matrix_csv(n: usize, w: f32) -> String {
        (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i != j && (i + j) % 2 == 1 {
                            format!("{w}")
                        } else {
                            "0".into()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn morph(root: &Path, ses: &str, sub: &str, v: f32) {
        write(
            root,
            &format!("morph/{ses}/site1/Schaefer400_Morphology_{sub}.csv"),
            &format!(
                "{HEADER}\n{sub},{v},{},{},{},{},{}\n",
                v + 1.0,
                v + 2.0,
                v * 10.0,
                0,
                1
            ),
        );
    }

    /// A 3-node cohort with every kind of irregularity the loader must report.
    fn small_cohort(root: &Path) {
        let b = "ses-baselineYear1Arm1";
        let y2 = "ses-2YearFollowUpYArm1";
        for (sub, ses, w) in [
            ("sub-A", b, 1.0),
            ("sub-A", y2, 2.0),
            ("sub-B", b, 3.0),
            ("sub-B", y2, 4.0),
            ("sub-C", b, 5.0), // no morphology → dropped, and sub-C with it
            ("sub-D", y2, 6.0),
            ("sub-D", b, 7.0),
        ] {
            write(root, &format!("sc/{sub}_{ses}.csv"), &matrix_csv(3, w));
        }
        write(root, "sc/sub-E.csv", &matrix_csv(3, 1.0)); // empty session
        morph(root, b, "sub-A", 1.0);
        morph(root, y2, "sub-A", 2.0);
        morph(root, b, "sub-B", 3.0);
        morph(root, y2, "sub-B", 4.0);
        morph(root, b, "sub-D", 5.0);
        morph(root, y2, "sub-D", 6.0);
        write(
            root,
            "subject_info_sc.csv",
            "scanid,age,sex,siteid\n\
             sub-A_ses-baselineYear1Arm1,9.5,M,s2\n\
             sub-A_ses-2YearFollowUpYArm1,11.5,M,s2\n\
             sub-B_ses-baselineYear1Arm1,,F,\n\
             sub-B_ses-2YearFollowUpYArm1,12,F,s1\n\
             sub-X_ses-baselineYear1Arm1,10,F,s3\n",
        );
    }

    #[test]
    fn loads_and_reports() {
        let dir = tempfile::tempdir().unwrap();
        small_cohort(dir.path());
        let (c, r) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
        let ids: Vec<_> = c.subjects.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["sub-A", "sub-B", "sub-D"]);
        assert_eq!((c.n_nodes, c.n_metrics(), c.n_scans()), (3, 2, 6));
        assert_eq!(c.rois, ["R1", "R2", "R3"]);
        assert_eq!(c.metrics, ["Thickness", "Area"]);
        assert_eq!((c.sex_vocab, c.site_vocab), (3, 4));
        assert_eq!(c.sites, ["s1", "s2", "s3"]);
        assert_eq!(r.subjects_dropped, ["sub-C", "sub-E"]);
        assert_eq!(
            r.scans_without_morph,
            ["sub-C_ses-baselineYear1Arm1", "sub-E"]
        );
        assert_eq!(r.non_canonical_sessions, ["sub-E.csv"]);
        assert_eq!(
            r.scans_not_in_table,
            [
                "sub-D_ses-baselineYear1Arm1",
                "sub-D_ses-2YearFollowUpYArm1"
            ]
        );
        assert_eq!(r.ages_not_finite, ["sub-B_ses-baselineYear1Arm1"]);
        assert_eq!((r.n_subjects, r.n_scans, r.sc_files), (3, 6, 8));
        assert!(r.to_string().contains("2 subjects dropped"), "{r}");

        let a = &c.subjects[0];
        assert_eq!((a.sex, a.site), (1, 2));
        assert_eq!(a.scans[1].age, 11.5);
        assert!(a.scans[0].age_from_table);
        // Morphology rows in lexicographic ROI order: R1 = v+1, R2 = v, R3 = v+2.
        assert_eq!(a.scans[0].x.column(0).to_vec(), [2.0, 1.0, 3.0]);
        assert_eq!(a.scans[0].x.column(1).to_vec(), [10.0, 0.0, 1.0]);
        let b = &c.subjects[1];
        // Sex: first non-zero; site: first non-zero (visit 1's).
        assert_eq!((b.sex, b.site), (2, 1));
        assert_eq!((b.scans[0].age, b.scans[1].age), (0.0, 12.0));
        assert!(!b.scans[0].age_from_table);
        let d = &c.subjects[2];
        // Baseline sorted first even though the 2-year file name sorts first; ages = visit index.
        assert_eq!(d.scans[0].session, "ses-baselineYear1Arm1");
        assert_eq!((d.scans[0].age, d.scans[1].age), (0.0, 1.0));
        assert_eq!((d.sex, d.site), (0, 0));
        let s0 = &d.scans[0];
        assert_eq!(s0.a_raw[(0, 1)], 7.0);
        assert_eq!(s0.a_log[(0, 1)], 7.0f32.ln_1p());
        assert_eq!(s0.ecc.len(), 32);
        assert!((s0.s - (14.0f64 + 1e-8).ln()).abs() < 1e-12);
        let cov = s0.numeric_covariates(Array1::<f32>::zeros(32).view(), true);
        assert_eq!(cov.len(), 35);

        // Without require_morph the dropped scans come back with zero morphology.
        let opts = LoadOptions {
            require_morph: false,
            ..LoadOptions::default()
        };
        let (c2, _) = load_cohort(&CohortPaths::under(dir.path()), &opts).unwrap();
        assert_eq!(c2.subjects.len(), 5);
        assert!(c2.subjects[2].scans[0].x.iter().all(|v| *v == 0.0));
    }

    #[test]
    fn rejects_bad_cohorts() {
        // Node count mismatch names both files.
        let dir = tempfile::tempdir().unwrap();
        small_cohort(dir.path());
        write(
            dir.path(),
            "sc/sub-B_ses-2YearFollowUpYArm1.csv",
            &matrix_csv(4, 1.0),
        );
        let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sub-B_ses-2YearFollowUpYArm1.csv: SC matrix is 4×4")
                && err.contains("sub-A_ses-baselineYear1Arm1.csv is 3×3"),
            "{err}"
        );

        // Fewer morphology ROIs than nodes.
        let dir = tempfile::tempdir().unwrap();
        small_cohort(dir.path());
        for ses in ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1"] {
            for sub in ["sub-A", "sub-B", "sub-D"] {
                write(
                    dir.path(),
                    &format!("sc/{sub}_{ses}.csv"),
                    &matrix_csv(5, 1.0),
                );
            }
        }
        write(
            dir.path(),
            "sc/sub-C_ses-baselineYear1Arm1.csv",
            &matrix_csv(5, 1.0),
        );
        write(dir.path(), "sc/sub-E.csv", &matrix_csv(5, 1.0));
        let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("3 morphology ROIs but the SC matrices have 5 nodes"),
            "{err}"
        );

        // No scan has morphology.
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "sc/sub-A_ses-baselineYear1Arm1.csv",
            &matrix_csv(3, 1.0),
        );
        morph(dir.path(), "ses-2YearFollowUpYArm1", "sub-A", 1.0);
        write(dir.path(), "subject_info_sc.csv", "scanid\n");
        let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("no subject is left"), "{err}");

        // Bad matrix inside a cohort names the file.
        let dir = tempfile::tempdir().unwrap();
        small_cohort(dir.path());
        write(
            dir.path(),
            "sc/sub-D_ses-baselineYear1Arm1.csv",
            "0,1,x\n1,0,1\n1,1,0\n",
        );
        let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sub-D_ses-baselineYear1Arm1.csv: line 1, column 3"),
            "{err}"
        );

        // Empty SC directory.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sc")).unwrap();
        let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("sc: no SC matrix files"), "{err}");
    }

    #[test]
    fn norm_stats_use_training_subjects_only() {
        let dir = tempfile::tempdir().unwrap();
        small_cohort(dir.path());
        let (c, _) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
        // Train on sub-A only (2 scans: v = 1, 2 → R2 thickness values 1, 2).
        let st = c.norm_stats(&[0]).unwrap();
        assert_eq!(st.n_scans, 2);
        let k = c.n_metrics(); // row R2 = 1, metric 0
        assert!((st.x_mean[k] - 1.5).abs() < 1e-12);
        assert!((st.x_std[k] - 0.5).abs() < 1e-12);
        // A constant element gets std = sqrt(1e-6).
        assert!((st.x_std[k + 1] - 1e-3).abs() < 1e-12);
        // Changing a non-training subject does not move the statistics.
        let mut c2 = c.clone();
        c2.subjects[1].scans[0].x.fill(1e6);
        c2.subjects[2].scans[0].ecc.fill(-5.0);
        assert_eq!(c2.norm_stats(&[0]).unwrap(), st);
        // …while changing a training subject does.
        c2.subjects[0].scans[0].x.fill(1e6);
        assert_ne!(c2.norm_stats(&[0]).unwrap(), st);
        // Normalised training data has mean 0 per element.
        let z = c.normalized(&st);
        let mean = (z[0][0].x[(1, 0)] + z[0][1].x[(1, 0)]) / 2.0;
        assert!(mean.abs() < 1e-6);
        assert_eq!(z[1][0].ecc.len(), 32);
        assert!(c.norm_stats(&[]).is_err());
        assert!(c.norm_stats(&[7]).is_err());
    }

    #[test]
    fn split_then_fold_stats() {
        let dir = tempfile::tempdir().unwrap();
        crate::data::connectome::write_synthetic_cohort(dir.path(), 20, 12, 3).unwrap();
        let (c, _) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
        let split = test_split(c.subjects.len(), 0.2, 42).unwrap();
        let fold = cv_fold(&split.trainval, 0, 5).unwrap();
        let ids = |v: &[usize]| -> HashSet<String> {
            v.iter().map(|&i| c.subjects[i].id.clone()).collect()
        };
        assert!(ids(&split.test).is_disjoint(&ids(&split.trainval)));
        assert!(ids(&fold.val).is_disjoint(&ids(&fold.train)));
        assert!(ids(&split.test).is_disjoint(&ids(&fold.train)));
        let st = c.norm_stats(&fold.train).unwrap();
        let manual = NormStats::from_scans(
            fold.train.iter().flat_map(|&i| c.subjects[i].scans.iter()),
            c.n_nodes,
            c.n_metrics(),
            c.topo_bins,
        )
        .unwrap();
        assert_eq!(st, manual);
        assert_ne!(st, c.norm_stats(&split.trainval).unwrap());
    }
}
