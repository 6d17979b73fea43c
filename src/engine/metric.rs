//! A job's metrics as a typed enum of the job's ([`JobMetric`]): every column its evaluation
//! writes beside the engine's `train_loss`, which way is better, which ones a monitor may name
//! (`--early-stop-metric`), and where `curves.svg` draws them. The panels of a job's curves are
//! derived from it ([`panels`]); nothing lists a panel by hand.

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use crate::outputs::curves::Panel;
pub(crate) use crate::outputs::metrics::TRAIN_LOSS;

/// Whether lower or higher values of the monitored metric are better.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Mode {
    Min,
    Max,
}

/// Where `curves.svg` draws a metric: in the panel titled `panel`, as a line with a marker per
/// epoch, or dashed when it is a `reference` (a baseline such as the identity forecast).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Drawn {
    pub panel: &'static str,
    pub reference: bool,
}

impl Drawn {
    /// A line of panel `panel`.
    pub(crate) const fn line(panel: &'static str) -> Option<Self> {
        Some(Self {
            panel,
            reference: false,
        })
    }

    /// A dashed reference line of panel `panel`.
    pub(crate) const fn reference(panel: &'static str) -> Option<Self> {
        Some(Self {
            panel,
            reference: true,
        })
    }
}

/// A job's metrics, as a typed enum of the job's: each one's column in the metrics rows,
/// which way is better, whether a monitor may name it and where the curves draw it.
/// `--early-stop-metric` is checked against it, `--early-stop-mode` defaults to it and the
/// job's curve panels are [`panels`] of it.
pub(crate) trait JobMetric: Copy + PartialEq + 'static {
    /// Every column, in the order a row writes them (the engine's [`TRAIN_LOSS`] included when
    /// the job draws it).
    const ALL: &'static [Self];
    /// Its column in the metrics rows (`val_loss`).
    fn name(self) -> &'static str;
    /// Which way is better.
    fn mode(self) -> Mode;
    /// Whether `--early-stop-metric` may name it (every metric unless the job says otherwise).
    fn monitorable(self) -> bool {
        true
    }
    /// Where `curves.svg` draws it (`None`: a column only).
    fn drawn(self) -> Option<Drawn> {
        None
    }
    /// The monitorable metric of column `name`, if the job has it.
    fn named(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|m| m.monitorable() && m.name() == name)
    }
}

/// The job's monitorable metric of column `name`; an error naming the choices when it has none.
pub(crate) fn metric_named<M: JobMetric>(name: &str) -> Result<M> {
    match M::named(name) {
        Some(m) => Ok(m),
        None => bail!(
            "early-stopping metric `{name}` is not one this job evaluates; choose one of: {}",
            M::ALL
                .iter()
                .filter(|m| m.monitorable())
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The panels of `curves.svg` that draw `metrics`: one per panel title, in the order the
/// titles first appear, each metric a line or a dashed reference line as it says. A metric
/// the curves do not draw is left out.
pub(crate) fn panels<M: JobMetric>(metrics: &[M]) -> Vec<Panel> {
    let mut panels: Vec<Panel> = Vec::new();
    for &m in metrics {
        let Some(d) = m.drawn() else { continue };
        let i = match panels.iter().position(|p| p.title == d.panel) {
            Some(i) => i,
            None => {
                panels.push(Panel::new(d.panel, &[], &[]));
                panels.len() - 1
            }
        };
        let lines = if d.reference {
            &mut panels[i].baselines
        } else {
            &mut panels[i].series
        };
        lines.push(m.name().to_string());
    }
    panels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Toy {
        Train,
        Loss,
        Accuracy,
        Chance,
    }

    impl JobMetric for Toy {
        const ALL: &'static [Self] = &[Toy::Train, Toy::Loss, Toy::Accuracy, Toy::Chance];
        fn name(self) -> &'static str {
            match self {
                Toy::Train => TRAIN_LOSS,
                Toy::Loss => "val_loss",
                Toy::Accuracy => "val_accuracy",
                Toy::Chance => "chance_accuracy",
            }
        }
        fn mode(self) -> Mode {
            match self {
                Toy::Train | Toy::Loss => Mode::Min,
                Toy::Accuracy | Toy::Chance => Mode::Max,
            }
        }
        fn monitorable(self) -> bool {
            matches!(self, Toy::Loss | Toy::Accuracy)
        }
        fn drawn(self) -> Option<Drawn> {
            match self {
                Toy::Train | Toy::Loss => Drawn::line("loss"),
                Toy::Accuracy => Drawn::line("accuracy"),
                Toy::Chance => Drawn::reference("accuracy"),
            }
        }
    }

    #[test]
    fn panels_group_by_title_in_first_appearance_order() {
        let p = panels(&[Toy::Accuracy, Toy::Train, Toy::Chance, Toy::Loss]);
        assert_eq!(
            p,
            vec![
                Panel::new("accuracy", &["val_accuracy"], &["chance_accuracy"]),
                Panel::new("loss", &[TRAIN_LOSS, "val_loss"], &[]),
            ]
        );
        assert_eq!(panels(&[Toy::Loss]).len(), 1, "only the panels asked for");
    }

    #[test]
    fn only_monitorable_metrics_are_named_or_offered() {
        assert_eq!(Toy::named("val_accuracy"), Some(Toy::Accuracy));
        assert_eq!(
            Toy::named(TRAIN_LOSS),
            None,
            "train_loss is a column, not a monitor"
        );
        let e = metric_named::<Toy>("chance_accuracy").unwrap_err();
        assert!(
            e.to_string()
                .ends_with("choose one of: val_loss, val_accuracy"),
            "{e}"
        );
    }
}
