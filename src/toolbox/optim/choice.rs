//! `--optimizer` and `--momentum`: the optimiser flags every training command offers, turned
//! into the [`OptimizerSpec`] its plan carries.

use anyhow::{Result, bail};
use clap::Args;
use serde::{Deserialize, Serialize};

use super::OptimizerSpec;
use crate::settings::OPTIM;

/// `--optimizer`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OptimizerKind {
    #[default]
    Adam,
    Sgd,
}

/// The optimiser flags of a training command.
#[derive(Args, Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OptimizerChoice {
    /// The optimiser: `adam` (β₁ 0.9, β₂ 0.999, ε 1e-8, as `torch.optim.Adam`'s defaults) or
    /// `sgd` (`torch.optim.SGD`, with `--momentum`).
    #[arg(long, value_enum, default_value_t = OptimizerKind::Adam, help_heading = OPTIM)]
    #[serde(default)]
    pub optimizer: OptimizerKind,
    /// SGD's momentum (`--optimizer sgd` only; default 0, as `torch.optim.SGD`).
    #[arg(long, help_heading = OPTIM)]
    #[serde(default)]
    pub momentum: Option<f32>,
}

impl OptimizerChoice {
    /// The optimiser of `--optimizer` and `--momentum`; `--momentum` without SGD, or one that
    /// is negative or not finite, is refused.
    pub(crate) fn spec(&self) -> Result<OptimizerSpec> {
        match (self.optimizer, self.momentum) {
            (OptimizerKind::Adam, Some(_)) => {
                bail!("--momentum applies to --optimizer sgd only (Adam has none)")
            }
            (OptimizerKind::Adam, None) => Ok(OptimizerSpec::default()),
            (OptimizerKind::Sgd, m) => {
                let momentum = m.unwrap_or(0.0);
                if !(momentum.is_finite() && momentum >= 0.0) {
                    bail!("--momentum {momentum}: expected a finite number ≥ 0");
                }
                Ok(OptimizerSpec::Sgd { momentum })
            }
        }
    }

    /// Whether the flags say anything but the default (Adam).
    pub(crate) fn is_default(&self) -> bool {
        *self == Self::default()
    }
}
