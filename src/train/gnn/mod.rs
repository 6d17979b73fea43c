//! `trainer train-gnn`: CLG-ODE training on a connectome cohort (docs/clg-ode-model.md §3,
//! with the reference's extras of §7.2: topology loss and GradNorm, decoder variants, the
//! edge-loss family, innovation).
//!
//! What a run does: load the cohort (errors surface before any run directory exists); split
//! subjects 80/20 (numpy `RandomState(42)` emulated, as the reference's `random_state=42`) and
//! the trainval part into 5 GroupKFold folds; for the selected fold(s) z-score morphology and
//! ECC with the fold's training subjects, train with Adam, validate every epoch, stop early on
//! the validation loss; then score the best fold's best weights on the test subjects.
//!
//! Folders: `protocol` (what every model shares: a fold's data, scoring against the identity,
//! the test set and its files, the validation columns, what a saved run gives a model; it
//! imports no model), `cv` (the one cross-validation job, generic over the `Forecaster` trait
//! every `--model` implements), `clg_ode` (the forecaster `clg-ode`: its training step and
//! GradNorm, visit sampling and augmentation, validation, test scoring and settings columns),
//! `saved` (`eval-gnn`, `predict`, `plot-sc`: the commands that reopen a finished run).
//! Files: `registry` (the `--model`s: `ModelKind` and the one match on it), `settings` (the
//! flags), [`config`] (`args.json`, the resume fingerprint), the other models (`drift`,
//! `eb_drift`, `closed_form`, `gcn`, `lstm`, `baseline`), `fits` (closed-form fits they share).
//!
//! Decisions on the reference's quirks (docs/clg-ode-model.md §7.3):
//! * The best checkpoint is a **copy** of the best epoch's weights (the reference saves the last
//!   epoch's weights because its "best state" aliases the live parameters).
//! * Validation and test losses use **clean inputs and visits (0, 1, 2)** (the reference samples
//!   visits and applies augmentation there too).
//! * Everything random is **seeded** from `--seed`: weight init (per fold), the epoch shuffle,
//!   visit sampling and augmentation (per fold, epoch and subject position), so a resumed run
//!   continues exactly. The reference's torch RNG is unseeded.
//! * `use_mu` everywhere, raw age/s/s_mean covariates, lexicographic morphology ROI order, raw
//!   truth in the top-k/sparse Pearson metrics: kept as in the reference.
//!
//! Epochs in `metrics.csv` are 1-based (`epoch` = epochs done); the loss schedule uses the
//! 0-based epoch index e (velocity from e = 10, acceleration from e = 20).

mod baseline;
pub(crate) mod clg_ode;
mod closed_form;
pub(crate) mod cohort;
pub(crate) mod config;
mod cv;
mod drift;
mod eb_drift;
mod fits;
mod gcn;
#[cfg(test)]
mod golden;
#[cfg(test)]
mod golden_json;
mod graph_forecast;
mod kind;
mod lstm;
mod metric;
mod prepared;
pub(crate) mod protocol;
mod registry;
pub(crate) mod saved;
mod seeds;
mod settings;
#[cfg(test)]
mod toy_model;
mod versus;

use std::marker::PhantomData;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;

use crate::data::connectome::CohortPaths;
use crate::engine::{Monitor, RunContext};
use crate::launch::{self, JobFactory, Launch};

use self::cv::{CvJob, Forecaster, WithModel};
use self::prepared::{Split, prepare};
use self::registry::with_model;

pub(crate) use self::metric::GnnMetric;
pub(crate) use self::prepared::TEST_SIZE;
pub(crate) use self::seeds::fold_seed;
pub(crate) use self::settings::{GnnSettings, Sampling, ScansOnDevice};

/// A resolved `train-gnn` run.
#[derive(Debug, Clone)]
pub(crate) struct GnnRun {
    pub settings: GnnSettings,
    pub monitor: Option<Monitor>,
    pub launch: Launch,
}

/// Builds the job of model `M` on the prepared cohort (data first: a reader error leaves no run
/// directory behind).
struct Factory<M> {
    run: GnnRun,
    model: PhantomData<fn() -> M>,
}

impl<M: Forecaster> JobFactory for Factory<M> {
    type Job<B: AutodiffBackend> = CvJob<B, M>;

    fn name(&self) -> &'static str {
        "train-gnn"
    }

    fn runs_root(&self) -> PathBuf {
        launch::runs_under(&self.run.settings.results_dir)
    }

    fn build<B: AutodiffBackend>(self, ctx: &RunContext<B>) -> Result<CvJob<B, M>> {
        let GnnRun {
            settings, monitor, ..
        } = self.run;
        let paths = CohortPaths {
            sc_dir: settings.sc_dir.clone(),
            morph_root: settings.morph_root.clone(),
            subject_info_csv: settings.subject_info_csv.clone(),
        };
        let prep = prepare(
            &paths,
            &Split {
                folds: settings.fold_ids(),
                cv_folds: settings.cv_folds,
                seed: settings.seed,
                topo_bins: settings.topo_bins,
            },
        )?;
        if M::READS_MORPHOLOGY && !prep.report.morph_nan_files.is_empty() {
            let files: Vec<String> = prep
                .report
                .morph_nan_files
                .iter()
                .map(|(f, n)| format!("{} ({n} cells)", f.display()))
                .collect();
            anyhow::bail!(
                "--model {} takes morphology as input, and {} morphology file(s) have empty or \
                 NA cells, which would make every fold's normalisation NaN: {}; fill them in \
                 or remove the files (their scans then count as without morphology)",
                M::KIND,
                files.len(),
                files.join(", ")
            );
        }
        if ctx.is_main() {
            eprintln!("[train-gnn] {}", prep.report);
            for w in prep.report.warnings() {
                eprintln!("[train-gnn] warning: {w}");
            }
        }
        CvJob::new(settings, monitor, prep, ctx)
    }
}

/// Launches a run of model `M`.
struct Train(GnnRun);

impl WithModel for Train {
    type Output = Result<ExitCode>;
    fn with<M: Forecaster>(self) -> Result<ExitCode> {
        let launch = self.0.launch.clone();
        let factory = Factory::<M> {
            run: self.0,
            model: PhantomData,
        };
        launch::run(launch, factory)
    }
}

/// `trainer train-gnn`.
pub(crate) fn run(run: GnnRun) -> Result<ExitCode> {
    with_model(run.settings.model_kind, Train(run))
}
