//! Degeneracy warnings at the end of a run: results that look like results but say nothing.
//! Each names what to change; the run goes on and ends as usual, and the warnings are said once
//! in its log and kept in `finished.json` (`warnings`), where `sweep status` and `compare` read
//! them.
//!
//! * a monitor flat over a whole stage (the best epoch was picked by order alone);
//! * the stages' (cross-validation folds') best values identical;
//! * the best epoch before a phase of the schedule ended (a warm-up, a term switched on later):
//!   the model kept never trained with it, so its setting had no effect on the result;
//! * every stage kept the model as it was before training, for a job that starts at a fitted
//!   baseline and keeps it unless training beats it ([`super::JobSpec::validate_initial`]): the
//!   forecast is that baseline's, and training added nothing.
//!
//! "Identical" and "flat" mean within [`REL_TOL`] of the values' size: float32's resolution.
//! The metrics are computed in f32 (a relative error of about 6e-8 per operation), so values that
//! agree to 1e-6 (about eight f32 units in the last place) are the same number as far as the
//! computation can tell; float noise across folds with different validation subjects, and any
//! real effect of a setting, is far above it (C2's five folds of a degenerate preset agreed to
//! 8.7e-8, four density cells to 1.6e-9: all identical at f32's resolution).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Monitor;
use super::state::StageResult;
use crate::outputs::metrics_row::MetricsRow;

/// Relative spread below which values count as identical (and a monitor as flat): float32's
/// resolution (see the module's documentation).
pub(crate) const REL_TOL: f64 = 1e-6;

/// A phase of a job's schedule that ends during training: until `last_epoch` (1-based) some part
/// of the objective is off or not at full strength.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Phase {
    /// What is not at full strength before the phase ends (`the topology loss`).
    pub what: String,
    /// The last epoch (1-based) before it is.
    pub last_epoch: usize,
    /// The setting that has no effect when the best epoch comes first (`--lambda-topo`).
    pub setting: String,
}

/// Whether `values` are all within [`REL_TOL`] of each other (at least two finite values).
pub(crate) fn identical(values: &[f64]) -> bool {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.len() < 2 || finite.len() < values.len() {
        return false;
    }
    let (lo, hi) = finite
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let size = lo.abs().max(hi.abs());
    hi - lo <= REL_TOL * size || hi == lo
}

/// The warnings of a finished run: its metrics rows, its stages' results, its monitor, the
/// phases of its schedule and the starting point it evaluated before training (`initial`).
pub(crate) fn check(
    rows: &[MetricsRow],
    stages: &[StageResult],
    monitor: Option<&Monitor>,
    phases: &[Phase],
    initial: Option<&str>,
) -> Vec<String> {
    let mut out = Vec::new();
    let kept_initial = |s: &StageResult| s.best_epoch == 0 && s.best_value.is_some();
    if let (Some(start), Some(m)) = (initial, monitor)
        && !stages.is_empty()
        && stages.iter().all(kept_initial)
    {
        let which = if stages.len() > 1 {
            format!("all {} stages (folds)", stages.len())
        } else {
            "the run".to_string()
        };
        out.push(format!(
            "{which} kept the model as it was before training (epoch 0, by {}): the forecast is \
             its starting point's, {start}, and training added nothing; report that baseline \
             as such, or give training a chance to beat it (more epochs, another learning rate, \
             a smaller --min_delta)",
            m.metric
        ));
    }
    let label = |s: &StageResult| {
        if stages.len() > 1 {
            format!("stage {}: ", s.stage + 1)
        } else {
            String::new()
        }
    };
    let row_stage = stage_of_rows(rows);
    if let Some(m) = monitor {
        for s in stages {
            let values: Vec<f64> = rows
                .iter()
                .zip(&row_stage)
                .filter(|(_, k)| **k == s.stage)
                .filter_map(|(r, _)| r.monitor_value())
                .collect();
            if values.len() >= 3 && identical(&values) {
                out.push(format!(
                    "{}the monitor {} did not change over {} epochs ({}): the best epoch was \
                     picked by order alone, and early stopping by patience; check that training \
                     moves the model (learning rate, a frozen backbone, a preset or model that \
                     does not train)",
                    label(s),
                    m.metric,
                    values.len(),
                    values[0]
                ));
            }
        }
        let best: Vec<f64> = stages.iter().filter_map(|s| s.best_value).collect();
        if stages.len() >= 2 && best.len() == stages.len() && identical(&best) {
            out.push(format!(
                "the {} stages (folds) have the same best {} ({}, to {REL_TOL:e} relative, \
                 float32's resolution): with different training and validation subjects that \
                 means the result does not depend on the data, most likely the model ignores its \
                 training data; check that the model trains and that the metric measures it",
                stages.len(),
                m.metric,
                best[0]
            ));
        }
    }
    for s in stages {
        for p in phases {
            if s.best_epoch >= 1 && s.best_epoch <= p.last_epoch && p.last_epoch < s.epochs_run {
                out.push(format!(
                    "{}the best epoch ({}) came before {} was at full strength (from epoch {} of \
                     {}): the model kept never trained with it, so {} had no effect on the \
                     result; train longer, shorten the warm-up, or monitor a metric it moves",
                    label(s),
                    s.best_epoch,
                    p.what,
                    p.last_epoch + 1,
                    s.epochs_run,
                    p.setting
                ));
            }
        }
    }
    out
}

/// The 0-based stage of each metrics row: stages run one after the other, and a stage's rows
/// share the columns that name it (those before `epoch`, e.g. `fold`), so the k-th distinct
/// naming is stage k.
fn stage_of_rows(rows: &[MetricsRow]) -> Vec<usize> {
    let mut seen: Vec<Vec<(&String, &Value)>> = Vec::new();
    rows.iter()
        .map(|r| {
            let key: Vec<(&String, &Value)> = r.stage_columns().collect();
            match seen.iter().position(|s| *s == key) {
                Some(i) => i,
                None => {
                    seen.push(key);
                    seen.len() - 1
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Mode;
    use serde_json::json;

    fn stage(stage: usize, best: f64, best_epoch: usize, epochs: usize) -> StageResult {
        StageResult {
            stage,
            best_value: Some(best),
            best_epoch,
            epochs_run: epochs,
            stopped_early: false,
            best_checkpoint: None,
            last_checkpoint: None,
        }
    }

    fn monitor() -> Monitor {
        Monitor {
            metric: "val_loss".into(),
            mode: Mode::Min,
            patience: None,
            min_delta: 0.0,
        }
    }

    fn rows(values: &[f64]) -> Vec<MetricsRow> {
        values
            .iter()
            .enumerate()
            .map(|(e, v)| {
                let r = json!({"epoch": e + 1, "monitor_value": v});
                MetricsRow::from(r.as_object().unwrap().clone())
            })
            .collect()
    }

    #[test]
    fn identical_at_float32_resolution_on_both_sides_of_the_tolerance() {
        // C2's five folds of a degenerate preset (relative spread 8.7e-8): identical.
        let c2 = [
            0.07332,
            0.07332 * (1.0 + 8.7e-8),
            0.07332,
            0.07332 * (1.0 - 2e-8),
            0.07332,
        ];
        assert!(identical(&c2));
        // Four density cells that agree to 1.6e-9, two ablations to 2.8e-8: identical.
        assert!(identical(&[0.2, 0.2 * (1.0 + 1.6e-9), 0.2, 0.2]));
        assert!(identical(&[1.5, 1.5 * (1.0 + 2.8e-8)]));
        // Just inside and just outside the tolerance.
        assert!(identical(&[0.3, 0.3 * (1.0 + 0.9e-6)]));
        assert!(!identical(&[0.3, 0.3 * (1.0 + 1.2e-6)]));
        // A genuinely different pair (folds of a model that learns): not identical.
        assert!(!identical(&[0.07332, 0.07349]));
    }

    #[test]
    fn identical_is_relative_and_needs_two_finite_values() {
        assert!(identical(&[0.5, 0.5, 0.5 + 1e-12]));
        assert!(!identical(&[0.5, 0.5001]));
        assert!(!identical(&[0.5]));
        assert!(!identical(&[0.5, f64::NAN]));
        assert!(identical(&[0.0, 0.0]));
        assert!(identical(&[-1e6, -1e6 * (1.0 + 1e-12)]));
    }

    #[test]
    fn a_flat_monitor_is_said_once_and_a_moving_one_not_at_all() {
        let m = monitor();
        let flat = check(
            &rows(&[0.7, 0.7, 0.7]),
            &[stage(0, 0.7, 1, 3)],
            Some(&m),
            &[],
            None,
        );
        assert_eq!(flat.len(), 1);
        assert!(
            flat[0].contains("val_loss did not change over 3 epochs"),
            "{flat:?}"
        );
        let moving = check(
            &rows(&[0.7, 0.6, 0.65]),
            &[stage(0, 0.6, 2, 3)],
            Some(&m),
            &[],
            None,
        );
        assert!(moving.is_empty(), "{moving:?}");
        // Two epochs are not enough to call a monitor flat.
        assert!(
            check(
                &rows(&[0.7, 0.7]),
                &[stage(0, 0.7, 1, 2)],
                Some(&m),
                &[],
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn identical_folds_and_a_best_epoch_before_a_warm_up_are_named() {
        let m = monitor();
        let folds: Vec<StageResult> = (0..5).map(|f| stage(f, 0.25, 8, 40)).collect();
        let w = check(&[], &folds, Some(&m), &[], None);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("5 stages (folds) have the same best val_loss"),
            "{w:?}"
        );
        let phase = Phase {
            what: "the density penalty".into(),
            last_epoch: 10,
            setting: "--lambda-density".into(),
        };
        let one = [stage(0, 0.3, 8, 40)];
        let w = check(&[], &one, Some(&m), std::slice::from_ref(&phase), None);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("best epoch (8) came before the density penalty"),
            "{w:?}"
        );
        assert!(w[0].contains("--lambda-density had no effect"), "{w:?}");
        // Best after the warm-up, or a run that ended inside it: nothing to say.
        assert!(
            check(
                &[],
                &[stage(0, 0.3, 12, 40)],
                Some(&m),
                std::slice::from_ref(&phase),
                None
            )
            .is_empty()
        );
        assert!(check(&[], &[stage(0, 0.3, 8, 9)], Some(&m), &[phase], None).is_empty());
    }

    #[test]
    fn a_run_that_kept_its_starting_point_in_every_stage_is_named_and_one_that_trained_is_not() {
        let m = monitor();
        let start = Some("the eb-drift closed form");
        let kept: Vec<StageResult> = (0..3).map(|f| stage(f, 0.2 + f as f64, 0, 12)).collect();
        let w = check(&[], &kept, Some(&m), &[], start);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("all 3 stages (folds) kept the model as it was before training")
                && w[0].contains("the eb-drift closed form"),
            "{w:?}"
        );
        // One fold trained past its starting point: not degenerate.
        let mut mixed = kept.clone();
        mixed[1].best_epoch = 4;
        assert!(check(&[], &mixed, Some(&m), &[], start).is_empty());
        // A job without a starting point: epoch 0 means nothing here.
        assert!(check(&[], &kept, Some(&m), &[], None).is_empty());
    }
}
