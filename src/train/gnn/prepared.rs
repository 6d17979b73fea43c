//! A cohort ready for training ([`Prepared`]): loaded, its subjects split 80/20 into
//! train+validation and test (numpy `RandomState` emulated, as the reference's
//! `random_state=42`) and the first part into GroupKFold folds; and the name of a fold's model
//! files. It imports nothing from its siblings: every part of `train-gnn` starts from it.

use std::sync::Arc;

use anyhow::Result;

use crate::data::connectome::{
    Cohort, CohortPaths, FoldSplit, LoadOptions, LoadReport, cv_fold, load_cohort, test_split,
};

/// Fraction of subjects held out for test (the reference's constant).
pub(crate) const TEST_SIZE: f64 = 0.2;

/// A cohort ready for training: loaded, split.
pub(crate) struct Prepared {
    pub cohort: Arc<Cohort>,
    /// What the readers loaded and dropped, for the log.
    pub report: LoadReport,
    pub trainval: Vec<usize>,
    pub test: Vec<usize>,
    /// The folds to train, in order.
    pub folds: Vec<FoldSplit>,
}

/// How a cohort is loaded and split.
#[derive(Debug, Clone)]
pub(super) struct Split {
    /// The folds to train.
    pub folds: Vec<usize>,
    /// Folds of the cross-validation (GroupKFold).
    pub cv_folds: usize,
    /// Seed of the test split (`--random-state`).
    pub seed: u64,
    /// ECC bins of the covariate.
    pub topo_bins: usize,
}

/// Loads and splits the cohort; every reader error surfaces here with its file name.
pub(super) fn prepare(paths: &CohortPaths, how: &Split) -> Result<Prepared> {
    let table = paths.subject_info_csv.as_ref();
    for (flag, path, dir) in [
        ("--sc-dir", Some(&paths.sc_dir), true),
        ("--morph-root", Some(&paths.morph_root), true),
        ("--subject-info-csv", table, false),
    ] {
        let Some(path) = path else { continue };
        let ok = if dir { path.is_dir() } else { path.is_file() };
        if !ok {
            anyhow::bail!(
                "{flag} {}: {}",
                path.display(),
                match (path.exists(), dir) {
                    (false, _) => "no such file or directory",
                    (true, true) => "not a directory",
                    (true, false) => "not a file",
                }
            );
        }
    }
    let options = LoadOptions {
        topo_bins: how.topo_bins,
        ..LoadOptions::default()
    };
    let (cohort, report) = load_cohort(paths, &options)?;
    let seed = u32::try_from(how.seed).map_err(|_| {
        anyhow::anyhow!(
            "--random-state {} is too large: the split (numpy's RandomState) takes a 32-bit seed",
            how.seed
        )
    })?;
    let split = test_split(cohort.subjects.len(), TEST_SIZE, seed)?;
    let folds = how
        .folds
        .iter()
        .map(|&f| cv_fold(&split.trainval, f, how.cv_folds))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Prepared {
        cohort: Arc::new(cohort),
        report,
        trainval: split.trainval,
        test: split.test,
        folds,
    })
}

/// The file stem of a fold's model files, `<model>_fold<f>` (the reference's
/// `checkpoints/clg_ode_fold<f>_{best,last}` for CLG-ODE).
pub(super) fn fold_stem(model: &str, fold: usize) -> String {
    format!("{model}_fold{fold}")
}
