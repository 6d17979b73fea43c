//! CLG-ODE as a job of the training engine: one stage per cross-validation fold, each with the
//! fold's normalisation and a fresh objective state; the test set is scored with the best
//! fold's best weights at the end.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::batch::Sampling;
use super::columns::settings_columns;
use super::config::{GnnConfig, gnn_config};
use super::evaluate::validate;
use super::fold_data::FoldData;
use super::porcelain;
use super::step::{Valid, fold_seed, grads};
use super::test_set::{FoldResult, score_test};
use super::{Prepared, fold_stem};
use crate::cli::GnnArgs;
use crate::data::connectome::NormStats;
use crate::dist::Collective;
use crate::engine::checkpoint::Checkpoint;
use crate::engine::params;
use crate::engine::{
    Batch, Done, EvalCtx, Evaluation, Job, JobSpec, ModelFile, Row, RunInfo, Stage, StepOut,
};
use crate::models::clg_ode::objective::{Objective, ObjectiveState, Stats};
use crate::models::clg_ode::{ClgOde, MODEL_NAME};
use crate::outputs::curves::Panel;

/// Metrics the evaluation writes that can be monitored (the reference's five, and the skill
/// against the identity forecast).
pub const MONITORS: &[&str] = &[
    "val_loss",
    "val_sc_log_mse",
    "val_sc_log_pearson_topk",
    "val_sc_log_pearson_sparse",
    "monitor_mse_plus_density",
    "val_skill",
];

/// What a resume checkpoint keeps of the job.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct JobState {
    objective: ObjectiveState,
    /// Raw topology values of the epoch in progress (for the scale update at its end).
    epoch_topo: Vec<f64>,
}

pub struct GnnJob<B: AutodiffBackend> {
    args: GnnArgs,
    prep: Prepared,
    fold_ids: Vec<usize>,
    config: GnnConfig,
    objective: Objective,
    state: JobState,
    world: usize,
    main: bool,
    spec: JobSpec,
    /// The fold in progress: its index in `fold_ids`, data and normalisation.
    fold: Option<(usize, FoldData, NormStats)>,
    /// The epoch of the last step and the last training loss (for the porcelain line).
    epoch: usize,
    train_loss: f64,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> GnnJob<B> {
    pub fn new(args: GnnArgs, prep: Prepared, fold_ids: Vec<usize>, comm: &dyn Collective) -> Self {
        let config = gnn_config(&args, &prep, &fold_ids);
        let monitor = config.monitor.clone();
        let mut panels = vec![Panel::new("loss", &["train_loss", "val_loss"], &[])];
        if args.val_sc_eval_every > 0 || monitor.as_ref().is_some_and(|m| m.metric != "val_loss") {
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
        let spec = JobSpec {
            name: "train-gnn",
            model_name: MODEL_NAME,
            epochs: args.max_epochs,
            batch_size: args.batch_size,
            seed: args.seed,
            stages: fold_ids.len(),
            monitor,
            unit: "subjects",
            cpu_columns: true,
            epoch_checkpoints: false,
            plot: panels,
        };
        Self {
            objective: Objective::new(config.objective.clone(), args.seed),
            config,
            state: JobState::default(),
            world: comm.size(),
            main: comm.rank() == 0,
            args,
            prep,
            fold_ids,
            spec,
            fold: None,
            epoch: 0,
            train_loss: f64::NAN,
            _b: PhantomData,
        }
    }

    fn current(&self) -> Result<&(usize, FoldData, NormStats)> {
        self.fold.as_ref().context("no fold in progress")
    }

    fn resolved(&self, run: Option<&RunInfo>) -> GnnConfig {
        let mut c = self.config.clone();
        c.world_size = self.world;
        c.effective_batch_size = self.args.batch_size * self.world;
        if let Some(run) = run {
            c.set_run(run);
        }
        c
    }

    fn sampling(&self) -> &Sampling {
        &self.config.sampling
    }

    /// Whether the validation SC metrics are computed after 0-based epoch `e`.
    fn val_sc_due(&self, e: usize) -> bool {
        let every = self.args.val_sc_eval_every;
        let needed = self
            .spec
            .monitor
            .as_ref()
            .is_some_and(|m| m.metric != "val_loss");
        needed || (every > 0 && (e + 1).is_multiple_of(every))
    }
}

impl<B: AutodiffBackend> Job<B> for GnnJob<B> {
    type Model = ClgOde<B>;

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn config(&self, run: &RunInfo) -> Result<Value> {
        Ok(serde_json::to_value(self.resolved(Some(run)))?)
    }

    fn fingerprint(&self) -> Value {
        self.resolved(None).fingerprint()
    }

    fn meta(&self, run: &RunInfo) -> Row {
        self.resolved(Some(run)).meta(&self.prep)
    }

    fn begin_stage(&mut self, stage: usize, resumed: bool) -> Result<Stage> {
        let split = &self.prep.folds[stage];
        let fold = split.fold;
        let stats = self.prep.cohort.norm_stats(&split.train)?;
        let data = FoldData::new(
            self.prep.cohort.clone(),
            &stats,
            self.sampling().include_s_mean,
        );
        if !resumed {
            // Every fold starts with a fresh GradNorm and topology scale (the reference carries
            // them over from fold to fold; see the README).
            self.state = JobState::default();
        }
        self.objective.state = self.state.objective.clone();
        if self.main {
            let global = self.args.batch_size * self.world;
            eprintln!(
                "[train-gnn] fold {fold}: {} train / {} val / {} test subjects, {} nodes, \
                 {} rank(s) x batch {} = {global} subjects per step",
                split.train.len(),
                split.val.len(),
                self.prep.test.len(),
                self.prep.cohort.n_nodes,
                self.world,
                self.args.batch_size,
            );
            if self.args.porcelain {
                println!(
                    "Starting fold {}/{} with {} train subjects and {} val subjects",
                    fold + 1,
                    self.args.cv_folds,
                    split.train.len(),
                    split.val.len()
                );
            }
        }
        self.fold = Some((stage, data, stats));
        let mut columns = Row::new();
        columns.insert("fold".into(), json!(fold));
        Ok(Stage {
            items: split.train.len(),
            shuffle_seed: fold_seed(self.args.seed, fold),
            label: format!("fold {fold}"),
            columns,
        })
    }

    fn init_model(&self, stage: usize, device: &B::Device) -> Result<ClgOde<B>> {
        B::seed(device, fold_seed(self.args.seed, self.fold_ids[stage]));
        let model = self.config.model.init::<B>(device);
        let Some(path) = &self.args.resume_from else {
            return Ok(model);
        };
        // `--resume_from`: the weights of a checkpoint, matched by name (missing and extra
        // tensors tolerated, as the reference's strict=False; shapes must fit).
        let ck = Checkpoint::load(path)?;
        params::materialize(&model);
        let (model, missing, unexpected) =
            params::load_partial(model, &ck.with_prefix("model"), device)
                .with_context(|| format!("--resume-from {}", path.display()))?;
        if self.main {
            eprintln!(
                "[train-gnn] weights from --resume-from {} (non-strict matching: {} missing \
                 keys, {} unexpected keys)",
                path.display(),
                missing.len(),
                unexpected.len()
            );
        }
        Ok(model)
    }

    fn lr(&self, _epoch: usize) -> f64 {
        self.args.learning_rate
    }

    fn step(&mut self, model: &ClgOde<B>, b: &Batch<'_, B>) -> Result<StepOut> {
        self.epoch = b.epoch;
        let (stage, data, _) = self.fold.as_ref().context("no fold in progress")?;
        let split = &self.prep.folds[*stage];
        let order: Vec<usize> = b.order.iter().map(|&i| split.train[i]).collect();
        let r = grads(
            model,
            &mut self.objective,
            data,
            &self.config.sampling,
            (self.args.seed, split.fold, b.epoch),
            &order,
            b.start,
            (b.lo, b.hi),
            b.device,
            b.comm,
        )?;
        // Statistics, then one value and one presence flag per topology slot of the global
        // batch (3 per subject): summed over ranks, every slot has its one value.
        let slots = 3 * (b.end - b.start);
        let mut sums = r.stats.v;
        let mut topo = vec![0.0; 2 * slots];
        for (slot, v) in r.topo_raw {
            topo[slot] = v;
            topo[slots + slot] = 1.0;
        }
        sums.extend(topo);
        Ok(StepOut {
            grads: r.grads,
            grad_weight: 1.0,
            sums,
        })
    }

    fn step_loss(&mut self, sums: &[f64]) -> (f64, Vec<f64>) {
        let stats = Stats::from_slice(&sums[..Stats::LEN]);
        let rest = &sums[Stats::LEN..];
        let slots = rest.len() / 2;
        self.state.epoch_topo.extend(
            (0..slots)
                .filter(|&s| rest[slots + s] > 0.0)
                .map(|s| rest[s]),
        );
        let total = self
            .objective
            .total(&stats, self.epoch, self.objective.state.gradnorm.weights);
        let mut add = stats.v;
        add.extend([total, 1.0]);
        (total, add)
    }

    fn train_columns(&mut self, acc: &[f64]) -> (f64, Row) {
        let stats = Stats::from_slice(acc);
        let (total, batches) = (
            acc.get(Stats::LEN).copied().unwrap_or(0.0),
            acc.get(Stats::LEN + 1).copied().unwrap_or(0.0),
        );
        let mut row = Row::new();
        stats.columns("train", &mut row);
        self.train_loss = if batches > 0.0 {
            total / batches
        } else {
            f64::NAN
        };
        (self.train_loss, row)
    }

    fn end_epoch(&mut self, _epoch: usize, _acc: &[f64]) {
        let c = &self.objective.cfg;
        if c.topo_on() {
            let s = crate::models::clg_ode::objective::topology::updated_scale(
                self.objective.state.topo_scale,
                &self.state.epoch_topo,
                c.topology.scale_quantile,
            );
            self.objective.state.topo_scale = s;
        }
        self.state.epoch_topo.clear();
        self.state.objective = self.objective.state.clone();
    }

    fn evaluate(&mut self, model: &Valid<B>, ctx: &EvalCtx<'_, B>) -> Result<Evaluation> {
        let (stage, data, _) = self.current()?;
        let (evaluation, val_loss) = validate(
            model,
            &self.objective,
            data,
            self.sampling(),
            &self.prep.folds[*stage].val,
            &self.args,
            self.val_sc_due(ctx.epoch),
            ctx,
        )?;
        if self.main && self.args.porcelain {
            let monitor = self.spec.monitor.as_ref();
            let name = monitor.map_or("val_loss", |m| m.metric.as_str());
            println!(
                "{}",
                porcelain::epoch_line(
                    (self.fold_ids[*stage], self.args.cv_folds),
                    (ctx.epoch, self.args.max_epochs),
                    self.train_loss,
                    val_loss,
                    (name, [&evaluation.head, &evaluation.detail]),
                )
            );
        }
        Ok(evaluation)
    }

    fn epoch_columns(&self, epoch: usize) -> Row {
        settings_columns(&self.args, &self.objective, epoch)
    }

    fn model_file(&self, stage: usize) -> Result<Option<ModelFile>> {
        let (_, _, stats) = self.current()?;
        let fold = self.fold_ids[stage];
        let mut metadata = BTreeMap::new();
        metadata.insert(
            "model_config".into(),
            serde_json::to_string(&self.config.model)?,
        );
        metadata.insert("fold".into(), fold.to_string());
        metadata.insert("norm_stats".into(), serde_json::to_string(stats)?);
        metadata.insert(
            "include_s_mean".into(),
            self.sampling().include_s_mean.to_string(),
        );
        Ok(Some(ModelFile {
            stem: fold_stem(fold),
            metadata,
        }))
    }

    fn save_state(&self) -> Value {
        let mut s = self.state.clone();
        s.objective = self.objective.state.clone();
        serde_json::to_value(s).unwrap_or(Value::Null)
    }

    fn load_state(&mut self, state: &Value) -> Result<()> {
        if !state.is_null() {
            self.state = serde_json::from_value(state.clone()).context("unreadable job state")?;
            self.objective.state = self.state.objective.clone();
        }
        Ok(())
    }

    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        if done.comm.rank() != 0 {
            return Ok(());
        }
        let folds: Vec<FoldResult> = done
            .stages
            .iter()
            .map(|s| FoldResult::from_stage(s, self.fold_ids[s.stage]))
            .collect();
        let config = self.resolved(None);
        score_test::<B::InnerBackend>(
            &config,
            &self.objective,
            &self.prep,
            &folds,
            done.run_dir,
            done.device,
        )
    }
}
