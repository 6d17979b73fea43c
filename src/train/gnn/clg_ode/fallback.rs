//! `--eb-fallback`: the closed-form eb-drift forecast instead of the network's when the
//! network does not beat it on the fold's validation subjects. After training, the best
//! fold's best weights and eb-drift fitted on that fold's training subjects (as
//! `--model eb-drift` fits it, the small-sample check included: one global shrinkage factor
//! where the data support no more) forecast the fold's validation subjects; CLG-ODE's
//! forecasts are kept only when its validation sc_log_mse skill exceeds eb-drift's by more
//! than `--min-delta` (the simpler, closed-form model wins ties), else every forecast the run
//! writes (test files, `eval-gnn`, `predict`, `plot-sc`) is eb-drift's, and the run says so. The
//! choice depends only on the saved run (weights, cohort, split), so a saved run repeats it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use burn::prelude::*;

use super::super::closed_form::ClosedFormFit;
use super::super::config::GnnConfig;
use super::super::eb_drift::EbDriftModel;
use super::super::prepared::Prepared;
use super::super::protocol::breakdown::Predictions;
use super::super::protocol::evaluate::versus_identity;
use super::super::protocol::fold_data::FoldData;
use super::evaluate::predict_visit1;
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::objective::Objective;
use crate::models::eb_drift::EbParams;
use crate::outputs::result_files::FallbackChoice;

/// The choice, with eb-drift's fit when it is used: `None` without `--eb-fallback`.
pub(super) fn choose<B: Backend>(
    config: &GnnConfig,
    prep: &Prepared,
    data: &FoldData,
    fold: usize,
    model: &ClgOde<B>,
    objective: &Objective,
    device: &B::Device,
) -> Result<Option<(FallbackChoice, Option<Arc<EbParams>>)>> {
    let s = &config.settings;
    if !s.eb_fallback {
        return Ok(None);
    }
    let split = prep
        .folds
        .iter()
        .find(|f| f.fold == fold)
        .context("--eb-fallback: the best fold is not in the fold list")?;
    let params = super::super::fits::fit_arc(data, &split.train);
    let val = &split.val;
    let net = predict_visit1(
        model,
        objective,
        data,
        &s.sampling,
        val,
        8,
        s.max_epochs,
        device,
    );
    let eb = forecast(&params, config, data, val, None);
    let skill = |p: &Predictions| versus_identity(data, val, p, s.topo_bins).skill.skill;
    let (clg_ode_val_skill, eb_drift_val_skill) = (skill(&net), skill(&eb));
    let min_delta = config.monitor.as_ref().map_or(0.0, |m| m.min_delta);
    let used = falls_back(clg_ode_val_skill, eb_drift_val_skill, min_delta);
    let choice = FallbackChoice {
        fold,
        val_subjects: val.len(),
        clg_ode_val_skill,
        eb_drift_val_skill,
        min_delta,
        used,
        clg_ode_test_skill: None,
    };
    Ok(Some((choice, used.then_some(params))))
}

/// Whether the forecasts are eb-drift's: unless the network's validation skill `net` beats
/// eb-drift's `eb` by more than `min_delta` (a NaN skill, no validation forecast, never beats
/// it; both are NaN together, when the identity's validation error is 0).
fn falls_back(net: f64, eb: f64, min_delta: f64) -> bool {
    net.partial_cmp(&(eb + min_delta)) != Some(std::cmp::Ordering::Greater)
}

/// eb-drift's dense forecasts of `subjects` from visit 0: at visit 1, or `dts` years ahead.
pub(super) fn forecast(
    params: &EbParams,
    config: &GnnConfig,
    data: &FoldData,
    subjects: &[usize],
    dts: Option<&[f64]>,
) -> Predictions {
    let f = EbDriftModel::forecaster(params.clone(), &config.settings);
    Predictions::from(f(data, subjects, dts))
}

/// Prints `line` unless this process printed it already (a saved run's command forecasts
/// several times, with the same choice each time).
pub(super) fn say_once(line: &str) {
    static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
    if said.insert(line.to_string()) {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::falls_back;

    #[test]
    fn the_network_is_kept_only_when_it_beats_eb_drift_by_more_than_min_delta() {
        assert!(!falls_back(0.30, 0.20, 0.0), "better: kept");
        assert!(falls_back(0.20, 0.20, 0.0), "a tie goes to the closed form");
        assert!(falls_back(0.10, 0.20, 0.0), "worse: eb-drift");
        assert!(
            falls_back(0.205, 0.20, 0.01),
            "better by less than min delta: eb-drift"
        );
        assert!(
            !falls_back(0.215, 0.20, 0.01),
            "better by more than min delta: kept"
        );
        assert!(
            falls_back(f64::NAN, 0.20, 0.0),
            "no validation skill: eb-drift"
        );
    }
}
