//! CLG-ODE's test scoring: the best fold's best weights, with that fold's normalisation and its
//! fitted drift or eb-drift head, forecast the test subjects (visit 1, and visit 2 of those with
//! three visits); the shared protocol writes the result files.

use std::path::Path;

use anyhow::Result;
use burn::prelude::*;

use super::super::config::GnnConfig;
use super::super::prepared::Prepared;
use super::super::protocol::breakdown::three_visit_subjects;
use super::super::protocol::evaluate::versus_identity;
use super::super::protocol::fold_data::{FoldData, delta_t};
use super::super::protocol::test_set::{
    FoldResult, TestRun, best_fold, best_fold_data, write_test_results,
};
use super::evaluate::{predict_at, predict_visit1};
use super::fallback;
use super::step::eval_loss;
use crate::dist::Single;
use crate::models::clg_ode::objective::Objective;
use crate::toolbox::params;

/// Scores CLG-ODE's best fold's best weights on the test subjects and writes the result files
/// into the run directory.
pub(super) fn score_test<B: Backend>(
    config: &GnnConfig,
    objective: &Objective,
    prep: &Prepared,
    finished: &[FoldResult],
    run_dir: &Path,
    device: &B::Device,
) -> Result<()> {
    let best_fold = best_fold(config, finished)?;
    let (data, ck) = best_fold_data(prep, config, &best_fold)?;
    let mut objective = objective.clone();
    objective.population_drift = population_drift(config, prep, &data, best_fold.fold);
    objective.eb_forecaster = eb_forecaster(config, prep, &data, best_fold.fold);
    let objective = &objective;
    let model = params::load(config.model.init::<B>(device), &ck.model(), device)?;
    let (_, test_loss) = eval_loss(
        &model,
        objective,
        &data,
        &config.settings.sampling,
        &prep.test,
        config.settings.batch(),
        config.settings.max_epochs,
        device,
        &Single,
    )?;
    let mut preds = predict_visit1(
        &model,
        objective,
        &data,
        &config.settings.sampling,
        &prep.test,
        8,
        config.settings.max_epochs,
        device,
    );
    let far_subjects = three_visit_subjects(&data, &prep.test);
    let far_dts: Vec<f64> = far_subjects
        .iter()
        .map(|&s| delta_t(data.scans(s), 0, 2))
        .collect();
    let mut far = predict_at(
        &model,
        objective,
        &data,
        &config.settings.sampling,
        &far_subjects,
        &far_dts,
        &vec![Some(2); far_subjects.len()],
        config.settings.max_epochs,
        device,
    );
    let mut test_loss = test_loss;
    let topo_bins = config.settings.topo_bins;
    let choice = fallback::choose(
        config,
        prep,
        &data,
        best_fold.fold,
        &model,
        objective,
        device,
    )?;
    let eb_fallback = choice.map(|(mut choice, params)| {
        let net = versus_identity(&data, &prep.test, &preds, topo_bins);
        choice.clg_ode_test_skill = Some(net.skill.skill);
        if let Some(params) = params {
            preds = fallback::forecast(&params, config, &data, &prep.test, None);
            far = fallback::forecast(&params, config, &data, &far_subjects, Some(&far_dts));
            test_loss = versus_identity(&data, &prep.test, &preds, topo_bins)
                .model
                .sc_log_mse;
        }
        eprintln!("[train-gnn] {}", choice.line());
        choice
    });
    let loss_bins = objective.cfg.topology.loss_bins;
    let results = TestRun {
        config,
        prep,
        finished,
        best: &best_fold,
        test_loss,
        eb_fallback,
    };
    write_test_results(&results, &data, &preds, Some(&far), loss_bins, run_dir)
}

/// The population drift of fold `fold`'s training subjects when the model starts its residual
/// from it (`--drift-head`).
pub(super) fn population_drift(
    config: &GnnConfig,
    prep: &Prepared,
    data: &FoldData,
    fold: usize,
) -> Option<Vec<f32>> {
    let split = prep.folds.iter().find(|s| s.fold == fold)?;
    config
        .settings
        .decoder
        .drift_head
        .then(|| super::super::fits::fit_population_drift(data, &split.train))
}

/// The empirical-Bayes forecaster of fold `fold`'s training subjects when the model starts its
/// residual from it (`--eb-head`).
pub(super) fn eb_forecaster(
    config: &GnnConfig,
    prep: &Prepared,
    data: &FoldData,
    fold: usize,
) -> Option<std::sync::Arc<crate::models::eb_drift::EbParams>> {
    let split = prep.folds.iter().find(|s| s.fold == fold)?;
    config
        .settings
        .decoder
        .eb_head
        .then(|| super::super::fits::fit_arc(data, &split.train))
}
