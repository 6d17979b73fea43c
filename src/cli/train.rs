//! The training commands: each flattens its job's settings struct (which owns the flags) beside
//! the shared run, device and early-stopping flags, and is converted once, here, into the plain
//! settings the job runs with.

use anyhow::{Result, bail};
use clap::Args;

use super::common::{DeviceArgs, EarlyStopArgs, RUN, RunArgs};
use crate::backend::autotune::AutotuneArgs;
use crate::launch::Launch;
use crate::train::gnn::{self, GnnRun, GnnSettings};
use crate::train::mnist::{self, MnistRun, MnistSettings};

/// `trainer train-mnist`.
#[derive(Args, Debug, Clone)]
#[command(args_override_self = true)]
pub(crate) struct MnistArgs {
    #[command(flatten)]
    pub settings: MnistSettings,
    #[command(flatten)]
    pub early_stop: EarlyStopArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub autotune: AutotuneArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

impl MnistArgs {
    /// The plain settings of the run.
    pub(crate) fn resolve(self) -> Result<MnistRun> {
        if self.early_stop.patience.is_some() && self.early_stop.early_stop_metric.is_none() {
            bail!("--patience needs --early-stop-metric (e.g. test_accuracy)");
        }
        let monitor = self.early_stop.monitor::<mnist::MnistMetric>(None)?;
        self.settings.optimizer.spec()?;
        let placement = self.device.placement()?;
        let autotune = self.autotune.resolve(placement)?;
        let mut settings = self.settings;
        if autotune.warm {
            // The run's shapes: two training batches and one test batch.
            settings.epochs = 1;
            settings.limit_train = Some(2 * settings.batch_size);
            settings.limit_test = Some(settings.test_batch_size);
        }
        Ok(MnistRun {
            settings,
            monitor,
            launch: Launch {
                placement,
                run: self.run.settings()?,
                autotune,
            },
        })
    }
}

/// `trainer train-gnn`: every flag of the reference's `train_clg_ode.py` (in [`GnnSettings`] and
/// the settings it flattens), plus presets and the shared run flags.
#[derive(Args, Debug, Clone)]
#[command(
    args_override_self = true,
    mut_arg("early_stop_metric", |a| a.default_value("val_loss")),
    mut_arg("patience", |a| a.default_value("20"))
)]
pub(crate) struct GnnArgs {
    #[command(flatten)]
    pub settings: GnnSettings,
    /// A named configuration (flags given beside it override it; `presets/`): `eb-residual`,
    /// CLG-ODE's residual started from the eb-drift forecast and kept unless training beats it
    /// (the one to forecast with); `residual`, the authors' fixed support + residual skip
    /// variant, started at the identity; `drift-residual`, that started from the linear drift;
    /// those two forecast with eb-drift unless the network beats it on validation
    /// (`--eb-fallback`; docs/guide/forecasts.md).
    #[arg(long, help_heading = RUN)]
    pub preset: Option<String>,
    #[command(flatten)]
    pub early_stop: EarlyStopArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub autotune: AutotuneArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

impl GnnArgs {
    /// The plain settings of the run.
    pub(crate) fn resolve(mut self) -> Result<GnnRun> {
        let placement = self.device.placement()?;
        let autotune = self.autotune.resolve(placement)?;
        let run = self.run.settings()?;
        if autotune.warm {
            // The run's shapes: one epoch of fold 0 (training, validation, test scoring).
            self.settings.cv_fold = self.settings.cv_fold.max(0);
            self.settings.max_epochs = 1;
        }
        let settings = self.settings.resolve();
        settings.check()?;
        let monitor = self.early_stop.monitor(Some(gnn::GnnMetric::ValLoss))?;
        Ok(GnnRun {
            settings,
            monitor,
            launch: Launch {
                placement,
                run,
                autotune,
            },
        })
    }
}
