//! Structural-connectome cohorts for CLG-ODE: the CPU-side data half.
//!
//! Everything here follows `specs/clg-ode.md` §1 (on-disk formats and preprocessing) and §3.1
//! (subject split), one concern per file:
//!
//! * [`naming`]: subject/session parsing from SC file names and morphology paths, session ranks.
//! * [`sc`]: listing and reading the dense N×N SC matrix CSVs.
//! * [`morph`]: the recursive morphology index and the per-scan `[N × F]` feature matrices.
//! * [`subjects`]: the subject table (`subject_info_sc.csv`): age, sex id, site id, ICV.
//! * [`mod@preprocess`]: symmetrise / zero diagonal / `log1p`, strengths, the ECC curve, Â.
//! * [`sym`]: a scan's symmetric matrix held once, as its upper triangle.
//! * [`split`]: the 80/20 subject split (numpy `RandomState(42).permutation`, emulated exactly)
//!   and the GroupKFold fold assignment.
//! * [`dataset`]: the assembled [`Cohort`] (+ a [`LoadReport`] of everything dropped or patched)
//!   and the per-fold [`NormStats`].
//! * [`synth`]: a synthetic cohort written in exactly these formats.
//!
//! Readers never panic on bad input: they return a [`ConnectomeError`] that names the file and,
//! where it applies, the 1-based line and column.

pub(crate) mod dataset;
pub mod morph;
pub(crate) mod naming;
pub(crate) mod paths_yaml;
pub(crate) mod preprocess;
pub mod sc;
pub(crate) mod split;
pub mod subjects;
pub(crate) mod sym;
pub(crate) mod synth;

use std::path::PathBuf;

pub(crate) use dataset::{
    Cohort, CohortPaths, LoadOptions, LoadReport, NormStats, Scan, Subject, load_cohort,
};
#[cfg(test)]
pub(crate) use preprocess::normalize_adj;
pub(crate) use split::{FoldSplit, cv_fold, test_split};
pub(crate) use sym::SymMatrix;
pub(crate) use synth::{SynthOptions, write_synthetic_cohort, write_synthetic_cohort_with};

/// Everything that can go wrong while reading a cohort. Each variant names the offending file.
#[derive(Debug, thiserror::Error)]
pub enum ConnectomeError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: malformed CSV: {err}")]
    Csv { path: PathBuf, err: csv::Error },
    #[error("{dir}: no {what} found")]
    Empty { dir: PathBuf, what: String },
    #[error("{path}: line {line}, column {column}: {value:?} is not a number")]
    NonNumeric {
        path: PathBuf,
        line: u64,
        column: usize,
        value: String,
    },
    #[error(
        "{path}: line {line}, column {column}: {value:?} is not finite (NaN/inf are not allowed in SC matrices)"
    )]
    NonFinite {
        path: PathBuf,
        line: u64,
        column: usize,
        value: String,
    },
    #[error(
        "{path}: line {line}, column {column}: negative edge weight {value:?} (SC weights must be \
         ≥ 0: log1p of a negative weight is below zero, NaN below −1)"
    )]
    Negative {
        path: PathBuf,
        line: u64,
        column: usize,
        value: String,
    },
    #[error("{path}: line {line} has {found} columns but line 1 has {expected}")]
    Ragged {
        path: PathBuf,
        line: u64,
        expected: usize,
        found: usize,
    },
    #[error("{path}: the file is empty: expected an N×N matrix of comma-separated numbers")]
    EmptyFile { path: PathBuf },
    #[error("{path}: SC matrix is not square ({rows} rows × {cols} columns)")]
    NotSquare {
        path: PathBuf,
        rows: usize,
        cols: usize,
    },
    #[error(
        "{path}: SC matrix is {found}×{found} but {first} is {expected}×{expected} (the node count is taken from the first file)"
    )]
    NodeCountMismatch {
        path: PathBuf,
        found: usize,
        first: PathBuf,
        expected: usize,
    },
    #[error("{path}: cannot parse a subject id from the file name")]
    NoSubject { path: PathBuf },
    #[error(
        "{path}: no column named <ROI>_<Metric> for a known ROI and one of the metrics {metrics:?}"
    )]
    NoMorphColumns { path: PathBuf, metrics: Vec<String> },
    #[error("{path}: {n_rois} morphology ROIs but the SC matrices have {n_nodes} nodes")]
    TooFewRois {
        path: PathBuf,
        n_rois: usize,
        n_nodes: usize,
    },
    #[error("{path}: line {line}: scan {scan_id}: negative age {value:?} (ages are in years, ≥ 0)")]
    NegativeAge {
        path: PathBuf,
        line: u64,
        scan_id: String,
        value: String,
    },
    /// `later` and `earlier` describe a scan: `<scanid> (table line L, age A; SC file F)`.
    #[error(
        "{path}: subject {subject}: {later} is not older than the visit before it, {earlier}: \
         each follow-up must be older than the previous visit (visits are ordered by session: \
         baseline, 2-, 4-, 6-year, then others by name; Δt is the age difference)"
    )]
    AgesNotIncreasing {
        path: PathBuf,
        subject: String,
        earlier: String,
        later: String,
    },
    #[error("{path}: required column {column:?} is missing from the header")]
    MissingColumn { path: PathBuf, column: String },
    #[error("no subject is left after dropping scans without morphology ({dropped} scans dropped)")]
    NothingLeft { dropped: usize },
    #[error("invalid split: {0}")]
    Split(String),
}

/// Result alias of this module.
pub(crate) type Result<T, E = ConnectomeError> = std::result::Result<T, E>;

/// Map `f` over `items` on all available cores (std threads, order kept).
pub(crate) fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// pandas' default missing-value spellings (used for the subject table and morphology cells).
pub(crate) fn is_na(s: &str) -> bool {
    matches!(
        s.trim(),
        "" | "#N/A"
            | "#N/A N/A"
            | "#NA"
            | "-1.#IND"
            | "-1.#QNAN"
            | "-NaN"
            | "-nan"
            | "1.#IND"
            | "1.#QNAN"
            | "<NA>"
            | "N/A"
            | "NA"
            | "NULL"
            | "NaN"
            | "None"
            | "n/a"
            | "nan"
            | "null"
    )
}

#[cfg(test)]
pub(crate) mod test_util {
    use serde_json::Value;
    use std::sync::OnceLock;

    /// The golden file of the reference implementation (a copy lives in `tests/fixtures`).
    pub(crate) fn golden() -> &'static Value {
        static G: OnceLock<Value> = OnceLock::new();
        G.get_or_init(|| {
            let path = concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/clg-ode-golden.json"
            );
            let text = std::fs::read_to_string(path).expect("golden fixture");
            serde_json::from_str(&text).expect("golden fixture is JSON")
        })
    }

    pub(crate) fn matrix(v: &Value) -> ndarray::Array2<f32> {
        let rows: Vec<Vec<f32>> = v
            .as_array()
            .expect("matrix")
            .iter()
            .map(|r| {
                r.as_array()
                    .expect("row")
                    .iter()
                    .map(|x| x.as_f64().expect("number") as f32)
                    .collect()
            })
            .collect();
        let n = rows.len();
        let m = rows.first().map_or(0, Vec::len);
        ndarray::Array2::from_shape_vec((n, m), rows.concat()).expect("rectangular")
    }

    pub(crate) fn vector(v: &Value) -> Vec<f64> {
        v.as_array()
            .expect("vector")
            .iter()
            .map(|x| x.as_f64().expect("number"))
            .collect()
    }

    /// `got` (ours, host code) within 1e-5 relative (floor 1e-3) of `want` (the reference's
    /// numpy/PyTorch value in `clg-ode-golden.json`); returns |got − want| / tol.
    ///
    /// Why 1e-5: the two sides are different implementations of the same formula, in f32 on
    /// both sides where the reference is f32 (its matrices) and f64 where it is f64 (its scalar
    /// metrics), with different summation orders (numpy sums pairwise, ours left to right
    /// over at most a few hundred terms: ≤ n·u·Σ|x| with u = 2^-24 ≈ 6e-8, and in practice
    /// ≈ √n·u ≈ 1e-6 relative). The error is measured and printed by [`assert_matrix_close`]
    /// and the callers; the worst seen is 0.27 of this tolerance (sc_log_pearson = 0.0075, a
    /// nearly cancelling sum: ≈ 2e-8 absolute against the 7.5e-8 allowed), 3.7× inside. Ours is
    /// host code on one thread (scalar loops and ndarray's fixed-order folds; Rust never
    /// reassociates or contracts to FMA on its own), so its value does not depend on the thread
    /// count, and on the CPU only through ecc's matrix powers (ndarray → matrixmultiply, whose
    /// FMA kernel rounds each step once instead of twice: ≤ u relative per step, on CPUs
    /// without FMA only); the golden is recorded once. Nothing here can approach the margin.
    pub(crate) fn assert_close(got: f64, want: f64, what: &str) -> f64 {
        let tol = 1e-5 * want.abs().max(1e-3);
        assert!(
            (got - want).abs() <= tol,
            "{what}: got {got}, want {want} (tol {tol})"
        );
        (got - want).abs() / tol
    }

    /// [`assert_close`] for every element; prints the worst error as a fraction of the
    /// tolerance.
    pub(crate) fn assert_matrix_close(
        got: &ndarray::Array2<f32>,
        want: &ndarray::Array2<f32>,
        what: &str,
    ) {
        assert_eq!(got.dim(), want.dim(), "{what}: shape");
        let mut worst = 0.0f64;
        for ((i, j), w) in want.indexed_iter() {
            worst = worst.max(assert_close(
                f64::from(got[(i, j)]),
                f64::from(*w),
                &format!("{what}[{i},{j}]"),
            ));
        }
        eprintln!("{what}: worst error {worst:.2e} of the tolerance");
    }

    /// Write `text` to `dir/name`, creating parent directories.
    pub(crate) fn write(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
        p
    }
}
