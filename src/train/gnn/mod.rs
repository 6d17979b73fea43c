//! `trainer train-gnn`: CLG-ODE training on a connectome cohort (spec `clg-ode.md` §3, minimal
//! faithful core of §7.1), and `trainer synth-connectome`.
//!
//! What a run does: load the cohort (errors surface before any run directory exists); split
//! subjects 80/20 (numpy `RandomState(42)` emulated, as the reference's `random_state=42`) and
//! the trainval part into 5 GroupKFold folds; for the selected fold(s) z-score morphology and
//! ECC with the fold's training subjects, train with Adam, validate every epoch, stop early on
//! the validation loss; then score the best fold's best weights on the test subjects.
//!
//! Decisions on the reference's quirks (spec §7.3):
//! * **Topology (Betti-curve) loss and GradNorm are off** (λ_topo = 0): this equals the
//!   reference run with `--lambda_topo 0 --gradnorm_scope none`, not its default.
//! * The best checkpoint is a **copy** of the best epoch's weights (the reference saves the last
//!   epoch's weights because its "best state" aliases the live parameters).
//! * Validation and test losses use **clean inputs and visits (0, 1, 2)** (the reference samples
//!   visits and applies augmentation there too).
//! * Everything random is **seeded** from `--seed`: weight init (per fold), the epoch shuffle,
//!   visit sampling and augmentation (per fold, epoch and subject position), so a resumed run
//!   continues exactly. The reference's torch RNG is unseeded.
//! * `use_mu` everywhere, raw age/s/s_mean covariates, lexicographic morphology ROI order, raw
//!   truth in the top-k/sparse Pearson metrics: kept as in the reference.
//!
//! Epochs in `metrics.csv` are 1-based (`epoch` = epochs done); the loss schedule uses the
//! 0-based epoch index e (velocity from e = 10, acceleration from e = 20).

pub mod batch;
pub mod config;
pub mod evaluate;
pub mod step;
pub mod test_set;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::backend::{self, BackendJob, Placement};
use crate::cli::{GnnArgs, SynthArgs};
use crate::data::connectome::{
    Cohort, CohortPaths, FoldSplit, LoadOptions, NormStats, cv_fold, load_cohort, test_split,
    write_synthetic_cohort,
};
use crate::models::clg_ode::{ClgOde, MODEL_NAME};

use self::batch::FoldData;
pub use self::config::GnnConfig;
use self::config::{gnn_config, write_run_files};
use self::step::StepContext;
pub use self::step::{EpochBench, TermSums, bench_epoch, eval_loss, fold_seed};
use super::mnist::epoch_order;
use crate::engine::checkpoint::Checkpoint;
use crate::engine::ddp::{self, CommStats};
use crate::engine::optim::Adam;
use crate::engine::params::{self, HostTensor};
use crate::engine::progress::{Progress, fmt_secs};
use crate::engine::{stop, usage};
use crate::outputs::metrics::MetricsFiles;
use crate::outputs::rundir;

/// Folds of the inner cross-validation (GroupKFold).
pub const CV_FOLDS: usize = 5;
/// Fraction of subjects held out for test, and the split's seed (the reference's constants).
pub const TEST_SIZE: f64 = 0.2;
pub const SPLIT_SEED: u32 = 42;
/// ECC bins of the test metrics.
pub const TOPO_BINS: usize = 32;

/// `trainer synth-connectome`.
pub fn synth(args: SynthArgs) -> Result<()> {
    let summary = write_synthetic_cohort(&args.out, args.subjects, args.nodes, args.seed)?;
    println!("{}", serde_json::to_string_pretty(&summary)?);
    Ok(())
}

/// One finished fold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FoldResult {
    pub fold: usize,
    pub best_val_loss: f64,
    pub best_epoch: usize,
    pub epochs_run: usize,
    pub stopped_early: bool,
    pub best_checkpoint: PathBuf,
    pub last_checkpoint: PathBuf,
}

/// Where the run is: enough to resume exactly (and on any number of ranks).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct RunState {
    /// Index into `folds` of the fold in progress (`folds.len()`: all done).
    fold_pos: usize,
    /// Epochs done in this fold.
    epoch: usize,
    /// Subjects of this epoch's order already trained on (by all ranks together).
    epoch_subjects: usize,
    global_step: u64,
    sums: TermSums,
    best_val: Option<f64>,
    best_epoch: usize,
    bad_epochs: usize,
    finished: Vec<FoldResult>,
}

struct GnnJob(GnnArgs);

impl BackendJob for GnnJob {
    type Output = ExitCode;
    fn run<B: AutodiffBackend>(self, device: B::Device, placement: Placement) -> Result<ExitCode> {
        train::<B>(&self.0, device, placement)
    }
}

/// `trainer train-gnn`.
pub fn run(args: GnnArgs) -> Result<ExitCode> {
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    if args.max_epochs == 0 {
        bail!("--max-epochs must be at least 1");
    }
    if args.solver_steps == 0 || args.latent_dim == 0 || args.hidden_dim == 0 {
        bail!("--solver-steps, --latent-dim and --hidden-dim must be at least 1");
    }
    if !(-1..CV_FOLDS as i64).contains(&args.cv_fold) {
        bail!(
            "--cv-fold must be -1 (all folds) or 0..{}, got {}",
            CV_FOLDS - 1,
            args.cv_fold
        );
    }
    if !(args.learning_rate > 0.0 && args.learning_rate.is_finite()) {
        bail!("--learning-rate must be a positive number");
    }
    let placement = backend::resolve(args.device.backend, args.device.device)?;
    backend::dispatch(placement, GnnJob(args))
}

/// A cohort ready for training: loaded, split.
pub struct Prepared {
    pub cohort: Cohort,
    /// What the readers loaded and dropped, for the log.
    pub report: String,
    pub trainval: Vec<usize>,
    pub test: Vec<usize>,
    pub folds: Vec<FoldSplit>,
}

/// Loads and splits the cohort; every reader error surfaces here with its file name.
pub fn prepare(paths: &CohortPaths, folds: &[usize]) -> Result<Prepared> {
    let (cohort, report) = load_cohort(paths, &LoadOptions::default())?;
    let split = test_split(cohort.subjects.len(), TEST_SIZE, SPLIT_SEED)?;
    let folds = folds
        .iter()
        .map(|&f| cv_fold(&split.trainval, f, CV_FOLDS))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Prepared {
        cohort,
        report: report.to_string(),
        trainval: split.trainval,
        test: split.test,
        folds,
    })
}

fn fold_ckpt(dir: &Path, fold: usize, which: &str) -> PathBuf {
    dir.join(format!("clg_ode_fold{fold}_{which}.safetensors"))
}

/// A model-only checkpoint (`model.*` tensors + config, fold, norm stats in metadata).
fn model_checkpoint(
    weights: Vec<(String, HostTensor)>,
    config: &GnnConfig,
    fold: usize,
    epoch: usize,
    val_loss: Option<f64>,
    stats: &NormStats,
) -> Result<Checkpoint> {
    let mut ck = Checkpoint::default();
    for (name, t) in weights {
        ck.floats.insert(format!("model.{name}"), t);
    }
    ck.metadata.insert("model".into(), MODEL_NAME.into());
    ck.metadata
        .insert("model_config".into(), serde_json::to_string(&config.model)?);
    ck.metadata.insert("fold".into(), fold.to_string());
    ck.metadata.insert("epoch".into(), epoch.to_string());
    if let Some(v) = val_loss {
        ck.metadata.insert("val_loss".into(), v.to_string());
    }
    ck.metadata
        .insert("norm_stats".into(), serde_json::to_string(stats)?);
    Ok(ck)
}

fn train<B: AutodiffBackend>(
    args: &GnnArgs,
    device: B::Device,
    placement: Placement,
) -> Result<ExitCode> {
    let requeue = stop::RequeuePolicy::from_args(&args.run)?;
    let comm = crate::dist::init()?;
    let (rank, world) = (comm.rank(), comm.size());
    let main = rank == 0;
    let fold_ids: Vec<usize> = if args.cv_fold < 0 {
        (0..CV_FOLDS).collect()
    } else {
        vec![args.cv_fold as usize]
    };
    // Data first: a reader error leaves no run directory behind.
    let paths = CohortPaths {
        sc_dir: args.sc_dir.clone(),
        morph_root: args.morph_root.clone(),
        subject_info_csv: args.subject_info_csv.clone(),
    };
    let prep = prepare(&paths, &fold_ids)?;
    if main {
        eprintln!("[train-gnn] {}", prep.report);
    }
    let cohort = &prep.cohort;

    let run_dir = rundir::shared(comm.as_ref(), &args.run, &args.results_dir.join("runs"))?;
    let resume = rundir::resume_source(args.run.resume.as_deref(), &run_dir)?;
    stop::install()?;
    let ckpt_dir = run_dir.join("checkpoints");
    let config = gnn_config(args, &prep, &placement, &run_dir, &fold_ids, world);

    let mut state = RunState::default();
    let mut resume_ck: Option<Checkpoint> = None;
    let mut resumed_row: Option<String> = None;
    if let Some(path) = &resume {
        let ck = Checkpoint::load(path)?;
        if ck.metadata.get("model").map(String::as_str) != Some(MODEL_NAME)
            || !ck.metadata.contains_key("run_state")
        {
            bail!("{}: not a train-gnn run checkpoint", path.display());
        }
        let saved: Value = serde_json::from_str(
            ck.metadata
                .get("fingerprint")
                .context("checkpoint has no fingerprint")?,
        )?;
        if saved != config.fingerprint() {
            bail!(
                "{}: the checkpoint was written with other settings ({saved}); resume with the \
                 same flags",
                path.display()
            );
        }
        state = serde_json::from_str(&ck.metadata["run_state"])
            .with_context(|| format!("{}: unreadable run state", path.display()))?;
        resumed_row = ck.metadata.get("metrics_row").cloned();
        if main {
            eprintln!(
                "[train-gnn] resuming from {} at fold position {} epoch {} subject {}",
                path.display(),
                state.fold_pos,
                state.epoch + 1,
                state.epoch_subjects
            );
        }
        resume_ck = Some(ck);
    }

    let metrics = MetricsFiles::new(&run_dir);
    if main {
        write_run_files(&config, &prep, &placement, resume.as_deref(), comm.name())?;
        if let Some(row) = resumed_row {
            // The process may have died between the epoch checkpoint and its metrics row.
            let row: Map<String, Value> = serde_json::from_str(&row)?;
            let key = |r: &Map<String, Value>| {
                (
                    r.get("fold").and_then(Value::as_u64),
                    r.get("epoch").and_then(Value::as_u64),
                )
            };
            if !metrics.rows()?.iter().any(|r| key(r) == key(&row)) {
                metrics.append(&row)?;
            }
        }
    }

    let names = params::names(&config.model.init::<B::InnerBackend>(&device));
    let save_state = |model: &ClgOde<B>,
                      adam: &Adam<B::InnerBackend>,
                      best: Option<&Vec<(String, HostTensor)>>,
                      state: &RunState,
                      row: Option<&Map<String, Value>>|
     -> Result<()> {
        if !main {
            return Ok(());
        }
        let mut ck = Checkpoint::default();
        for (name, t) in params::collect(model) {
            ck.floats.insert(format!("model.{name}"), t);
        }
        if let Some(best) = best {
            for (name, t) in best {
                ck.floats.insert(format!("best.{name}"), t.clone());
            }
        }
        adam.save_into(&names, &mut ck);
        ck.counters
            .insert("train.global_step".into(), state.global_step as i64);
        ck.counters.insert("rng.seed".into(), config.seed as i64);
        ck.metadata.insert("model".into(), MODEL_NAME.into());
        ck.metadata
            .insert("fingerprint".into(), config.fingerprint().to_string());
        ck.metadata
            .insert("run_state".into(), serde_json::to_string(state)?);
        ck.metadata
            .insert("config".into(), serde_json::to_string(&config)?);
        if let Some(row) = row {
            ck.metadata
                .insert("metrics_row".into(), serde_json::to_string(row)?);
        }
        ck.save(&ckpt_dir.join("last.safetensors"))
    };

    let started = Instant::now();
    let mut steps_here = 0u64;
    let mut comm_stats = CommStats::default();
    let lr = args.learning_rate;
    let settings = config.loss.clone();
    let global_batch = args.batch_size * world;
    while state.fold_pos < prep.folds.len() {
        let split = &prep.folds[state.fold_pos];
        let fold = split.fold;
        let stats = cohort.norm_stats(&split.train)?;
        let data = FoldData::new(cohort, &stats);
        let ctx = StepContext::<B> {
            data: &data,
            settings: &settings,
            device: &device,
            comm: comm.as_ref(),
            seed: args.seed,
            fold,
        };
        B::seed(&device, fold_seed(args.seed, fold));
        let mut model = config.model.init::<B>(&device);
        params::materialize(&model);
        let mut adam = Adam::<B::InnerBackend>::default();
        let mut best: Option<Vec<(String, HostTensor)>> = None;
        if let Some(ck) = resume_ck.take() {
            model = params::load(model, &ck.with_prefix("model"), &device)?;
            adam.load_from(&names, &ck, &device)?;
            let b = ck.with_prefix("best");
            if !b.is_empty() {
                let order = params::names(&model);
                best = Some(
                    order
                        .into_iter()
                        .filter_map(|n| b.get(&n).cloned().map(|t| (n, t)))
                        .collect(),
                );
            }
        } else {
            model = ddp::broadcast_params(comm.as_ref(), model, &device)?;
        }
        let n_train = split.train.len();
        let steps_per_epoch = n_train.div_ceil(global_batch);
        if main {
            eprintln!(
                "[train-gnn] fold {fold}: {} train / {} val / {} test subjects, {} nodes, \
                 {world} rank(s) x batch {} = {global_batch} subjects per step",
                n_train,
                split.val.len(),
                prep.test.len(),
                cohort.n_nodes,
                args.batch_size,
            );
        }
        let mut stopped_early = false;
        while state.epoch < args.max_epochs {
            let epoch = state.epoch;
            let order: Vec<usize> = epoch_order(n_train, fold_seed(args.seed, fold), epoch as u64)
                .into_iter()
                .map(|i| split.train[i])
                .collect();
            let mut progress = Progress::new(
                format!(
                    "[train-gnn] fold {fold} epoch {}/{}",
                    epoch + 1,
                    args.max_epochs
                ),
                steps_per_epoch as u64,
                state.epoch_subjects.div_ceil(global_batch) as u64,
                args.run.log_every_secs,
                main,
            );
            let t0 = Instant::now();
            let cpu0 = usage::cpu_seconds();
            let comm_before = comm_stats.time;
            let mut subjects_here = 0usize;
            while state.epoch_subjects < n_train {
                let start = state.epoch_subjects;
                let end = (start + global_batch).min(n_train);
                let (m, terms, n) = ctx.train_step(
                    model,
                    &mut adam,
                    lr,
                    epoch,
                    &order,
                    (start, end),
                    &mut comm_stats,
                )?;
                model = m;
                // One small reduction carries the terms and any pending stop request.
                let mut sums = step::term_sums(&terms, n);
                let stop_reason = ddp::sum_with_stop(
                    comm.as_ref(),
                    &mut sums,
                    steps_here + 1,
                    args.run.stop_after_steps,
                )?;
                let (terms, n) = step::terms_from_sums(&sums, &settings);
                if !terms.total.is_finite() {
                    bail!(
                        "training diverged at fold {fold} epoch {} step {}: loss is {}",
                        epoch + 1,
                        end.div_ceil(global_batch),
                        terms.total
                    );
                }
                state.sums.add(&terms, n);
                state.epoch_subjects = end;
                state.global_step += 1;
                steps_here += 1;
                subjects_here += end - start;
                let rate = subjects_here as f64 / t0.elapsed().as_secs_f64().max(1e-9);
                progress.update(end.div_ceil(global_batch) as u64, terms.total, rate);
                if let Some(reason) = stop_reason {
                    progress.finish();
                    save_state(&model, &adam, best.as_ref(), &state, None)?;
                    if main {
                        eprintln!(
                            "[train-gnn] stopping at fold {fold} epoch {} step {} ({}): \
                             checkpoint written to {}; resume with --resume auto",
                            epoch + 1,
                            end.div_ceil(global_batch),
                            reason.describe(),
                            ckpt_dir.join("last.safetensors").display(),
                        );
                        return Ok(requeue.finish(reason, "[train-gnn]"));
                    }
                    return Ok(requeue.exit_code(reason));
                }
                if args.run.checkpoint_every > 0
                    && state.global_step % args.run.checkpoint_every == 0
                {
                    save_state(&model, &adam, best.as_ref(), &state, None)?;
                }
            }
            progress.finish();
            let train_seconds = t0.elapsed().as_secs_f64();
            // CPU time of all ranks together.
            let mut cpu = [usage::cpu_seconds() - cpu0];
            comm.all_reduce_sum_f64(&mut cpu)?;
            let train_cpu_seconds = cpu[0];

            let valid = model.valid();
            let val = eval_loss(
                &valid,
                &data,
                &split.val,
                args.batch_size,
                epoch,
                &settings,
                &device,
                comm.as_ref(),
            )?;
            let val_loss = val.mean_total();
            let improved = val_loss.is_finite() && state.best_val.is_none_or(|b| val_loss < b);
            if improved {
                state.best_val = Some(val_loss);
                state.best_epoch = epoch + 1;
                state.bad_epochs = 0;
                if main {
                    let weights = params::collect(&valid);
                    model_checkpoint(
                        weights.clone(),
                        &config,
                        fold,
                        epoch + 1,
                        Some(val_loss),
                        &stats,
                    )?
                    .save(&fold_ckpt(&ckpt_dir, fold, "best"))?;
                    best = Some(weights);
                }
            } else {
                state.bad_epochs += 1;
            }
            if main {
                model_checkpoint(
                    params::collect(&valid),
                    &config,
                    fold,
                    epoch + 1,
                    Some(val_loss),
                    &stats,
                )?
                .save(&fold_ckpt(&ckpt_dir, fold, "last"))?;
            }

            let mut row = Map::new();
            row.insert("fold".into(), json!(fold));
            row.insert("epoch".into(), json!(epoch + 1));
            row.insert("train_loss".into(), json!(state.sums.mean_total()));
            row.insert("val_loss".into(), json!(val_loss));
            row.insert("monitor_metric".into(), json!("val_loss"));
            row.insert("monitor_value".into(), json!(val_loss));
            state.sums.columns("train", &mut row);
            val.columns("val", &mut row);
            row.insert("enable_vel".into(), json!(settings.vel_on(epoch)));
            row.insert("enable_acc".into(), json!(settings.acc_on(epoch)));
            row.insert("lambda_manifold".into(), json!(1.0));
            row.insert("lambda_vel".into(), json!(settings.lambda_vel));
            row.insert("lambda_acc".into(), json!(settings.lambda_acc));
            row.insert("lambda_kl".into(), json!(settings.lambda_kl));
            row.insert("lambda_topo".into(), json!(settings.lambda_topo));
            row.insert("lr".into(), json!(lr));
            row.insert("best_val_loss".into(), json!(state.best_val));
            row.insert("is_best".into(), json!(improved));
            row.insert("steps".into(), json!(state.global_step));
            row.insert("epoch_steps".into(), json!(steps_per_epoch));
            row.insert("train_seconds".into(), json!(train_seconds));
            row.insert(
                "train_subjects_per_s".into(),
                json!(subjects_here as f64 / train_seconds.max(1e-9)),
            );
            row.insert("train_cpu_seconds".into(), json!(train_cpu_seconds));
            row.insert(
                "train_cpu_seconds_per_subject".into(),
                json!(train_cpu_seconds / subjects_here.max(1) as f64),
            );
            row.insert(
                "allreduce_seconds".into(),
                json!((comm_stats.time - comm_before).as_secs_f64()),
            );
            row.insert("seconds".into(), json!(t0.elapsed().as_secs_f64()));

            state.epoch = epoch + 1;
            state.epoch_subjects = 0;
            state.sums = TermSums::default();
            if state.bad_epochs >= args.patience {
                stopped_early = true;
            }
            let fold_done = stopped_early || state.epoch >= args.max_epochs;
            if fold_done {
                state.finished.push(FoldResult {
                    fold,
                    best_val_loss: state.best_val.unwrap_or(f64::NAN),
                    best_epoch: state.best_epoch,
                    epochs_run: state.epoch,
                    stopped_early,
                    best_checkpoint: fold_ckpt(&ckpt_dir, fold, "best"),
                    last_checkpoint: fold_ckpt(&ckpt_dir, fold, "last"),
                });
                let next = RunState {
                    fold_pos: state.fold_pos + 1,
                    global_step: state.global_step,
                    finished: state.finished.clone(),
                    ..Default::default()
                };
                state = next;
            }
            save_state(&model, &adam, best.as_ref(), &state, Some(&row))?;
            if main {
                metrics.append(&row)?;
                eprintln!(
                    "[train-gnn] fold {fold} epoch {}/{}: train loss {:.4}, val loss {:.4}{}, {}",
                    epoch + 1,
                    args.max_epochs,
                    row["train_loss"].as_f64().unwrap_or(f64::NAN),
                    val_loss,
                    if improved { " (best)" } else { "" },
                    fmt_secs(train_seconds)
                );
            }
            if fold_done {
                if stopped_early && main {
                    eprintln!(
                        "[train-gnn] fold {fold}: early stop after {} epochs without improvement",
                        args.patience
                    );
                }
                break;
            }
        }
        ddp::log_digest(
            "[train-gnn]",
            &format!("fold {fold} "),
            comm.as_ref(),
            &model,
        );
    }
    comm_stats.log("[train-gnn]", comm.as_ref());
    if !main {
        return Ok(ExitCode::SUCCESS);
    }
    test_set::score_test::<B::InnerBackend>(&config, &prep, &state.finished, &device)?;
    eprintln!(
        "[train-gnn] done in {}; run directory {}",
        fmt_secs(started.elapsed().as_secs_f64()),
        run_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;
