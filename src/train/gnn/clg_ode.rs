//! `train-gnn --model clg-ode`: CLG-ODE as a [`GnnModel`]: its job ([`GnnJob`]) and its
//! forecast from a saved run (the objective's state at the end of the run, the fold's
//! population drift, visit 1 or any Δt ahead).

use std::path::Path;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;

use super::Prepared;
use super::breakdown::Predictions;
use super::evaluate::{predict_at, predict_visit1};
use super::job::GnnJob;
use super::kind::ModelKind;
use super::model::GnnModel;
use super::saved_run::{Horizon, SavedRun};
use super::settings::GnnSettings;
use super::test_set::{eb_forecaster, population_drift};
use crate::engine::{Monitor, RunContext};
use crate::models::clg_ode::MODEL_NAME;
use crate::models::clg_ode::objective::{Objective, ObjectiveState};
use crate::outputs::RunDir;
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

/// `--model clg-ode`.
pub struct ClgOdeModel;

impl GnnModel for ClgOdeModel {
    const KIND: ModelKind = ModelKind::ClgOde;
    const FILE_STEM: &'static str = MODEL_NAME;
    const TIME_INPUT: bool = true;
    const NEEDS_SUBJECT_TABLE: bool = true;
    type Job<B: AutodiffBackend> = GnnJob<B>;

    fn job<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<GnnJob<B>> {
        GnnJob::new(settings, monitor, prep, ctx)
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        device: &B::Device,
    ) -> Result<Predictions> {
        let (set, data) = (&run.config.settings, &run.data);
        let model = params::load(
            run.config.model.init::<B::InnerBackend>(device),
            &run.ck.with_prefix("model"),
            device,
        )?;
        let mut objective = Objective::new(
            set.objective.clone(),
            set.decoder.fixed_support,
            set.max_epochs,
            set.seed,
        );
        objective.state = final_state(&run.run_dir);
        objective.population_drift = population_drift(&run.config, &run.prep, data, run.fold);
        objective.eb_forecaster = eb_forecaster(&run.config, &run.prep, data, run.fold);
        let (obj, sampling, epoch) = (&objective, &set.sampling, set.max_epochs);
        Ok(match *horizon {
            Horizon::NextVisit => {
                predict_visit1(&model, obj, data, sampling, subjects, 8, epoch, device)
            }
            Horizon::Years { dts, targets } => predict_at(
                &model, obj, data, sampling, subjects, dts, targets, epoch, device,
            ),
        })
    }
}

/// The objective's state at the end of the run (from its last resume checkpoint), as the test
/// scoring at the end of training used it; the initial state when there is none.
fn final_state(run_dir: &Path) -> ObjectiveState {
    Checkpoint::load(&RunDir::new(run_dir).last_checkpoint())
        .ok()
        .and_then(|ck| ck.metadata.get("job_state").cloned())
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| serde_json::from_value(v["objective"].clone()).ok())
        .unwrap_or_default()
}
