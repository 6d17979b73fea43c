//! `train-gnn --model linear-drift` as a job of the engine: the same loader, split, folds,
//! validation columns, test protocol and result files as CLG-ODE; one epoch per fold whose
//! steps add up the closed-form fit's statistics over the training subjects' consecutive visit
//! pairs (summed over ranks like any step's sums), and whose end fits the drift.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Prepared;
use super::batch::delta_t;
use super::breakdown::{Predictions, three_visit_subjects};
use super::columns::val_sc_columns;
use super::config::GnnConfig;
use super::evaluate::versus_identity;
use super::fold_data::{FoldData, FoldStart};
use super::registry::{GnnModel, ModelKind};
use super::saved_run::{Horizon, SavedRun};
use super::settings::GnnSettings;
use super::test_set::{TestRun, best_fold, best_fold_data, fold_results, write_test_results};
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, EpochSums, Job, JobSpec, LrSchedule, Monitor, Panel, Row,
    RunContext, Stage, StepOut, StepSums, Valid,
};
use crate::models::linear_drift::{DriftStats, DriftSupport, LinearDrift, MODEL_NAME, forecast};

/// The closed-form population drift per year (row-major N×N) of the consecutive visit pairs of
/// `subjects` (what `--model linear-drift` fits; CLG-ODE's `--drift-head` starts from it).
pub fn fit_population_drift(data: &FoldData, subjects: &[usize]) -> Vec<f32> {
    let n = data.n_nodes();
    let mut s = DriftStats {
        xy: vec![0.0; n * n],
        yy: vec![0.0; n * n],
        ..Default::default()
    };
    for &sub in subjects {
        let scans = data.scans(sub);
        for v in 1..scans.len() {
            s.add_pair(
                &scans[v - 1].a_raw,
                &scans[v].a_raw,
                delta_t(scans, v - 1, v),
            );
        }
    }
    s.drift()
}

/// `--model linear-drift`.
pub struct DriftModel;

impl GnnModel for DriftModel {
    const KIND: ModelKind = ModelKind::LinearDrift;
    const FILE_STEM: &'static str = MODEL_NAME;
    const TIME_INPUT: bool = true;
    type Job<B: AutodiffBackend> = DriftJob<B>;

    fn job<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<DriftJob<B>> {
        DriftJob::new(settings, monitor, prep, ctx)
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        _device: &B::Device,
    ) -> Result<Predictions> {
        let weights = run.ck.with_prefix("model");
        let d = &weights
            .get("drift")
            .context("the checkpoint has no drift")?
            .data;
        let dts = match horizon {
            Horizon::NextVisit => None,
            Horizon::Years { dts, .. } => Some(*dts),
        };
        let support = run.config.settings.drift.drift_support;
        Ok(drift_forecasts(&run.data, subjects, d, support, dts).into())
    }
}

/// One step's (or an epoch's) statistics of the fit.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DriftSums(pub DriftStats);

impl StepSums for DriftSums {
    fn flat(&self) -> Vec<f64> {
        let s = &self.0;
        let mut v = Vec::with_capacity(2 * s.xy.len() + 2);
        v.extend(&s.xy);
        v.extend(&s.yy);
        v.extend([s.xx, s.pairs]);
        v
    }

    fn with_flat(self, g: &[f64]) -> Self {
        let n = self.0.xy.len();
        Self(DriftStats {
            xy: g[..n].to_vec(),
            yy: g[n..2 * n].to_vec(),
            xx: g[2 * n],
            pairs: g[2 * n + 1],
        })
    }

    /// The identity's mean squared change per pair and matrix entry (what the drift explains
    /// part of).
    fn loss(&self) -> f64 {
        let s = &self.0;
        s.yy.iter().sum::<f64>() / (s.pairs * s.yy.len() as f64).max(1.0)
    }
}

impl EpochSums<DriftSums> for DriftSums {
    fn add(&mut self, step: &DriftSums) {
        self.0.merge(&step.0);
    }
}

pub struct DriftJob<B: AutodiffBackend> {
    settings: GnnSettings,
    prep: Prepared,
    fold_ids: Vec<usize>,
    config: GnnConfig,
    main: bool,
    spec: JobSpec,
    n: usize,
    /// The fold in progress: its index in `fold_ids` and data.
    fold: Option<(usize, FoldData)>,
    /// The training residual of the last fit.
    train_loss: f64,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> DriftJob<B> {
    pub fn new(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        let fold_ids = settings.fold_ids();
        let config = GnnConfig::new(settings.clone(), monitor.clone(), &prep, ctx);
        let spec = JobSpec {
            name: "train-gnn",
            model_name: MODEL_NAME,
            // A closed-form fit: one pass over the training pairs.
            epochs: 1,
            batch_size: settings.batch_size,
            lr: LrSchedule::Constant(0.0),
            seed: settings.seed,
            stages: fold_ids.len(),
            monitor,
            unit: "subjects",
            cpu_columns: true,
            plot: vec![Panel::new(
                "validation sc_log_mse",
                &["val_sc_log_mse"],
                &["val_identity_sc_log_mse"],
            )],
            config: serde_json::to_value(&config)?,
            fingerprint: config.fingerprint(),
            meta: config.meta(&prep),
            ..JobSpec::default()
        };
        Ok(Self {
            n: prep.cohort.n_nodes,
            main: ctx.is_main(),
            settings,
            prep,
            fold_ids,
            config,
            spec,
            fold: None,
            train_loss: f64::NAN,
            _b: PhantomData,
        })
    }

    /// Visit 1 of every subject of `subjects` forecast from visit 0 (visit 0 itself for a
    /// subject with one scan), with drift `d`.
    fn predict(&self, data: &FoldData, subjects: &[usize], d: &[f32]) -> Vec<Array2<f32>> {
        drift_forecasts(data, subjects, d, self.settings.drift.drift_support, None)
    }
}

/// The linear-drift forecast of each subject of `subjects` from its visit 0: over `dts[i]`
/// years, or (`dts` = `None`) to its visit 1 (a one-scan subject: its scan).
fn drift_forecasts(
    data: &FoldData,
    subjects: &[usize],
    d: &[f32],
    support: DriftSupport,
    dts: Option<&[f64]>,
) -> Vec<Array2<f32>> {
    subjects
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let scans = data.scans(s);
            let dt = match dts {
                Some(dts) => dts[i],
                None if scans.len() < 2 => return scans[0].a_raw.clone(),
                None => delta_t(scans, 0, 1),
            };
            forecast(&scans[0].a_raw, d, dt, support)
        })
        .collect()
}

impl<B: AutodiffBackend> Job<B> for DriftJob<B> {
    type Model = LinearDrift<B>;
    type Step = DriftSums;
    type Epoch = DriftSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        let mut metadata = BTreeMap::new();
        metadata.insert("n_nodes".into(), self.n.to_string());
        metadata.insert(
            "drift_support".into(),
            serde_json::to_string(&self.settings.drift.drift_support)?,
        );
        let start = FoldStart::new(
            &self.prep,
            stage,
            self.settings.sampling.include_s_mean(),
            self.settings.seed,
            self.settings.model_kind.file_stem(),
            self.spec.monitor.as_ref(),
            metadata,
        )?;
        let split = &self.prep.folds[stage];
        if self.main {
            eprintln!(
                "[train-gnn] linear-drift fold {}: {} train / {} val / {} test subjects",
                start.fold,
                split.train.len(),
                split.val.len(),
                self.prep.test.len()
            );
        }
        self.fold = Some((stage, start.data));
        Ok(start.stage)
    }

    fn init_model(&self, _stage: usize, device: &B::Device) -> Result<LinearDrift<B>> {
        Ok(LinearDrift::new(self.n, device))
    }

    fn step(&mut self, _model: &LinearDrift<B>, b: &Batch<'_, B>) -> Result<StepOut<DriftSums>> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let train = &self.prep.folds[*stage].train;
        let mut s = DriftStats {
            xy: vec![0.0; self.n * self.n],
            yy: vec![0.0; self.n * self.n],
            ..Default::default()
        };
        for &i in &b.order[b.lo..b.hi] {
            let scans = data.scans(train[i]);
            for v in 1..scans.len() {
                s.add_pair(
                    &scans[v - 1].a_raw,
                    &scans[v].a_raw,
                    delta_t(scans, v - 1, v),
                );
            }
        }
        Ok(StepOut {
            grads: GradientsParams::new(),
            sums: DriftSums(s),
        })
    }

    fn refit(
        &mut self,
        _model: LinearDrift<B>,
        sums: &DriftSums,
        device: &B::Device,
    ) -> Result<LinearDrift<B>> {
        let d = sums.0.drift();
        self.train_loss = sums.0.residual(&d, self.n);
        Ok(LinearDrift::with_drift(self.n, d, device))
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        _sums: &DriftSums,
        _ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let val = &self.prep.folds[*stage].val;
        let preds = self.predict(data, val, &model.host());
        let v = versus_identity(data, val, &preds.into(), self.settings.topo_bins);
        let mut head = Row::new();
        head.insert("val_loss".into(), json!(v.model.sc_log_mse));
        let mut detail = Row::new();
        val_sc_columns(Some(&v), 0.0, 0.0, &mut detail);
        detail.insert("model".into(), json!(self.settings.model_kind));
        Ok(EpochReport {
            train_loss: self.train_loss,
            head,
            detail,
            summary: format!(
                "val sc_log_mse {:.4} (identity {:.4}, skill {:+.3})",
                v.model.sc_log_mse, v.identity.sc_log_mse, v.skill.skill
            ),
        })
    }

    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        if done.comm.rank() != 0 {
            return Ok(());
        }
        let folds = fold_results(done.stages, &self.fold_ids);
        let best = best_fold(&self.config, &folds)?;
        let (data, ck) = best_fold_data(&self.prep, &self.config, &best)?;
        let d = ck
            .with_prefix("model")
            .remove("drift")
            .context("the best checkpoint has no drift")?
            .data;
        let preds = self.predict(&data, &self.prep.test, &d);
        let test = versus_identity(
            &data,
            &self.prep.test,
            &preds.clone().into(),
            self.settings.topo_bins,
        );
        // The test loss of a closed-form forecast is its test sc_log_mse.
        let run = TestRun {
            config: &self.config,
            prep: &self.prep,
            finished: &folds,
            best: &best,
            test_loss: test.model.sc_log_mse,
        };
        let loss_bins = self.settings.objective.topology.loss_bins;
        let far_subjects = three_visit_subjects(&data, &self.prep.test);
        let far_dts: Vec<f64> = far_subjects
            .iter()
            .map(|&s| delta_t(data.scans(s), 0, 2))
            .collect();
        let support = self.settings.drift.drift_support;
        let far = drift_forecasts(&data, &far_subjects, &d, support, Some(&far_dts));
        let far = Some(far.into());
        write_test_results(
            &run,
            &data,
            &preds.into(),
            far.as_ref(),
            loss_bins,
            done.run_dir,
        )
    }
}
