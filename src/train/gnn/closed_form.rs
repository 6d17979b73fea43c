//! The closed-form forecasters (`--model linear-drift`, [`drift`](super::drift), and
//! `--model eb-drift`, [`eb_drift`](super::eb_drift)) as one forecaster, [`Fitted`]: a model is
//! a [`ClosedFormFit`] (its sums, its fit, its parameters and their forecast, [`Forecast`]) and
//! `Fitted` does the rest the same way for each, on the loader, split, folds, validation
//! columns, test protocol and result files of every model: one epoch per fold whose steps add
//! up the model's sums over the training subjects (summed over ranks like any step's sums), and
//! whose end fits the model.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;

use super::cv::{Cv, CvFold, Forecaster, Inner, Plan};
use super::graph_forecast::Transplants;
use super::kind::ModelKind;
use super::metric::GnnMetric;
use super::protocol::breakdown::{Predictions, three_visit_subjects};
use super::protocol::evaluate::versus_identity;
use super::protocol::fold_data::delta_t;
use super::protocol::fold_data::{FoldData, FoldStart};
use super::protocol::saved_run::{Horizon, SavedRun};
use super::protocol::test_set::{
    FoldResult, TestRun, best_fold, best_fold_data, write_test_results,
};
use super::settings::GnnSettings;
use crate::data::connectome::{Scan, par_map};
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, EpochSums, LrSchedule, RunContext, StepOut, StepSums,
};
use crate::models::linear_drift::ForecastForm;
use crate::toolbox::checkpoint::Checkpoint;

/// A closed-form forecaster: what [`Fitted`] asks of it.
pub(super) trait ClosedFormFit: 'static {
    /// Its `--model` value.
    const KIND: ModelKind;
    /// The stem of its model files.
    const MODEL_NAME: &'static str;
    /// The Burn module its fitted parameters are saved in.
    type Module<B: AutodiffBackend>: AutodiffModule<B>;
    /// What a step adds up over its training subjects (an epoch adds up the same).
    type Sums: StepSums + EpochSums<Self::Sums>;
    /// The fitted parameters.
    type Params: Clone;

    /// Metadata of the fold's model file beside `n_nodes`.
    fn metadata(_settings: &GnnSettings) -> Result<BTreeMap<String, String>> {
        Ok(BTreeMap::new())
    }
    /// The module before the fit, for a cohort of `n` nodes.
    fn init<B: AutodiffBackend>(n: usize, device: &B::Device) -> Self::Module<B>;
    /// The sums of `subjects` (a shard of the fold's training subjects).
    fn sums(data: &FoldData, subjects: impl Iterator<Item = usize>) -> Self::Sums;
    /// The fit on the fold in progress (its training subjects: `fold.items`) from the epoch's
    /// `sums`, and its error on the training pairs (the epoch's training loss).
    fn fit<B: AutodiffBackend>(
        cv: &Cv,
        fold: &CvFold,
        sums: &Self::Sums,
        device: &B::Device,
    ) -> Result<(Self::Module<B>, f64)>;
    /// The parameters of the validation-mode module `m` (a cohort of `n` nodes).
    fn valid_params<B: AutodiffBackend>(
        m: &<Self::Module<B> as AutodiffModule<B>>::InnerModule,
        n: usize,
    ) -> Result<Self::Params>;
    /// The parameters in model file `ck` (a cohort of `n` nodes).
    fn checkpoint_params(ck: &Checkpoint, n: usize) -> Result<Self::Params>;
    /// The forecaster of `params` under the run's `settings`.
    fn forecaster(params: Self::Params, settings: &GnnSettings) -> impl Forecast;
    /// The graphs scored for the topology columns of `preds` (visit-1 forecasts of `subjects`
    /// from visit 0), when `settings` ask for a forecast of two objects (`--forecast graph`):
    /// per forecast with a visit 1, the minimum-Bayes-risk graph over the transplanted
    /// residuals of `train` (the fold's training subjects) from this model's own forecasts
    /// ([`graph_forecast`](super::graph_forecast)). Empty: the predictions themselves.
    fn graphs(
        params: &Self::Params,
        settings: &GnnSettings,
        data: &FoldData,
        train: &[usize],
        subjects: &[usize],
        preds: &[Array2<f32>],
    ) -> Vec<Option<Array2<f32>>> {
        if settings.drift.forecast != ForecastForm::Graph {
            return Vec::new();
        }
        let paired: Vec<usize> = train
            .iter()
            .copied()
            .filter(|&s| data.scans(s).len() >= 2)
            .collect();
        let forecasts = Self::forecaster(params.clone(), settings)(data, &paired, None);
        let pairs: Vec<(Array2<f32>, Array2<f32>)> = forecasts
            .into_iter()
            .zip(&paired)
            .map(|(f, &s)| (f, data.scans(s)[1].a_raw.dense()))
            .collect();
        let Some(transplants) = Transplants::new(&pairs) else {
            eprintln!(
                "[train-gnn] WARNING: --forecast graph: no training subject has two visits; \
                 the topology columns score the dense forecast"
            );
            return Vec::new();
        };
        let items: Vec<(usize, &Array2<f32>)> = subjects.iter().copied().zip(preds).collect();
        par_map(&items, |&(s, pred)| {
            let scans = data.scans(s);
            (scans.len() >= 2).then(|| transplants.choose(&scans[0].a_raw.dense(), pred))
        })
    }
}

/// The training subjects of fold `fold` (empty when the fold is not in the list).
fn fold_train(folds: &[crate::data::connectome::split::FoldSplit], fold: usize) -> &[usize] {
    folds
        .iter()
        .find(|s| s.fold == fold)
        .map(|s| s.train.as_slice())
        .unwrap_or(&[])
}

/// `--model M` of a closed-form forecaster `M`, and its state during a run.
pub(super) struct Fitted<M> {
    /// The forecaster's error on the training pairs after the last fit (what the epoch
    /// reports as its training loss).
    train_loss: f64,
    _m: PhantomData<fn() -> M>,
}

impl<M: ClosedFormFit> Forecaster for Fitted<M> {
    const KIND: ModelKind = M::KIND;
    const FILE_STEM: &'static str = M::MODEL_NAME;
    const TIME_INPUT: bool = true;
    const GRADIENT_TRAINED: bool = false;
    type Net<B: AutodiffBackend> = M::Module<B>;
    type Step = M::Sums;
    type Epoch = M::Sums;
    type State = ();

    fn new<B: AutodiffBackend>(_cv: &Cv, _ctx: &RunContext<B>) -> Result<Self> {
        Ok(Self {
            train_loss: f64::NAN,
            _m: PhantomData,
        })
    }

    fn plan(&self, _cv: &Cv) -> Plan {
        Plan {
            // A closed-form fit: one pass over the training subjects.
            epochs: 1,
            lr: LrSchedule::Constant(0.0),
            drawn: vec![GnnMetric::ValScLogMse, GnnMetric::ValIdentityScLogMse],
            validate_initial: None,
            phases: Vec::new(),
        }
    }

    fn metadata(&self, cv: &Cv) -> Result<BTreeMap<String, String>> {
        let mut metadata = M::metadata(&cv.settings)?;
        metadata.insert("n_nodes".into(), cv.n.to_string());
        Ok(metadata)
    }

    /// Logs the fold's sizes on rank 0.
    fn begin_fold(
        &mut self,
        cv: &Cv,
        stage: usize,
        start: &mut FoldStart,
        _resumed: bool,
    ) -> Result<Option<Vec<usize>>> {
        let split = &cv.prep.folds[stage];
        if cv.main {
            eprintln!(
                "[train-gnn] {} fold {}: {} train / {} val / {} test subjects",
                cv.settings.model_kind,
                start.fold,
                split.train.len(),
                split.val.len(),
                cv.prep.test.len()
            );
        }
        Ok(None)
    }

    fn init<B: AutodiffBackend>(
        &self,
        cv: &Cv,
        _stage: usize,
        device: &B::Device,
    ) -> Result<M::Module<B>> {
        Ok(M::init::<B>(cv.n, device))
    }

    fn step<B: AutodiffBackend>(
        &mut self,
        _cv: &Cv,
        fold: &CvFold,
        _net: &M::Module<B>,
        b: &Batch<'_, B>,
    ) -> Result<StepOut<M::Sums>> {
        let shard = b.order[b.lo..b.hi].iter().map(|&i| fold.items[i]);
        Ok(StepOut {
            grads: GradientsParams::new(),
            sums: M::sums(&fold.data, shard),
        })
    }

    fn refit<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        _net: M::Module<B>,
        sums: &M::Sums,
        device: &B::Device,
    ) -> Result<M::Module<B>> {
        let (module, train_loss) = M::fit::<B>(cv, fold, sums, device)?;
        self.train_loss = train_loss;
        Ok(module)
    }

    /// The forecast of the fold's validation subjects at their visit 1, against the
    /// identity's.
    fn end_epoch<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        net: &Inner<Self, B>,
        _sums: &M::Sums,
        _ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let forecast = M::forecaster(M::valid_params::<B>(net, cv.n)?, &cv.settings);
        let (data, val) = (&fold.data, &cv.split(fold).val);
        let preds = forecast(data, val, None);
        Ok(cv.versus_report(fold, preds.into(), None, self.train_loss))
    }

    /// The best fold's model file forecasts the test subjects at their visit 1 and the
    /// three-visit ones at their visit 2. The test loss of a closed-form forecast is its test
    /// sc_log_mse.
    fn test<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        folds: &[FoldResult],
        done: &Done<'_, B>,
    ) -> Result<()> {
        let best = best_fold(&cv.config, folds)?;
        let (data, ck) = best_fold_data(&cv.prep, &cv.config, &best)?;
        let params = M::checkpoint_params(&ck, cv.n)?;
        let test_subjects = &cv.prep.test;
        let train = fold_train(&cv.prep.folds, best.fold);
        let forecast = M::forecaster(params.clone(), &cv.settings);
        let matrices = forecast(&data, test_subjects, None);
        let graphs = M::graphs(
            &params,
            &cv.settings,
            &data,
            train,
            test_subjects,
            &matrices,
        );
        let preds = Predictions {
            matrices,
            new_edges: Vec::new(),
            graphs,
        };
        let test = versus_identity(&data, test_subjects, &preds, cv.settings.topo_bins);
        let run = TestRun {
            config: &cv.config,
            prep: &cv.prep,
            finished: folds,
            best: &best,
            test_loss: test.model.sc_log_mse,
            eb_fallback: None,
        };
        let far_subjects = three_visit_subjects(&data, test_subjects);
        let far_dts: Vec<f64> = far_subjects
            .iter()
            .map(|&s| delta_t(data.scans(s), 0, 2))
            .collect();
        let far = forecast(&data, &far_subjects, Some(&far_dts));
        write_test_results(
            &run,
            &data,
            &preds,
            Some(&far.into()),
            cv.settings.objective.topology.loss_bins,
            done.run_dir,
        )
    }

    /// A saved run's forecast from its model file's parameters.
    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        _device: &B::Device,
    ) -> Result<Predictions> {
        let params = M::checkpoint_params(&run.ck, run.data.n_nodes())?;
        let settings = &run.config.settings;
        let (dts, next_visit) = match horizon {
            Horizon::NextVisit => (None, true),
            Horizon::Years { dts, .. } => (Some(*dts), false),
        };
        let matrices = M::forecaster(params.clone(), settings)(&run.data, subjects, dts);
        // The graph's pseudo-truths are visit-1 residuals: a graph for the next visit only.
        let graphs = if next_visit {
            let train = fold_train(&run.prep.folds, run.fold);
            M::graphs(&params, settings, &run.data, train, subjects, &matrices)
        } else {
            Vec::new()
        };
        Ok(Predictions {
            matrices,
            new_edges: Vec::new(),
            graphs,
        })
    }
}

/// A fitted forecaster: the forecast of each subject of `subjects` of a fold from its visit 0,
/// `dts[i]` years later, or (`dts` = `None`) at its visit 1 (a one-scan subject: its scan).
pub(super) trait Forecast:
    Fn(&FoldData, &[usize], Option<&[f64]>) -> Vec<Array2<f32>>
{
}

impl<F: Fn(&FoldData, &[usize], Option<&[f64]>) -> Vec<Array2<f32>>> Forecast for F {}

/// The forecast of each subject of `subjects` from its visit 0 by `one(scan 0, dt, sex id)`:
/// `dts[i]` years later, or (`dts` = `None`) at its visit 1 (a one-scan subject: its scan, as
/// every model).
pub(super) fn from_visit_0(
    data: &FoldData,
    subjects: &[usize],
    dts: Option<&[f64]>,
    one: impl Fn(&Scan, f64, usize) -> Array2<f32>,
) -> Vec<Array2<f32>> {
    subjects
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let scans = data.scans(s);
            let dt = match dts {
                Some(dts) => dts[i],
                None if scans.len() < 2 => return scans[0].a_raw.dense(),
                None => delta_t(scans, 0, 1),
            };
            one(&scans[0], dt, data.cohort.subjects[s].sex)
        })
        .collect()
}
