//! The metrics of a `train-gnn` run ([`GnnMetric`]): every column its rows write beside the
//! settings, which way is better, the six a monitor may name (the reference's five and the skill
//! against the identity forecast), what each validation SC column is computed from, and the
//! panels of `curves.svg`.

use crate::engine::{Drawn, JobMetric, Mode, TRAIN_LOSS};
use crate::metrics::ScKey;

/// The metrics of a `train-gnn` run, in the order its rows write them: the engine's training
/// loss, the validation loss, then the validation SC columns (the reference's eight, the
/// identity forecast's three, the skill, the Pearson gain, `monitor_mse_plus_density`; null in
/// epochs that do not compute them). Six of them are `--early-stop-metric`'s choices, as in
/// the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GnnMetric {
    TrainLoss,
    /// The objective on the validation subjects (the default monitor).
    ValLoss,
    ValScLogMse,
    ValScLogMae,
    ValScLogPearson,
    ValScLogPearsonPos,
    ValScLogPearsonTopk,
    ValScLogPearsonSparse,
    ValEccL2,
    ValEccPearson,
    ValIdentityScLogMse,
    ValIdentityScLogPearson,
    ValIdentityScLogPearsonSparse,
    /// 1 − the forecast's SC log-MSE over the identity forecast's.
    ValSkill,
    /// The forecast's SC log-Pearson minus the identity forecast's.
    ValPearsonGain,
    /// `val_sc_log_mse` + `--early-stop-density-weight` × the validation density loss.
    MonitorMsePlusDensity,
}

/// What a validation SC column is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScSource {
    /// The forecast's SC metric of this key (`sc_log_mse`).
    Model(ScKey),
    /// The identity forecast's SC metric of this key.
    Identity(ScKey),
    Skill,
    PearsonGain,
    /// The forecast's SC log-MSE plus the weighted validation density loss.
    MsePlusDensity,
}

impl GnnMetric {
    /// Whether it needs the validation SC metrics (every epoch, whatever
    /// `--val-sc-eval-every` says): all but the two losses.
    pub(crate) fn needs_val_sc(self) -> bool {
        self.sc_source().is_some()
    }

    /// What its validation SC column is computed from (`None`: a loss).
    pub(crate) fn sc_source(self) -> Option<ScSource> {
        use GnnMetric::*;
        Some(match self {
            TrainLoss | ValLoss => return None,
            ValScLogMse => ScSource::Model(ScKey::ScLogMse),
            ValScLogMae => ScSource::Model(ScKey::ScLogMae),
            ValScLogPearson => ScSource::Model(ScKey::ScLogPearson),
            ValScLogPearsonPos => ScSource::Model(ScKey::ScLogPearsonPos),
            ValScLogPearsonTopk => ScSource::Model(ScKey::ScLogPearsonTopk),
            ValScLogPearsonSparse => ScSource::Model(ScKey::ScLogPearsonSparse),
            ValEccL2 => ScSource::Model(ScKey::EccL2),
            ValEccPearson => ScSource::Model(ScKey::EccPearson),
            ValIdentityScLogMse => ScSource::Identity(ScKey::ScLogMse),
            ValIdentityScLogPearson => ScSource::Identity(ScKey::ScLogPearson),
            ValIdentityScLogPearsonSparse => ScSource::Identity(ScKey::ScLogPearsonSparse),
            ValSkill => ScSource::Skill,
            ValPearsonGain => ScSource::PearsonGain,
            MonitorMsePlusDensity => ScSource::MsePlusDensity,
        })
    }
}

impl JobMetric for GnnMetric {
    const ALL: &'static [Self] = &[
        GnnMetric::TrainLoss,
        GnnMetric::ValLoss,
        GnnMetric::ValScLogMse,
        GnnMetric::ValScLogMae,
        GnnMetric::ValScLogPearson,
        GnnMetric::ValScLogPearsonPos,
        GnnMetric::ValScLogPearsonTopk,
        GnnMetric::ValScLogPearsonSparse,
        GnnMetric::ValEccL2,
        GnnMetric::ValEccPearson,
        GnnMetric::ValIdentityScLogMse,
        GnnMetric::ValIdentityScLogPearson,
        GnnMetric::ValIdentityScLogPearsonSparse,
        GnnMetric::ValSkill,
        GnnMetric::ValPearsonGain,
        GnnMetric::MonitorMsePlusDensity,
    ];

    fn name(self) -> &'static str {
        use GnnMetric::*;
        match self {
            TrainLoss => TRAIN_LOSS,
            ValLoss => "val_loss",
            ValScLogMse => "val_sc_log_mse",
            ValScLogMae => "val_sc_log_mae",
            ValScLogPearson => "val_sc_log_pearson",
            ValScLogPearsonPos => "val_sc_log_pearson_pos",
            ValScLogPearsonTopk => "val_sc_log_pearson_topk",
            ValScLogPearsonSparse => "val_sc_log_pearson_sparse",
            ValEccL2 => "val_ecc_l2",
            ValEccPearson => "val_ecc_pearson",
            ValIdentityScLogMse => "val_identity_sc_log_mse",
            ValIdentityScLogPearson => "val_identity_sc_log_pearson",
            ValIdentityScLogPearsonSparse => "val_identity_sc_log_pearson_sparse",
            ValSkill => "val_skill",
            ValPearsonGain => "val_pearson_gain",
            MonitorMsePlusDensity => "monitor_mse_plus_density",
        }
    }

    fn mode(self) -> Mode {
        use GnnMetric::*;
        match self {
            ValScLogPearson
            | ValScLogPearsonPos
            | ValScLogPearsonTopk
            | ValScLogPearsonSparse
            | ValEccPearson
            | ValIdentityScLogPearson
            | ValIdentityScLogPearsonSparse
            | ValSkill
            | ValPearsonGain => Mode::Max,
            TrainLoss
            | ValLoss
            | ValScLogMse
            | ValScLogMae
            | ValEccL2
            | ValIdentityScLogMse
            | MonitorMsePlusDensity => Mode::Min,
        }
    }

    /// The reference's `--early_stop_metric` choices.
    fn monitorable(self) -> bool {
        use GnnMetric::*;
        matches!(
            self,
            ValLoss
                | ValScLogMse
                | ValScLogPearsonTopk
                | ValScLogPearsonSparse
                | ValSkill
                | MonitorMsePlusDensity
        )
    }

    /// Both losses in one panel; the SC log-MSE and log-Pearson each beside the identity
    /// forecast's (dashed).
    fn drawn(self) -> Option<Drawn> {
        use GnnMetric::*;
        const MSE: &str = "validation sc_log_mse";
        const PEARSON: &str = "validation sc_log_pearson";
        match self {
            TrainLoss | ValLoss => Drawn::line("loss"),
            ValScLogMse => Drawn::line(MSE),
            ValIdentityScLogMse => Drawn::reference(MSE),
            ValScLogPearson => Drawn::line(PEARSON),
            ValIdentityScLogPearson => Drawn::reference(PEARSON),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Panel, Row, panels};
    use crate::train::gnn::protocol::columns::val_sc_columns;

    /// The validation SC columns are exactly the metrics with an SC source, in the enum's
    /// order: a monitor never looks for a column the job does not write, and the enum is the
    /// row's column list.
    #[test]
    fn the_validation_sc_columns_are_the_enums_in_its_order() {
        let mut row = Row::new();
        val_sc_columns(None, 0.0, 0.0, &mut row);
        let written: Vec<&str> = row.keys().map(String::as_str).collect();
        let sc: Vec<&str> = GnnMetric::ALL
            .iter()
            .filter(|m| m.needs_val_sc())
            .map(|m| m.name())
            .collect();
        assert_eq!(written, sc);
        assert_eq!(written.len(), 14);
        // A column of the forecast's (the identity's) SC metric is named after its key.
        for m in GnnMetric::ALL {
            match m.sc_source() {
                Some(ScSource::Model(k)) => assert_eq!(m.name(), format!("val_{}", k.name())),
                Some(ScSource::Identity(k)) => {
                    assert_eq!(m.name(), format!("val_identity_{}", k.name()))
                }
                _ => {}
            }
        }
    }

    #[test]
    fn the_monitors_are_the_references_six_and_the_panels_pair_each_with_identity() {
        let monitors: Vec<&str> = GnnMetric::ALL
            .iter()
            .filter(|m| m.monitorable())
            .map(|m| m.name())
            .collect();
        assert_eq!(
            monitors,
            [
                "val_loss",
                "val_sc_log_mse",
                "val_sc_log_pearson_topk",
                "val_sc_log_pearson_sparse",
                "val_skill",
                "monitor_mse_plus_density"
            ]
        );
        assert_eq!(
            panels(GnnMetric::ALL),
            vec![
                Panel::new("loss", &["train_loss", "val_loss"], &[]),
                Panel::new(
                    "validation sc_log_mse",
                    &["val_sc_log_mse"],
                    &["val_identity_sc_log_mse"]
                ),
                Panel::new(
                    "validation sc_log_pearson",
                    &["val_sc_log_pearson"],
                    &["val_identity_sc_log_pearson"]
                ),
            ]
        );
    }
}
