//! Reading a cohort's three inputs (SC directory, morphology tree, subject table) on all cores.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use ndarray::{Array1, Array2, s};

use super::{Cohort, CohortPaths, LoadOptions, LoadReport, Scan, Subject};
use crate::data::connectome::morph::{MorphLayout, index_morphology, load_morph};
use crate::data::connectome::naming::{UNKNOWN_SESSION_RANK, session_rank};
use crate::data::connectome::preprocess::{ecc, preprocess, strengths};
use crate::data::connectome::sc::{
    Asymmetry, ScFile, asymmetry, group_sequences, list_sc_files, read_sc_matrix,
};
use crate::data::connectome::subjects::{SEX_VOCAB, ScanInfo, SubjectTable, read_subject_table};
use crate::data::connectome::{ConnectomeError, Result, SymMatrix, par_map};

struct Job {
    file: ScFile,
    morph: Option<PathBuf>,
}

struct Loaded {
    a_raw: SymMatrix,
    s: f64,
    s_mean: f64,
    ecc: Array1<f64>,
    x: Option<crate::data::connectome::morph::MorphFile>,
    asymmetry: Option<Asymmetry>,
}

/// Load a cohort from its three inputs (docs/clg-ode-model.md §1), reading files on all cores.
///
/// Errors (each naming the file): unreadable/empty inputs, malformed SC matrices (negative
/// weights included), SC files whose size differs from the first loaded one, morphology files
/// without a usable column or with non-numeric cells, fewer morphology ROIs than SC nodes, a
/// subject table without `scanid` or `age` or with a negative age, a follow-up whose table age
/// does not exceed the previous visit's, or no subject left. Everything the reference drops,
/// patches or accepts silently (asymmetric matrices, ages mixing the table and visit indices, no
/// subject with two scans) is listed in the returned [`LoadReport`].
pub(crate) fn load_cohort(paths: &CohortPaths, opts: &LoadOptions) -> Result<(Cohort, LoadReport)> {
    let mut report = LoadReport {
        sc_dir: paths.sc_dir.clone(),
        ..LoadReport::default()
    };
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

    let table = match &paths.subject_info_csv {
        Some(path) => read_subject_table(path)?,
        None => Default::default(),
    };
    report.no_subject_table = paths.subject_info_csv.is_none();
    report.table_duplicate_scan_ids = table.duplicate_scan_ids.clone();
    report.table_unparsable_ages = table.unparsable_ages.clone();
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
        let asymmetry = asymmetry(a.view());
        let (a_raw, a_log) = preprocess(a.view());
        let (s, s_mean) = strengths(a_raw.view());
        let ecc = ecc(a_log.view(), topo_bins);
        let a_raw = SymMatrix::from_dense(&a_raw);
        let x = job
            .morph
            .as_deref()
            .map(|p| load_morph(p, &layout))
            .transpose()?;
        Ok(Loaded {
            a_raw,
            s,
            s_mean,
            ecc,
            x,
            asymmetry,
        })
    });
    let loaded: Vec<Loaded> = loaded.into_iter().collect::<Result<_>>()?;

    let n_nodes = loaded[0].a_raw.n();
    for (job, l) in jobs.iter().zip(&loaded) {
        if l.a_raw.n() != n_nodes {
            return Err(ConnectomeError::NodeCountMismatch {
                path: job.file.path.clone(),
                found: l.a_raw.n(),
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
    for (job, l) in jobs.iter().zip(&loaded) {
        if let Some(a) = &l.asymmetry {
            report
                .sc_asymmetric
                .push((job.file.path.clone(), a.to_string()));
        }
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
                    if !m.missing.is_empty() {
                        report.morph_missing_columns.push((
                            job.morph.clone().unwrap_or_default(),
                            layout.describe_missing(&m.missing),
                        ));
                    }
                    if !m.had_data_row {
                        report
                            .morph_files_without_data
                            .push(job.morph.clone().unwrap_or_default());
                    }
                    let nan =
                        m.x.slice(s![..n_nodes, ..])
                            .iter()
                            .filter(|v| v.is_nan())
                            .count();
                    report.morph_nan_cells += nan;
                    if nan > 0 {
                        report
                            .morph_nan_files
                            .push((job.morph.clone().unwrap_or_default(), nan));
                    }
                    if m.extra_rows > 0 {
                        report
                            .morph_files_with_extra_rows
                            .push((job.morph.clone().unwrap_or_default(), m.extra_rows));
                    }
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
    if let Some(path) = &paths.subject_info_csv {
        for subject in &subjects {
            check_ages(subject, &table, path, &mut report)?;
        }
    }
    report.subjects_with_two_scans = subjects.iter().filter(|s| s.scans.len() >= 2).count();
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

/// The ages of one subject's visits: those from the table must increase strictly along the
/// visits (else Δt would silently be the visit-index difference: an error naming the table's
/// lines); a subject whose ages mix the table and visit indices is reported (the reference
/// does the same silently, and Δt between the two kinds is meaningless).
fn check_ages(
    subject: &Subject,
    table: &SubjectTable,
    path: &Path,
    report: &mut LoadReport,
) -> Result<()> {
    let describe = |scan: &Scan| {
        let file = scan
            .sc_path
            .file_name()
            .map_or_else(String::new, |f| f.to_string_lossy().into_owned());
        let line = table
            .lines
            .get(&scan.scan_id)
            .map_or_else(|| "?".to_string(), u64::to_string);
        format!(
            "{} (table line {line}, age {}; SC file {file})",
            scan.scan_id, scan.age
        )
    };
    let mut previous: Option<&Scan> = None;
    for scan in subject.scans.iter().filter(|s| s.age_from_table) {
        if let Some(before) = previous
            && scan.age <= before.age
        {
            return Err(ConnectomeError::AgesNotIncreasing {
                path: path.to_path_buf(),
                subject: subject.id.clone(),
                earlier: describe(before),
                later: describe(scan),
            });
        }
        previous = Some(scan);
    }
    let (table_ages, index_ages): (Vec<&Scan>, Vec<&Scan>) =
        subject.scans.iter().partition(|s| s.age_from_table);
    if !table_ages.is_empty() && !index_ages.is_empty() {
        let ids = |scans: &[&Scan]| -> String {
            scans
                .iter()
                .map(|s| s.scan_id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        report.subjects_mixing_ages.push(format!(
            "{}: ages of {} from the subject table, of {} the visit index",
            subject.id,
            ids(&table_ages),
            ids(&index_ages)
        ));
    }
    Ok(())
}
