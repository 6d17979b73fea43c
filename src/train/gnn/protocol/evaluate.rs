//! Test-set SC metrics (docs/clg-ode-model.md §5.1): one prediction per subject from visit 0 with clean inputs —
//! a forecast of visit 1 over Δt_01 when the subject has ≥ 2 visits, else the reconstruction of
//! visit 0 — scored with [`sc_metrics`](crate::metrics::sc_metrics) and averaged over subjects;
//! next to it the identity baseline (visit 0 predicts visit 1).

use super::super::versus::Versus;
use super::breakdown::{Predictions, SubjectScore, per_subject};
use super::fold_data::FoldData;
use crate::data::connectome::par_map;
use crate::metrics::Skill;
use crate::metrics::sc::ScMetrics;
use crate::metrics::topology::ExactTopology;
use crate::outputs::result_files::{ExactVersus, ForecastOnly, TestMetrics};
use ndarray::Array2;

/// Scores `preds` (one per subject of `subjects`) and the identity forecast (visit 0 for visit
/// 1), averaged over subjects.
pub(crate) fn versus_identity(
    data: &FoldData,
    subjects: &[usize],
    preds: &Predictions,
    topo_bins: usize,
) -> Versus {
    let t = test_metrics(data, subjects, preds, topo_bins);
    Versus {
        n_subjects: subjects.len(),
        skill: Skill::of(&t.model, &t.identity_baseline),
        model: t.model,
        identity: t.identity_baseline,
    }
}

/// Subject `sub`'s visit 0 (the identity forecast) and what a prediction is scored against:
/// visit 1 when there is one (`true`: a forecast), else visit 0 (a reconstruction).
fn start_and_truth(data: &FoldData, sub: usize) -> (Array2<f32>, Array2<f32>, bool) {
    let scans = data.scans(sub);
    let a0 = scans[0].a_raw.dense();
    match scans.get(1) {
        Some(s) => (a0, s.a_raw.dense(), true),
        None => (a0.clone(), a0, false),
    }
}

/// Scores `preds` (one per subject of `subjects`: visit 1 from visit 0, else visit 0's
/// reconstruction).
pub(crate) fn test_metrics(
    data: &FoldData,
    subjects: &[usize],
    preds: &Predictions,
    topo_bins: usize,
) -> TestMetrics {
    TestMetrics::of(&per_subject(data, subjects, preds, topo_bins))
}

/// The test metrics' computation (the type is the file's: `crate::outputs::result_files`).
impl TestMetrics {
    /// The averages of per-subject scores.
    pub(crate) fn of(rows: &[SubjectScore]) -> TestMetrics {
        let scored: Vec<(bool, ScMetrics, ScMetrics)> = rows
            .iter()
            .map(|r| (r.forecast, r.model, r.identity))
            .collect();
        let subjects = rows;
        let all_m: Vec<ScMetrics> = scored.iter().map(|s| s.1).collect();
        let all_b: Vec<ScMetrics> = scored.iter().map(|s| s.2).collect();
        let fo_m: Vec<ScMetrics> = scored.iter().filter(|s| s.0).map(|s| s.1).collect();
        let fo_b: Vec<ScMetrics> = scored.iter().filter(|s| s.0).map(|s| s.2).collect();
        TestMetrics {
            protocol: "one prediction per test subject from visit 0 (clean inputs, z0 = mu): \
                   forecast of visit 1 over dt_01 when the subject has >= 2 visits, else \
                   reconstruction of visit 0; metrics averaged over subjects. \
                   identity_baseline predicts visit 1 by visit 0's A_raw."
                .into(),
            n_subjects: subjects.len(),
            model: ScMetrics::mean(&all_m),
            identity_baseline: ScMetrics::mean(&all_b),
            skill: Skill::of(&ScMetrics::mean(&all_m), &ScMetrics::mean(&all_b)),
            forecast_only: ForecastOnly {
                n_subjects: fo_m.len(),
                model: ScMetrics::mean(&fo_m),
                identity_baseline: ScMetrics::mean(&fo_b),
                skill: Skill::of(&ScMetrics::mean(&fo_m), &ScMetrics::mean(&fo_b)),
            },
        }
    }
}

/// See [`ExactVersus`]; the truth is visit 1 when there is one, else visit 0 (as in
/// [`test_metrics`]). A prediction's graph (`--forecast graph`) is scored where it has one, else
/// its matrix. Beside the means, every subject's (model, identity) scores, in `subjects`' order
/// (`per_subject.csv`'s `betti*_l1` columns).
pub(crate) fn exact_topology(
    data: &FoldData,
    subjects: &[usize],
    preds: &Predictions,
    bins: usize,
) -> (ExactVersus, Vec<(ExactTopology, ExactTopology)>) {
    let items: Vec<(usize, &Array2<f32>)> = subjects
        .iter()
        .copied()
        .zip(&preds.matrices)
        .enumerate()
        .map(|(i, (sub, m))| match preds.graphs.get(i) {
            Some(Some(g)) => (sub, g),
            _ => (sub, m),
        })
        .collect();
    let scored: Vec<(ExactTopology, ExactTopology)> = par_map(&items, |&(sub, pred)| {
        let (a0, truth, _) = start_and_truth(data, sub);
        (
            ExactTopology::of(pred.view(), truth.view(), bins),
            ExactTopology::of(a0.view(), truth.view(), bins),
        )
    });
    let (m, b): (Vec<_>, Vec<_>) = scored.iter().cloned().unzip();
    let means = ExactVersus {
        thresholds: bins,
        model: ExactTopology::mean(&m),
        identity_baseline: ExactTopology::mean(&b),
    };
    (means, scored)
}
