//! The metrics a `train-gnn` run can monitor ([`GnnMetric`]): the reference's five and the skill
//! against the identity forecast, each with its column and which way is better.

use crate::engine::{JobMetric, Mode};

/// A metric `--early-stop-metric` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GnnMetric {
    /// The objective on the validation subjects (the default).
    ValLoss,
    ValScLogMse,
    ValScLogPearsonTopk,
    ValScLogPearsonSparse,
    /// `val_sc_log_mse` + `--early-stop-density-weight` × the validation density loss.
    MonitorMsePlusDensity,
    /// 1 − the forecast's SC log-MSE over the identity forecast's.
    ValSkill,
}

impl GnnMetric {
    /// Whether it needs the validation SC metrics (every epoch, whatever
    /// `--val-sc-eval-every` says): all but `val_loss`.
    pub fn needs_val_sc(self) -> bool {
        self != GnnMetric::ValLoss
    }
}

impl JobMetric for GnnMetric {
    const ALL: &'static [Self] = &[
        GnnMetric::ValLoss,
        GnnMetric::ValScLogMse,
        GnnMetric::ValScLogPearsonTopk,
        GnnMetric::ValScLogPearsonSparse,
        GnnMetric::MonitorMsePlusDensity,
        GnnMetric::ValSkill,
    ];

    fn name(self) -> &'static str {
        match self {
            GnnMetric::ValLoss => "val_loss",
            GnnMetric::ValScLogMse => "val_sc_log_mse",
            GnnMetric::ValScLogPearsonTopk => "val_sc_log_pearson_topk",
            GnnMetric::ValScLogPearsonSparse => "val_sc_log_pearson_sparse",
            GnnMetric::MonitorMsePlusDensity => "monitor_mse_plus_density",
            GnnMetric::ValSkill => "val_skill",
        }
    }

    fn mode(self) -> Mode {
        match self {
            GnnMetric::ValScLogPearsonTopk
            | GnnMetric::ValScLogPearsonSparse
            | GnnMetric::ValSkill => Mode::Max,
            GnnMetric::ValLoss | GnnMetric::ValScLogMse | GnnMetric::MonitorMsePlusDensity => {
                Mode::Min
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Row;
    use crate::train::gnn::protocol::columns::val_sc_columns;

    /// Every metric but `val_loss` (the head of every epoch's row) is a validation SC column:
    /// a monitor never looks for a column the job does not write.
    #[test]
    fn every_metric_is_a_column_of_the_epoch_row() {
        let mut row = Row::new();
        val_sc_columns(None, 0.0, 0.0, &mut row);
        for &m in GnnMetric::ALL {
            assert_eq!(m.needs_val_sc(), row.contains_key(m.name()), "{m:?}");
        }
    }
}
