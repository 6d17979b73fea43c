//! `trainer bench gnn`: CLG-ODE training cost on a synthetic cohort, side by side in one run:
//! the minimal core (no topology loss, no GradNorm) and the reference's default objective
//! (topology loss + GradNorm), with every term of the schedule on (epoch 20): wall seconds per
//! epoch, CPU seconds per training subject per epoch and peak resident memory, for every
//! compiled backend and usable device, on one or several cohort sizes (`--subjects 200,1000`)
//! and batches (`--batch-size 2,16`: the reference's 2 by default; a GPU runs a batch's
//! subjects as one computation, so its cost per subject falls as the batch grows).
//! After `--warmup` steps (a GPU compiles its kernels there), at most `--steps` steps are timed
//! and the epoch's seconds extrapolated from them.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;

use super::BenchSettings as BenchArgs;
use crate::backend::profile as op_profile;
use crate::backend::{self, BackendJob, Placement};
use crate::data::connectome::{
    Cohort, CohortPaths, LoadOptions, cv_fold, load_cohort, test_split, write_synthetic_cohort,
};
use crate::dist::Single;
use crate::files::write_json;
use crate::host_reads::{Counts, PerStep};
use crate::models::clg_ode::ClgOdeConfig;
use crate::models::clg_ode::objective::{Objective, ObjectiveConfig, TopologyConfig};
use crate::toolbox::optim::{Adam, Grads};
use crate::toolbox::params;
use crate::toolbox::seed::epoch_order;
use crate::toolbox::usage::{cpu_seconds, peak_rss_bytes};
use crate::train::gnn::Sampling;
use crate::train::gnn::TEST_SIZE;
use crate::train::gnn::clg_ode::step::{Pieces, grads};
use crate::train::gnn::fold_seed;
use crate::train::gnn::protocol::fold_data::FoldData;

#[derive(Debug, Clone, Serialize)]
pub(crate) struct GnnBenchRow {
    pub backend: String,
    pub device: String,
    /// `core` (λ_topo = 0, no GradNorm) or `default` (the reference's objective).
    pub objective: &'static str,
    /// Subjects of the synthetic cohort, and of its fold-0 training split.
    pub subjects: usize,
    /// Subjects per step.
    pub batch_size: usize,
    pub training_subjects: usize,
    /// Steps of `batch_size` subjects in an epoch, and how many were timed (after the warm-up).
    pub steps_per_epoch: usize,
    pub timed_steps: usize,
    /// Seconds of the timed steps × steps per epoch / timed steps.
    pub seconds_per_epoch: f64,
    pub cpu_seconds_per_subject: f64,
    /// Backend operations, uploads and device → host reads per training step
    /// ([`crate::host_reads`]; a read is a sync on a GPU).
    #[serde(flatten)]
    pub counts: PerStep,
    pub error: Option<String>,
}

/// The objectives compared: the minimal core and the reference default.
fn objectives() -> [(&'static str, ObjectiveConfig); 2] {
    let core = ObjectiveConfig {
        topology: TopologyConfig::off(),
        ..Default::default()
    };
    [("core", core), ("default", ObjectiveConfig::default())]
}

/// Schedule epoch of the timed epoch: velocity and acceleration on.
const EPOCH: usize = 20;

/// What one epoch's timing gave.
struct Timed {
    training_subjects: usize,
    steps_per_epoch: usize,
    timed_steps: usize,
    /// Seconds of the timed steps.
    secs: f64,
    /// What the steps (warm-up and timed) asked of the device; the model's initialisation
    /// left out.
    counts: Counts,
}

/// One training epoch of fold 0 (`batch` subjects a step, in this process); no files written. The first `warmup`
/// steps (fewer when the epoch is short) are not timed, then at most `steps` are.
#[allow(clippy::too_many_arguments)]
fn bench_epoch<B: AutodiffBackend>(
    cohort: Arc<Cohort>,
    model_cfg: &ClgOdeConfig,
    obj: ObjectiveConfig,
    placement: Placement,
    batch: usize,
    (warmup, steps): (usize, usize),
    device: &B::Device,
) -> Result<Timed> {
    let seed = 42;
    let split = test_split(cohort.subjects.len(), TEST_SIZE, seed as u32)?;
    let fold = cv_fold(&split.trainval, 0, 5)?;
    let stats = cohort.norm_stats(&fold.train)?;
    let backend = placement.backend;
    let resident = crate::train::gnn::clg_ode::resident::for_placement(
        &cohort,
        placement,
        crate::train::gnn::ScansOnDevice::Auto,
        false,
    )?;
    let data = FoldData::new(cohort, &stats, true);
    let sampling = Sampling::default();
    // The reference's --max_epochs (the topology warm-up's length).
    let max_epochs = 120;
    let mut objective = Objective::new(obj, model_cfg.decoder.fixed_support, max_epochs, seed);
    objective.targets_on_device = backend.sorts_on_device();
    objective.resident = resident;
    let cut = Pieces::for_backend(backend);
    B::seed(device, fold_seed(seed, 0));
    let mut model = model_cfg.init::<B>(device);
    params::materialize(&model);
    // The update train-gnn runs on this backend (one pass on `flex`).
    let mut adam = Adam::<B::InnerBackend>::with_fused(crate::launch::fused_adam());
    let order: Vec<usize> = epoch_order(fold.train.len(), seed, EPOCH as u64)
        .into_iter()
        .map(|i| fold.train[i])
        .collect();
    let starts: Vec<usize> = (0..order.len()).step_by(batch).collect();
    let warmup = warmup.min(starts.len().saturating_sub(1));
    let timed = steps.min(starts.len() - warmup);
    let mut t0 = Instant::now();
    let counts = Counts::now();
    for (k, &start) in starts.iter().take(warmup + timed).enumerate() {
        if k == warmup {
            B::sync(device)?;
            t0 = Instant::now();
        }
        let end = (start + batch).min(order.len());
        let r = grads(
            &model,
            &mut objective,
            &data,
            &sampling,
            (seed, 0, EPOCH),
            &order,
            start,
            (start, end),
            cut,
            device,
            &Single,
        )?;
        model = adam.step(5e-5, model, Grads::Params(r.grads));
    }
    B::sync(device)?;
    Ok(Timed {
        training_subjects: order.len(),
        steps_per_epoch: starts.len(),
        timed_steps: timed,
        secs: t0.elapsed().as_secs_f64(),
        counts: counts.elapsed(),
    })
}

struct Job<'a> {
    cohort: &'a Arc<Cohort>,
    cfg: &'a ClgOdeConfig,
    batch: usize,
    warmup_steps: (usize, usize),
}

impl BackendJob for Job<'_> {
    type Output = Vec<(&'static str, Timed, f64, PerStep)>;
    fn run<B: AutodiffBackend>(self, device: B::Device, p: Placement) -> Result<Self::Output> {
        let mut out = Vec::new();
        op_profile::enable(op_profile::requested());
        for (name, obj) in objectives() {
            op_profile::reset();
            op_profile::phase("epoch");
            let cpu0 = cpu_seconds();
            let timed = bench_epoch::<B>(
                self.cohort.clone(),
                self.cfg,
                obj,
                p,
                self.batch,
                self.warmup_steps,
                &device,
            )?;
            let cpu = cpu_seconds() - cpu0;
            // Warm-up and timed steps both counted: counts per step do not depend on the timing.
            let done = (self
                .warmup_steps
                .0
                .min(timed.steps_per_epoch.saturating_sub(1))
                + timed.timed_steps)
                .max(1);
            let counts = timed.counts.per_step(done as u64, timed.counts.ops > 0);
            let report = op_profile::take();
            if !report.ops.is_empty() {
                eprintln!(
                    "\n### {} CLG-ODE epoch ({name} objective): {done} steps of {} subjects, \
                     {:.1} ms/timed step",
                    p.backend.name(),
                    self.batch,
                    1e3 * timed.secs / timed.timed_steps.max(1) as f64
                );
                super::profile::print_ops(&report, done, 25);
            }
            let cpu_per_subject =
                cpu / (self.batch * done).min(timed.training_subjects).max(1) as f64;
            out.push((name, timed, cpu_per_subject, counts));
        }
        op_profile::enable(false);
        Ok(out)
    }
}

/// The rows of one cohort size on every selected placement.
fn bench_cohort(args: &BenchArgs, subjects: usize) -> Result<Vec<GnnBenchRow>> {
    // Removed when dropped, and on SIGTERM/SIGINT/SIGHUP (super::limits).
    let tmp = super::limits::TempDir::new(
        std::env::temp_dir().join(format!("trainer-bench-gnn-{}", std::process::id())),
    );
    let _ = std::fs::remove_dir_all(tmp.path());
    std::fs::create_dir_all(tmp.path())
        .with_context(|| format!("cannot create {}", tmp.path().display()))?;
    eprintln!(
        "[bench] synthetic cohort: {subjects} subjects x {} nodes",
        args.nodes
    );
    // Inside the registered folder, so that the writer's staging folder (beside its output)
    // goes with it on a signal.
    let dir = tmp.path().join("cohort");
    let written = write_synthetic_cohort(&dir, subjects, args.nodes, 1);
    super::limits::wait_if_interrupted();
    written?;
    let loaded = load_cohort(&CohortPaths::under(&dir), &LoadOptions::default());
    super::limits::wait_if_interrupted();
    drop(tmp);
    let cohort = Arc::new(loaded?.0);
    let numeric = cohort
        .subjects
        .first()
        .and_then(|s| s.scans.first())
        .map_or(35, |s| 3 + s.ecc.len());
    let mut cfg = ClgOdeConfig::new(cohort.n_metrics(), cohort.site_vocab);
    cfg.numeric_cov_dim = numeric;
    cfg.sex_vocab = cohort.sex_vocab;
    let mut rows = Vec::new();
    for placement in super::selected_placements(&args.backends) {
        let Ok(placement) = placement else { continue };
        eprintln!(
            "[bench] gnn on {} {} ...",
            placement.backend.name(),
            placement.device
        );
        for &batch in &args.gnn_batches() {
            let job = Job {
                cohort: &cohort,
                cfg: &cfg,
                batch,
                warmup_steps: (args.warmup, args.steps),
            };
            let row = |objective, t: Option<&Timed>, cpu, counts, error| GnnBenchRow {
                backend: placement.backend.name().into(),
                device: placement.device.to_string(),
                objective,
                subjects,
                batch_size: batch,
                training_subjects: t.map_or(0, |t| t.training_subjects),
                steps_per_epoch: t.map_or(0, |t| t.steps_per_epoch),
                timed_steps: t.map_or(0, |t| t.timed_steps),
                seconds_per_epoch: t.map_or(f64::NAN, |t| {
                    t.secs * t.steps_per_epoch as f64 / t.timed_steps.max(1) as f64
                }),
                cpu_seconds_per_subject: cpu,
                counts,
                error,
            };
            match backend::dispatch_checked(placement, job) {
                Ok(v) => {
                    for (objective, t, cpu, counts) in v {
                        rows.push(row(objective, Some(&t), cpu, counts, None));
                    }
                }
                Err(e) => {
                    let none = PerStep {
                        host_reads_per_step: f64::NAN,
                        ..PerStep::default()
                    };
                    rows.push(row("", None, f64::NAN, none, Some(format!("{e:#}"))))
                }
            }
        }
    }
    Ok(rows)
}

pub(crate) fn run(args: &BenchArgs) -> Result<()> {
    let (subjects, folds, epochs) = args.plan_shape();
    // Checked before the benchmark runs: a plan that cannot be split is refused at once.
    let shape = super::plan::Shape::new(subjects, folds, epochs)?;
    let mut rows = Vec::new();
    for &subjects in &args.subjects {
        rows.extend(bench_cohort(args, subjects)?);
    }
    let peak = peak_rss_bytes();
    println!(
        "{:<12} {:<8} {:>9} {:>9} {:>6} {:>9} {:>12} {:>14} {:>9} {:>12} {:>11}",
        "backend",
        "device",
        "objective",
        "subjects",
        "batch",
        "steps",
        "s/epoch",
        "CPU s/subject",
        "ops/step",
        "uploads/step",
        "reads/step"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for r in &rows {
        println!(
            "{:<12} {:<8} {:>9} {:>9} {:>6} {:>9} {:>12.2} {:>14.3} {:>9} {:>12} {:>11.1}{}",
            r.backend,
            r.device,
            r.objective,
            r.subjects,
            r.batch_size,
            format!("{}/{}", r.timed_steps, r.steps_per_epoch),
            r.seconds_per_epoch,
            r.cpu_seconds_per_subject,
            opt(r.counts.ops_per_step),
            opt(r.counts.uploads_per_step),
            r.counts.host_reads_per_step,
            r.error
                .as_deref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
    }
    println!("peak RSS {:.2} GB", peak as f64 / 1e9);
    let plan = super::plan::project(&rows, &shape);
    super::plan::print(&shape, &plan);
    let json = serde_json::json!({
        "target": "gnn", "subjects": args.subjects, "batch_sizes": args.gnn_batches(),
        "nodes": args.nodes,
        "warmup_steps": args.warmup, "timed_steps": args.steps,
        "threads": rayon::current_num_threads(),
        "peak_rss_bytes": peak, "rows": rows,
        "plan": {"shape": shape, "rows": plan},
    });
    println!("{}", serde_json::to_string(&json)?);
    if let Some(path) = &args.json {
        write_json(path, &json)?;
    }
    Ok(())
}
