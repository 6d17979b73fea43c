//! CLG-ODE as a job of the training engine: one stage per cross-validation fold, each with the
//! fold's normalisation; the test set is scored with the best fold's best weights at the end.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use serde_json::{Value, json};

use super::batch::LossSettings;
use super::config::{GnnConfig, gnn_config};
use super::fold_data::FoldData;
use super::step::{StepContext, TermSums, eval_loss, fold_seed, term_sums, terms_from_sums};
use super::test_set::{FoldResult, score_test};
use super::{Prepared, fold_stem};
use crate::cli::GnnArgs;
use crate::data::connectome::NormStats;
use crate::dist::Collective;
use crate::engine::{
    Batch, Done, EvalCtx, Evaluation, Job, JobSpec, ModelFile, Row, RunInfo, Stage, StepOut,
};
use crate::models::clg_ode::{ClgOde, ClgOdeConfig, MODEL_NAME};
use crate::outputs::curves::Panel;

/// Metrics the evaluation writes that can be monitored.
pub const MONITORS: &[&str] = &["val_loss"];

pub struct GnnJob<B: AutodiffBackend> {
    args: GnnArgs,
    prep: Prepared,
    fold_ids: Vec<usize>,
    model: ClgOdeConfig,
    settings: LossSettings,
    world: usize,
    main: bool,
    spec: JobSpec,
    /// The fold in progress: its index in `fold_ids`, data and normalisation.
    fold: Option<(usize, FoldData, NormStats)>,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> GnnJob<B> {
    pub fn new(args: GnnArgs, prep: Prepared, fold_ids: Vec<usize>, comm: &dyn Collective) -> Self {
        let config = gnn_config(&args, &prep, &fold_ids);
        let spec = JobSpec {
            name: "train-gnn",
            model_name: MODEL_NAME,
            epochs: args.max_epochs,
            batch_size: args.batch_size,
            seed: args.seed,
            stages: fold_ids.len(),
            monitor: args.early_stop.monitor(Some("val_loss")),
            unit: "subjects",
            cpu_columns: true,
            epoch_checkpoints: false,
            plot: vec![Panel::new("loss", &["train_loss", "val_loss"], &[])],
        };
        Self {
            model: config.model,
            settings: config.loss,
            world: comm.size(),
            main: comm.rank() == 0,
            args,
            prep,
            fold_ids,
            spec,
            fold: None,
            _b: PhantomData,
        }
    }

    fn current(&self) -> Result<&(usize, FoldData, NormStats)> {
        self.fold.as_ref().context("no fold in progress")
    }

    fn resolved(&self, run: Option<&RunInfo>) -> GnnConfig {
        let mut c = gnn_config(&self.args, &self.prep, &self.fold_ids);
        c.world_size = self.world;
        c.effective_batch_size = self.args.batch_size * self.world;
        c.monitor = self.spec.monitor.clone();
        if let Some(run) = run {
            c.set_run(run);
        }
        c
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

    fn begin_stage(&mut self, stage: usize) -> Result<Stage> {
        let split = &self.prep.folds[stage];
        let fold = split.fold;
        let stats = self.prep.cohort.norm_stats(&split.train)?;
        let data = FoldData::new(self.prep.cohort.clone(), &stats);
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

    fn init_model(&self, stage: usize, device: &B::Device) -> ClgOde<B> {
        B::seed(device, fold_seed(self.args.seed, self.fold_ids[stage]));
        self.model.init::<B>(device)
    }

    fn lr(&self, _epoch: usize) -> f64 {
        self.args.learning_rate
    }

    fn step(&mut self, model: &ClgOde<B>, b: &Batch<'_, B>) -> Result<StepOut> {
        let (stage, data, _) = self.current()?;
        let split = &self.prep.folds[*stage];
        let order: Vec<usize> = b.order.iter().map(|&i| split.train[i]).collect();
        let ctx = StepContext::<B> {
            data,
            settings: &self.settings,
            device: b.device,
            comm: b.comm,
            seed: self.args.seed,
            fold: split.fold,
        };
        let (grads, terms, n) =
            ctx.grads(model, b.epoch, &order, (b.start, b.end), (b.lo, b.hi))?;
        Ok(StepOut {
            grads,
            grad_weight: 1.0,
            sums: term_sums(&terms, n),
        })
    }

    fn step_loss(&self, sums: &[f64]) -> (f64, Vec<f64>) {
        let (terms, n) = terms_from_sums(sums, &self.settings);
        let mut one = TermSums::default();
        one.add(&terms, n);
        (terms.total, one.to_vec())
    }

    fn train_columns(&self, acc: &[f64]) -> (f64, Row) {
        let sums = TermSums::from_vec(acc);
        let mut row = Row::new();
        sums.columns("train", &mut row);
        (sums.mean_total(), row)
    }

    fn evaluate(
        &mut self,
        model: &<ClgOde<B> as AutodiffModule<B>>::InnerModule,
        ctx: &EvalCtx<'_, B>,
    ) -> Result<Evaluation> {
        let (stage, data, _) = self.current()?;
        let split = &self.prep.folds[*stage];
        let val = eval_loss(
            model,
            data,
            &split.val,
            self.args.batch_size,
            ctx.epoch,
            &self.settings,
            ctx.device,
            ctx.comm,
        )?;
        let val_loss = val.mean_total();
        let mut head = Row::new();
        head.insert("val_loss".into(), json!(val_loss));
        let mut detail = Row::new();
        val.columns("val", &mut detail);
        Ok(Evaluation {
            head,
            detail,
            summary: format!("val loss {val_loss:.4}"),
        })
    }

    fn epoch_columns(&self, epoch: usize) -> Row {
        let s = &self.settings;
        let mut row = Row::new();
        for (k, v) in [
            ("enable_vel", json!(s.vel_on(epoch))),
            ("enable_acc", json!(s.acc_on(epoch))),
            ("lambda_manifold", json!(1.0)),
            ("lambda_vel", json!(s.lambda_vel)),
            ("lambda_acc", json!(s.lambda_acc)),
            ("lambda_kl", json!(s.lambda_kl)),
            ("lambda_topo", json!(s.lambda_topo)),
        ] {
            row.insert(k.into(), v);
        }
        row
    }

    fn model_file(&self, stage: usize) -> Result<Option<ModelFile>> {
        let (_, _, stats) = self.current()?;
        let fold = self.fold_ids[stage];
        let mut metadata = BTreeMap::new();
        metadata.insert("model_config".into(), serde_json::to_string(&self.model)?);
        metadata.insert("fold".into(), fold.to_string());
        metadata.insert("norm_stats".into(), serde_json::to_string(stats)?);
        Ok(Some(ModelFile {
            stem: fold_stem(fold),
            metadata,
        }))
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
        score_test::<B::InnerBackend>(&config, &self.prep, &folds, done.run_dir, done.device)
    }
}
