//! `train-gnn --model clg-ode`: CLG-ODE as a [`Forecaster`]: one stage per cross-validation
//! fold, each with the fold's normalisation and a fresh objective state (the GradNorm weights,
//! the topology scale, the fold's fitted population drift or eb-drift head); the test set is
//! scored with the best fold's best weights at the end; a saved run forecasts visit 1 or any
//! Δt ahead.

pub(crate) mod batch;
mod columns;
mod evaluate;
mod fallback;
mod gradnorm_step;
mod phases;
mod porcelain;
pub(crate) mod resident;
#[cfg(test)]
mod resident_tests;
mod shard;
pub(crate) mod step;
mod sums;
mod test_set;
mod weights;

use std::collections::BTreeMap;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use self::columns::settings_columns;
use self::evaluate::{predict_at, predict_visit1, validate};
use self::step::{Pieces, grads};
use self::sums::{GnnEpoch, GnnStep};
use self::test_set::{eb_forecaster, population_drift, score_test};
use self::weights::{final_state, weights_from};
use super::cv::{Cv, CvFold, Forecaster, Inner, Plan};
use super::kind::ModelKind;
use super::metric::GnnMetric;
use super::protocol::breakdown::Predictions;
use super::protocol::fold_data::FoldStart;
use super::protocol::saved_run::{Horizon, SavedRun};
use super::protocol::test_set::FoldResult;
use super::seeds::fold_seed;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, JobMetric, LrSchedule, Row, RunContext, StepOut,
};
use crate::models::clg_ode::objective::topology::updated_scale;
use crate::models::clg_ode::objective::{Objective, ObjectiveState};
use crate::models::clg_ode::{ClgOde, MODEL_NAME};
use crate::toolbox::params;

/// `--model clg-ode`, and its state during a run: the objective.
pub(crate) struct ClgOdeModel {
    objective: Objective,
    /// How a step's shard is cut into passes (per subject on the pure-Rust CPU backend).
    cut: Pieces,
}

/// What a resume checkpoint keeps of the job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct JobState {
    objective: ObjectiveState,
}

/// Whether the validation SC metrics are computed after 0-based epoch `e`.
fn val_sc_due(cv: &Cv, e: usize) -> bool {
    let every = cv.settings.val_sc_eval_every;
    cv.monitors_val_sc() || (every > 0 && (e + 1).is_multiple_of(every))
}

impl Forecaster for ClgOdeModel {
    const KIND: ModelKind = ModelKind::ClgOde;
    const FILE_STEM: &'static str = MODEL_NAME;
    const TIME_INPUT: bool = true;
    const NEEDS_SUBJECT_TABLE: bool = true;
    const READS_MORPHOLOGY: bool = true;
    type Net<B: AutodiffBackend> = ClgOde<B>;
    type Step = GnnStep;
    type Epoch = GnnEpoch;
    type State = JobState;

    /// A training step's memory a subject (the default objective at the reference's sizes):
    /// LibTorch's peak growth a subject, measured on the CPU (`bench gnn --backends tch`, peak
    /// RSS at two batches: 31 MB at 100 nodes, 55 MB at 200, 186 MB at 400), bounded above by
    /// 250 kB·N + 1.2 kB·N² (37, 98 and 292 MB).
    fn gpu_bytes_per_subject(nodes: usize) -> Option<u64> {
        let n = nodes as u64;
        Some(250_000 * n + 1_200 * n * n)
    }

    fn new<B: AutodiffBackend>(cv: &Cv, ctx: &RunContext<B>) -> Result<Self> {
        let s = &cv.settings;
        if let Some(path) = &s.resume_from {
            // Checked before the run starts: a wrong file leaves no run directory behind.
            weights_from(
                cv.config.model.init::<B>(&ctx.device),
                path,
                &ctx.device,
                false,
            )?;
        }
        let cut = Pieces::for_backend(ctx.placement.backend);
        let mut objective = Objective::new(
            s.objective.clone(),
            s.decoder.fixed_support,
            s.max_epochs,
            s.seed,
        );
        objective.targets_on_device = ctx.placement.backend.sorts_on_device();
        objective.resident =
            resident::for_placement(&cv.prep.cohort, ctx.placement, s.scans_on_device, cv.main)?;
        Ok(Self { objective, cut })
    }

    fn plan(&self, cv: &Cv) -> Plan {
        let s = &cv.settings;
        let mut drawn = vec![GnnMetric::TrainLoss, GnnMetric::ValLoss];
        if s.val_sc_eval_every > 0 || cv.monitors_val_sc() {
            drawn.extend([
                GnnMetric::ValScLogMse,
                GnnMetric::ValIdentityScLogMse,
                GnnMetric::ValScLogPearson,
                GnnMetric::ValIdentityScLogPearson,
            ]);
        }
        Plan {
            epochs: s.max_epochs,
            lr: LrSchedule::Constant(s.learning_rate),
            drawn,
            validate_initial: if s.decoder.eb_head {
                Some("the closed-form eb-drift forecast it starts from (`--model eb-drift`)".into())
            } else if s.decoder.drift_head {
                Some(format!(
                    "the per-edge linear drift it starts from (`--model linear-drift`){}",
                    if s.eb_fallback {
                        "; or eb-drift's, where --eb-fallback replaced the network's forecasts \
                         (test_metrics.json's eb_fallback says which)"
                    } else {
                        ""
                    }
                ))
            } else {
                None
            },
            phases: phases::phases(&s.objective, s.max_epochs),
        }
    }

    fn metadata(&self, cv: &Cv) -> Result<BTreeMap<String, String>> {
        let include_s_mean = cv.settings.sampling.include_s_mean();
        Ok(BTreeMap::from([
            (
                "model_config".to_string(),
                serde_json::to_string(&cv.config.model)?,
            ),
            ("include_s_mean".to_string(), include_s_mean.to_string()),
        ]))
    }

    fn begin_fold(
        &mut self,
        cv: &Cv,
        stage: usize,
        start: &mut FoldStart,
        resumed: bool,
    ) -> Result<Option<Vec<usize>>> {
        let s = &cv.settings;
        if let Some(f) = start.stage.model_file.as_mut() {
            f.metadata
                .insert("norm_stats".into(), serde_json::to_string(&start.stats)?);
        }
        if !resumed {
            // Every fold starts with a fresh GradNorm and topology scale (the reference carries
            // them over from fold to fold; see docs/guide/forecasts.md, "Where we differ").
            self.objective.state = ObjectiveState::default();
        }
        let fold = start.fold;
        let split = &cv.prep.folds[stage];
        if cv.main {
            let global = s.batch() * cv.world;
            eprintln!(
                "[train-gnn] fold {fold}: {} train / {} val / {} test subjects, {} nodes, \
                 {} rank(s) x batch {} = {global} subjects per step",
                split.train.len(),
                split.val.len(),
                cv.prep.test.len(),
                cv.prep.cohort.n_nodes,
                cv.world,
                s.batch(),
            );
            if s.porcelain {
                println!(
                    "Starting fold {}/{} with {} train subjects and {} val subjects",
                    fold + 1,
                    s.cv_folds,
                    split.train.len(),
                    split.val.len()
                );
            }
        }
        self.objective.population_drift = s
            .decoder
            .drift_head
            .then(|| super::fits::fit_population_drift(&start.data, &split.train));
        self.objective.eb_forecaster = s
            .decoder
            .eb_head
            .then(|| super::fits::fit_arc(&start.data, &split.train));
        Ok(None)
    }

    fn init<B: AutodiffBackend>(
        &self,
        cv: &Cv,
        stage: usize,
        device: &B::Device,
    ) -> Result<ClgOde<B>> {
        let model = params::init_seeded(
            fold_seed(cv.settings.seed, cv.fold_ids[stage]),
            device,
            || cv.config.model.init::<B>(device),
            |cpu| cv.config.model.init(cpu),
        )?;
        match &cv.settings.resume_from {
            Some(path) => weights_from(model, path, device, cv.main),
            None => Ok(model),
        }
    }

    fn step<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        model: &ClgOde<B>,
        b: &Batch<'_, B>,
    ) -> Result<StepOut<GnnStep>> {
        let order: Vec<usize> = b.order.iter().map(|&i| fold.items[i]).collect();
        let r = grads(
            model,
            &mut self.objective,
            &fold.data,
            &cv.settings.sampling,
            (cv.settings.seed, fold.id, b.epoch),
            &order,
            b.start,
            (b.lo, b.hi),
            self.cut,
            b.device,
            b.comm,
        )?;
        let coefficients = self
            .objective
            .coefficients(b.epoch, self.objective.state.gradnorm.weights);
        Ok(StepOut {
            grads: r.grads,
            sums: GnnStep::new(r.stats, b.end - b.start, &r.topo_raw, coefficients),
        })
    }

    fn end_epoch<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        model: &Inner<Self, B>,
        sums: &GnnEpoch,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        // The topology scale follows the epoch's raw values.
        let c = &self.objective.cfg;
        if c.topo_on() {
            self.objective.state.topo_scale = updated_scale(
                self.objective.state.topo_scale,
                &sums.topo,
                c.topology.scale_quantile,
            );
        }
        let train_loss = sums.train_loss();
        let mut detail = Row::new();
        sums.stats.columns("train", &mut detail);

        let s = &cv.settings;
        let v = validate(
            model,
            &self.objective,
            &fold.data,
            &cv.split(fold).val,
            s,
            val_sc_due(cv, ctx.epoch),
            ctx,
        )?;
        let monitor = cv.monitor.as_ref();
        if cv.main && s.porcelain {
            let name = monitor.map_or(GnnMetric::ValLoss.name(), |m| m.metric.as_str());
            println!(
                "{}",
                porcelain::epoch_line(
                    (fold.id, s.cv_folds),
                    (ctx.epoch, s.max_epochs),
                    train_loss,
                    v.val_loss,
                    (name, [&v.head, &v.detail]),
                )
            );
        }
        detail.extend(v.detail);
        detail.extend(settings_columns(s, monitor, &self.objective, ctx.epoch));
        Ok(EpochReport {
            train_loss,
            head: v.head,
            detail,
            summary: v.summary,
        })
    }

    fn state(&self) -> JobState {
        JobState {
            objective: self.objective.state.clone(),
        }
    }

    fn restore(&mut self, state: JobState) {
        self.objective.state = state.objective;
    }

    fn test<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        folds: &[FoldResult],
        done: &Done<'_, B>,
    ) -> Result<()> {
        score_test::<B::InnerBackend>(
            &cv.config,
            &self.objective,
            &cv.prep,
            folds,
            done.run_dir,
            done.device,
        )
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        device: &B::Device,
    ) -> Result<Predictions> {
        let (set, data) = (&run.config.settings, &run.data);
        let model = params::load(
            run.config.model.init::<B::InnerBackend>(device),
            &run.ck.model(),
            device,
        )?;
        let mut objective = Objective::new(
            set.objective.clone(),
            set.decoder.fixed_support,
            set.max_epochs,
            set.seed,
        );
        objective.state = final_state(&run.run_dir);
        objective.population_drift = population_drift(&run.config, &run.prep, data, run.fold);
        objective.eb_forecaster = eb_forecaster(&run.config, &run.prep, data, run.fold);
        let (obj, sampling, epoch) = (&objective, &set.sampling, set.max_epochs);
        let choice = fallback::choose(&run.config, &run.prep, data, run.fold, &model, obj, device)?;
        if let Some((choice, params)) = choice {
            fallback::say_once(&format!("[clg-ode] {}", choice.line()));
            if let Some(params) = params {
                let dts = match *horizon {
                    Horizon::NextVisit => None,
                    Horizon::Years { dts, .. } => Some(dts),
                };
                return Ok(fallback::forecast(
                    &params,
                    &run.config,
                    data,
                    subjects,
                    dts,
                ));
            }
        }
        Ok(match *horizon {
            Horizon::NextVisit => {
                predict_visit1(&model, obj, data, sampling, subjects, 8, epoch, device)
            }
            Horizon::Years { dts, targets } => predict_at(
                &model, obj, data, sampling, subjects, dts, targets, epoch, device,
            ),
        })
    }
}

#[cfg(test)]
mod tests;
