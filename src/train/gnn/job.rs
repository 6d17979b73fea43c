//! CLG-ODE as a job of the training engine: one stage per cross-validation fold, each with the
//! fold's normalisation and a fresh objective state; the test set is scored with the best
//! fold's best weights at the end.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use super::Prepared;
use super::columns::settings_columns;
use super::config::GnnConfig;
use super::evaluate::validate;
use super::fold_data::{FoldData, FoldStart};
use super::porcelain;
use super::seeds::fold_seed;
use super::settings::GnnSettings;
use super::step::{Pieces, grads};
use super::sums::{GnnEpoch, GnnStep};
use super::test_set::{fold_results, score_test};
use crate::data::connectome::NormStats;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, Job, JobSpec, LrSchedule, Monitor, Panel, Row, RunContext,
    Stage, StepOut, Valid,
};
use crate::models::clg_ode::objective::topology::updated_scale;
use crate::models::clg_ode::objective::{Objective, ObjectiveState};
use crate::models::clg_ode::{ClgOde, MODEL_NAME};
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

/// What a resume checkpoint keeps of the job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct JobState {
    objective: ObjectiveState,
}

pub struct GnnJob<B: AutodiffBackend> {
    settings: GnnSettings,
    prep: Prepared,
    fold_ids: Vec<usize>,
    config: GnnConfig,
    objective: Objective,
    world: usize,
    main: bool,
    spec: JobSpec,
    /// The fold in progress: its index in `fold_ids`, data and normalisation.
    fold: Option<(usize, FoldData, NormStats)>,
    /// How a step's shard is cut into passes (per subject on the pure-Rust CPU backend).
    cut: Pieces,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> GnnJob<B> {
    pub fn new(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        let fold_ids = settings.fold_ids();
        let config = GnnConfig::new(settings.clone(), monitor.clone(), &prep, ctx);
        let mut panels = vec![Panel::new("loss", &["train_loss", "val_loss"], &[])];
        if settings.val_sc_eval_every > 0
            || monitor.as_ref().is_some_and(|m| m.metric != "val_loss")
        {
            panels.push(Panel::new(
                "validation sc_log_mse",
                &["val_sc_log_mse"],
                &["val_identity_sc_log_mse"],
            ));
            panels.push(Panel::new(
                "validation sc_log_pearson",
                &["val_sc_log_pearson"],
                &["val_identity_sc_log_pearson"],
            ));
        }
        if let Some(path) = &settings.resume_from {
            // Checked before the run starts: a wrong file leaves no run directory behind.
            weights_from(
                config.model.init::<B>(&ctx.device),
                path,
                &ctx.device,
                false,
            )?;
        }
        let spec = JobSpec {
            name: "train-gnn",
            model_name: MODEL_NAME,
            epochs: settings.max_epochs,
            batch_size: settings.batch_size,
            micro_batches: 1,
            lr: LrSchedule::Constant(settings.learning_rate),
            seed: settings.seed,
            stages: fold_ids.len(),
            monitor,
            unit: "subjects",
            cpu_columns: true,
            validate_initial: if settings.decoder.eb_head {
                Some("the closed-form eb-drift forecast it starts from (`--model eb-drift`)".into())
            } else if settings.decoder.drift_head {
                Some("the per-edge linear drift it starts from (`--model linear-drift`)".into())
            } else {
                None
            },
            plot: panels,
            config: serde_json::to_value(&config)?,
            fingerprint: config.fingerprint(),
            meta: config.meta(&prep),
            phases: super::phases::phases(&settings.objective, settings.max_epochs),
        };
        Ok(Self {
            objective: Objective::new(
                settings.objective.clone(),
                settings.decoder.fixed_support,
                settings.max_epochs,
                settings.seed,
            ),
            config,
            world: ctx.world_size(),
            main: ctx.is_main(),
            settings,
            prep,
            fold_ids,
            spec,
            fold: None,
            cut: Pieces::for_backend(ctx.placement.backend),
            _b: PhantomData,
        })
    }

    fn current(&self) -> Result<&(usize, FoldData, NormStats)> {
        self.fold.as_ref().context("no fold in progress")
    }

    /// Whether the validation SC metrics are computed after 0-based epoch `e`.
    fn val_sc_due(&self, e: usize) -> bool {
        let every = self.settings.val_sc_eval_every;
        let needed = self
            .spec
            .monitor
            .as_ref()
            .is_some_and(|m| m.metric != "val_loss");
        needed || (every > 0 && (e + 1).is_multiple_of(every))
    }
}

/// `--resume_from`: the weights of a checkpoint, matched by name (missing and extra tensors
/// tolerated, as the reference's strict=False; shapes must fit). At least half of the model's
/// tensors must load: anything less is another model's checkpoint.
fn weights_from<B: AutodiffBackend>(
    model: ClgOde<B>,
    path: &std::path::Path,
    device: &B::Device,
    log: bool,
) -> Result<ClgOde<B>> {
    let ck = Checkpoint::load(path)?;
    params::materialize(&model);
    let total = params::names(&model).len();
    let (model, missing, unexpected) =
        params::load_partial(model, &ck.with_prefix("model"), device)
            .with_context(|| format!("--resume-from {}", path.display()))?;
    let loaded = total - missing.len();
    if 2 * loaded < total {
        anyhow::bail!(
            "--resume-from {}: only {loaded} of CLG-ODE's {total} tensors are in this checkpoint, \
             which holds model `{}` ({} tensors): give a train-gnn checkpoint \
             (checkpoints/clg_ode_fold<k>_best.safetensors)",
            path.display(),
            ck.metadata.get("model").map_or("unknown", String::as_str),
            ck.with_prefix("model").len(),
        );
    }
    if log {
        eprintln!(
            "[train-gnn] weights from --resume-from {} (non-strict matching: {} missing keys, \
             {} unexpected keys)",
            path.display(),
            missing.len(),
            unexpected.len()
        );
    }
    Ok(model)
}

impl<B: AutodiffBackend> Job<B> for GnnJob<B> {
    type Model = ClgOde<B>;
    type Step = GnnStep;
    type Epoch = GnnEpoch;
    type State = JobState;

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn begin_stage(&mut self, stage: usize, resumed: bool) -> Result<Stage> {
        let s = &self.settings;
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "model_config".into(),
            serde_json::to_string(&self.config.model)?,
        );
        metadata.insert(
            "include_s_mean".into(),
            s.sampling.include_s_mean().to_string(),
        );
        let mut start = FoldStart::new(
            &self.prep,
            stage,
            s.sampling.include_s_mean(),
            s.seed,
            self.settings.model_kind.file_stem(),
            self.spec.monitor.as_ref(),
            metadata,
        )?;
        if let Some(f) = start.stage.model_file.as_mut() {
            f.metadata
                .insert("norm_stats".into(), serde_json::to_string(&start.stats)?);
        }
        if !resumed {
            // Every fold starts with a fresh GradNorm and topology scale (the reference carries
            // them over from fold to fold; see docs/guide/forecasts.md, "Where we differ").
            self.objective.state = ObjectiveState::default();
        }
        let (split, fold) = (&self.prep.folds[stage], start.fold);
        if self.main {
            let global = s.batch_size * self.world;
            eprintln!(
                "[train-gnn] fold {fold}: {} train / {} val / {} test subjects, {} nodes, \
                 {} rank(s) x batch {} = {global} subjects per step",
                split.train.len(),
                split.val.len(),
                self.prep.test.len(),
                self.prep.cohort.n_nodes,
                self.world,
                s.batch_size,
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
        self.fold = Some((stage, start.data, start.stats));
        Ok(start.stage)
    }

    fn init_model(&self, stage: usize, device: &B::Device) -> Result<ClgOde<B>> {
        let model = params::init_seeded(
            fold_seed(self.settings.seed, self.fold_ids[stage]),
            device,
            || self.config.model.init::<B>(device),
            |cpu| self.config.model.init(cpu),
        )?;
        match &self.settings.resume_from {
            Some(path) => weights_from(model, path, device, self.main),
            None => Ok(model),
        }
    }

    fn step(&mut self, model: &ClgOde<B>, b: &Batch<'_, B>) -> Result<StepOut<GnnStep>> {
        let (stage, data, _) = self.fold.as_ref().context("no fold in progress")?;
        let split = &self.prep.folds[*stage];
        let order: Vec<usize> = b.order.iter().map(|&i| split.train[i]).collect();
        let r = grads(
            model,
            &mut self.objective,
            data,
            &self.settings.sampling,
            (self.settings.seed, split.fold, b.epoch),
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

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
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

        let (stage, data, _) = self.current()?;
        let v = validate(
            model,
            &self.objective,
            data,
            &self.prep.folds[*stage].val,
            &self.settings,
            self.val_sc_due(ctx.epoch),
            ctx,
        )?;
        let s = &self.settings;
        let monitor = self.spec.monitor.as_ref();
        if self.main && s.porcelain {
            let name = monitor.map_or("val_loss", |m| m.metric.as_str());
            println!(
                "{}",
                porcelain::epoch_line(
                    (self.fold_ids[*stage], s.cv_folds),
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

    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        if done.comm.rank() != 0 {
            return Ok(());
        }
        let folds = fold_results(done.stages, &self.fold_ids);
        score_test::<B::InnerBackend>(
            &self.config,
            &self.objective,
            &self.prep,
            &folds,
            done.run_dir,
            done.device,
        )
    }
}
