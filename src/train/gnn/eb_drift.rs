//! `train-gnn --model eb-drift` as a job of the engine (docs/eb-drift.md): the loader, split,
//! folds, validation columns, test protocol and result files of every model; one epoch per
//! fold whose steps add up the identity's error over the training subjects' visit pairs, and
//! whose end fits the empirical-Bayes forecaster on the fold's training subjects (on every rank
//! alike: a closed form on data every rank holds).

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;
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
    Batch, Done, EpochCtx, EpochReport, Job, JobSpec, LossSums, LrSchedule, Monitor, Panel, Row,
    RunContext, Stage, StepOut, Valid,
};
use crate::models::eb_drift::{EbDrift, EbParams, EbScan, MODEL_NAME, params_from};

/// `--model eb-drift`.
pub struct EbDriftModel;

impl GnnModel for EbDriftModel {
    const KIND: ModelKind = ModelKind::EbDrift;
    const FILE_STEM: &'static str = MODEL_NAME;
    const TIME_INPUT: bool = true;
    type Job<B: AutodiffBackend> = EbDriftJob<B>;

    fn job<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<EbDriftJob<B>> {
        EbDriftJob::new(settings, monitor, prep, ctx)
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        _device: &B::Device,
    ) -> Result<Predictions> {
        let weights = run.ck.with_prefix("model");
        let params = params_from(run.data.n_nodes(), |name| {
            Ok(weights
                .get(name)
                .with_context(|| format!("the eb-drift checkpoint has no {name}"))?
                .data
                .clone())
        })?;
        let dts = match horizon {
            Horizon::NextVisit => None,
            Horizon::Years { dts, .. } => Some(*dts),
        };
        Ok(forecasts(&params, &run.data, subjects, dts).into())
    }
}

/// The training subjects' scans, in visit order, as the fit takes them.
pub fn training_scans<'a>(data: &'a FoldData, subjects: &[usize]) -> Vec<Vec<EbScan<'a>>> {
    subjects
        .iter()
        .map(|&s| {
            data.scans(s)
                .iter()
                .map(|scan| EbScan {
                    age: scan.age,
                    a_raw: &scan.a_raw,
                })
                .collect()
        })
        .collect()
}

/// The forecaster fitted on `subjects` of the fold (what CLG-ODE's `--eb-head` starts from).
pub fn fit_arc(data: &FoldData, subjects: &[usize]) -> std::sync::Arc<EbParams> {
    std::sync::Arc::new(EbParams::fit(&training_scans(data, subjects)))
}

/// The forecast of each subject of `subjects` from its visit 0: `dts[i]` years later, or
/// (`dts` = `None`) at its visit 1 (a one-scan subject: its scan, as every model).
pub fn forecasts(
    params: &EbParams,
    data: &FoldData,
    subjects: &[usize],
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
            params.forecast(&scans[0].a_raw, scans[0].age, scans[0].age + dt)
        })
        .collect()
}

/// Mean squared log1p error over the upper triangle, and the number of entries.
fn squared_error(pred: &Array2<f32>, truth: &Array2<f32>) -> (f64, f64) {
    let n = pred.nrows();
    let mut sum = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            let p = f64::from(pred[(i, j)].max(0.0)).ln_1p();
            let t = f64::from(truth[(i, j)].max(0.0)).ln_1p();
            sum += (p - t) * (p - t);
        }
    }
    (sum, (n * n.saturating_sub(1) / 2) as f64)
}

pub struct EbDriftJob<B: AutodiffBackend> {
    settings: GnnSettings,
    prep: Prepared,
    fold_ids: Vec<usize>,
    config: GnnConfig,
    /// Rank 0: the one that logs.
    main: bool,
    spec: JobSpec,
    n: usize,
    /// The fold in progress: its index in `fold_ids` and data.
    fold: Option<(usize, FoldData)>,
    /// The forecaster's error on the training pairs (log1p MSE), after the fit.
    train_loss: f64,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> EbDriftJob<B> {
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
            // A closed-form fit: one pass over the training subjects.
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

    fn params(model: &Valid<B, Self>, n: usize) -> Result<EbParams> {
        params_from(n, |name| {
            let t = match name {
                "a_bar" => model.a_bar.val(),
                "k_g" => model.k_g.val(),
                "k_edge" => model.k_edge.val(),
                "alpha" => model.alpha.val(),
                "drift" => model.drift.val(),
                "seen" => model.seen.val(),
                "p11" => model.p11.val(),
                "p01" => model.p01.val(),
                _ => model.nu.val(),
            };
            Ok(crate::host_reads::data(t)
                .convert::<f32>()
                .to_vec()
                .unwrap_or_default())
        })
    }
}

impl<B: AutodiffBackend> Job<B> for EbDriftJob<B> {
    type Model = EbDrift<B>;
    type Step = LossSums;
    type Epoch = LossSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        let mut metadata = BTreeMap::new();
        metadata.insert("n_nodes".into(), self.n.to_string());
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
                "[train-gnn] eb-drift fold {}: {} train / {} val / {} test subjects",
                start.fold,
                split.train.len(),
                split.val.len(),
                self.prep.test.len()
            );
        }
        self.fold = Some((stage, start.data));
        Ok(start.stage)
    }

    fn init_model(&self, _stage: usize, device: &B::Device) -> Result<EbDrift<B>> {
        Ok(EbDrift::new(self.n, device))
    }

    /// The identity's error over the shard's training pairs (what the forecaster improves on).
    fn step(&mut self, _model: &EbDrift<B>, b: &Batch<'_, B>) -> Result<StepOut<LossSums>> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let train = &self.prep.folds[*stage].train;
        let mut sums = LossSums::default();
        for &i in &b.order[b.lo..b.hi] {
            let scans = data.scans(train[i]);
            for v in 1..scans.len() {
                let (sum, count) = squared_error(&scans[v - 1].a_raw, &scans[v].a_raw);
                sums.sum += sum;
                sums.count += count;
            }
        }
        Ok(StepOut {
            grads: GradientsParams::new(),
            sums,
        })
    }

    fn refit(
        &mut self,
        _model: EbDrift<B>,
        _sums: &LossSums,
        device: &B::Device,
    ) -> Result<EbDrift<B>> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let train = &self.prep.folds[*stage].train;
        let params = EbParams::fit(&training_scans(data, train));
        let mut err = (0.0, 0.0);
        for &s in train {
            let scans = data.scans(s);
            for v in 1..scans.len() {
                let dt = delta_t(scans, v - 1, v);
                let f =
                    params.forecast(&scans[v - 1].a_raw, scans[v - 1].age, scans[v - 1].age + dt);
                let (sum, count) = squared_error(&f, &scans[v].a_raw);
                err = (err.0 + sum, err.1 + count);
            }
        }
        self.train_loss = if err.1 > 0.0 { err.0 / err.1 } else { f64::NAN };
        if self.main {
            eprintln!(
                "[train-gnn] eb-drift fit: subject offset kept {:.3}, edge deviations kept \
                 {:.3}..{:.3}",
                params.k_g,
                params.k_edge.iter().copied().fold(f64::INFINITY, f64::min),
                params
                    .k_edge
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max),
            );
        }
        Ok(EbDrift::from_params(&params, device))
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        _sums: &LossSums,
        _ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let val = &self.prep.folds[*stage].val;
        let params = Self::params(model, self.n)?;
        let preds = forecasts(&params, data, val, None);
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
        let weights = ck.with_prefix("model");
        let params = params_from(self.n, |name| {
            Ok(weights
                .get(name)
                .with_context(|| format!("the best checkpoint has no {name}"))?
                .data
                .clone())
        })?;
        let preds = forecasts(&params, &data, &self.prep.test, None);
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
        let far_subjects = three_visit_subjects(&data, &self.prep.test);
        let far_dts: Vec<f64> = far_subjects
            .iter()
            .map(|&s| delta_t(data.scans(s), 0, 2))
            .collect();
        let far = forecasts(&params, &data, &far_subjects, Some(&far_dts));
        write_test_results(
            &run,
            &data,
            &preds.into(),
            Some(&far.into()),
            self.settings.objective.topology.loss_bins,
            done.run_dir,
        )
    }
}
