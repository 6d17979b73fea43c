//! Early stopping and best-model selection on a named metric with a direction.

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::metric::{JobMetric, Mode, metric_named};

/// The metric that picks the best epoch and, with a patience, stops a stage early.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Monitor {
    /// A column of the job's evaluation (e.g. `val_loss`, `test_accuracy`).
    pub metric: String,
    pub mode: Mode,
    /// Epochs without a strict improvement before the stage stops; `None`: never stop early.
    pub patience: Option<usize>,
    /// How much better than the best a value must be to count as an improvement.
    #[serde(default)]
    pub min_delta: f64,
}

impl Monitor {
    /// A monitor of `metric` (its own mode unless `mode` says otherwise).
    pub(crate) fn of<M: JobMetric>(
        metric: M,
        mode: Option<Mode>,
        patience: Option<usize>,
        min_delta: f64,
    ) -> Self {
        Monitor {
            metric: metric.name().to_string(),
            mode: mode.unwrap_or(metric.mode()),
            patience,
            min_delta,
        }
    }

    /// The job's metric this monitors (see [`metric_named`]).
    pub(crate) fn metric_of<M: JobMetric>(&self) -> Result<M> {
        metric_named(&self.metric)
    }

    /// Whether `value` improves on `best` by more than `min_delta` (a non-finite value never
    /// does).
    pub(crate) fn improves(&self, value: f64, best: Option<f64>) -> bool {
        value.is_finite()
            && best.is_none_or(|b| match self.mode {
                Mode::Min => value < b - self.min_delta,
                Mode::Max => value > b + self.min_delta,
            })
    }
}

/// Where a stage stands against its monitor.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MonitorState {
    pub best: Option<f64>,
    /// 1-based epoch of the best value (0: none yet).
    pub best_epoch: usize,
    pub bad_epochs: usize,
}

impl MonitorState {
    /// Records epoch `epoch` (1-based) with `value`; returns whether it is the new best.
    pub(crate) fn record(&mut self, monitor: &Monitor, value: f64, epoch: usize) -> bool {
        if monitor.improves(value, self.best) {
            self.best = Some(value);
            self.best_epoch = epoch;
            self.bad_epochs = 0;
            true
        } else {
            self.bad_epochs += 1;
            false
        }
    }

    /// Whether the patience is spent.
    pub(crate) fn exhausted(&self, monitor: &Monitor) -> bool {
        monitor.patience.is_some_and(|p| self.bad_epochs >= p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(mode: Mode, patience: Option<usize>) -> Monitor {
        Monitor {
            metric: "x".into(),
            mode,
            patience,
            min_delta: 0.0,
        }
    }

    #[test]
    fn improvements_within_min_delta_do_not_count() {
        let mut mon = m(Mode::Max, Some(2));
        mon.min_delta = 0.1;
        let mut s = MonitorState::default();
        assert!(s.record(&mon, 0.5, 1));
        assert!(!s.record(&mon, 0.55, 2), "0.05 better is within min_delta");
        assert!(!s.exhausted(&mon) && s.record(&mon, 0.65, 3));
        mon.mode = Mode::Min;
        assert!(mon.improves(0.5, Some(0.65)) && !mon.improves(0.6, Some(0.65)));
    }

    #[test]
    fn min_and_max_and_patience() {
        let min = m(Mode::Min, Some(2));
        let mut s = MonitorState::default();
        assert!(s.record(&min, 3.0, 1));
        assert!(!s.record(&min, 3.0, 2), "equal is not an improvement");
        assert!(!s.exhausted(&min));
        assert!(!s.record(&min, f64::NAN, 3));
        assert!(s.exhausted(&min));
        assert_eq!((s.best, s.best_epoch), (Some(3.0), 1));

        let max = m(Mode::Max, None);
        let mut s = MonitorState::default();
        assert!(s.record(&max, 0.5, 1));
        assert!(s.record(&max, 0.7, 2));
        assert!(!s.record(&max, 0.6, 3));
        for e in 4..100 {
            s.record(&max, 0.0, e);
        }
        assert!(!s.exhausted(&max), "no patience: never exhausted");
        assert_eq!(s.best_epoch, 2);
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Two {
        Loss,
        Accuracy,
    }

    impl JobMetric for Two {
        const ALL: &'static [Self] = &[Two::Loss, Two::Accuracy];
        fn name(self) -> &'static str {
            match self {
                Two::Loss => "val_loss",
                Two::Accuracy => "val_accuracy",
            }
        }
        fn mode(self) -> Mode {
            match self {
                Two::Loss => Mode::Min,
                Two::Accuracy => Mode::Max,
            }
        }
    }

    #[test]
    fn unknown_metric_names_the_choices_and_a_metric_brings_its_mode() {
        let e = m(Mode::Min, None).metric_of::<Two>().unwrap_err();
        assert!(e.to_string().contains("val_loss, val_accuracy"), "{e}");
        let acc = Monitor::of(Two::Accuracy, None, None, 0.0);
        assert_eq!(
            (acc.metric_of::<Two>().unwrap(), acc.mode),
            (Two::Accuracy, Mode::Max)
        );
        let min = Monitor::of(Two::Accuracy, Some(Mode::Min), None, 0.0);
        assert_eq!(min.mode, Mode::Min, "--early-stop-mode wins");
    }
}
