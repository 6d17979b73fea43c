//! `trainer bench gnn`: CLG-ODE training cost on a synthetic cohort, side by side in one run:
//! the minimal core (no topology loss, no GradNorm) and the reference's default objective
//! (topology loss + GradNorm), with every term of the schedule on (epoch 20): wall seconds per
//! epoch, CPU seconds per training subject per epoch and peak resident memory, for every
//! compiled backend and usable device.

use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
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
use crate::models::clg_ode::ClgOdeConfig;
use crate::models::clg_ode::objective::{Objective, ObjectiveConfig, TopologyConfig};
use crate::toolbox::optim::{Adam, Grads};
use crate::toolbox::params;
use crate::toolbox::seed::epoch_order;
use crate::toolbox::usage::{cpu_seconds, peak_rss_bytes};
use crate::train::gnn::TEST_SIZE;
use crate::train::gnn::batch::Sampling;
use crate::train::gnn::fold_data::FoldData;
use crate::train::gnn::step::{Pieces, fold_seed, grads};

#[derive(Debug, Clone, Serialize)]
pub struct GnnBenchRow {
    pub backend: String,
    pub device: String,
    /// `core` (λ_topo = 0, no GradNorm) or `default` (the reference's objective).
    pub objective: &'static str,
    pub training_subjects: usize,
    pub seconds_per_epoch: f64,
    pub cpu_seconds_per_subject: f64,
    /// Device → host reads per training step ([`crate::host_reads`]): each is a sync on a GPU.
    pub host_reads_per_step: f64,
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

/// One training epoch of fold 0 (batch 2, in this process), timed; no files written.
fn bench_epoch<B: AutodiffBackend>(
    cohort: Arc<Cohort>,
    model_cfg: &ClgOdeConfig,
    obj: ObjectiveConfig,
    cut: Pieces,
    device: &B::Device,
) -> Result<(usize, f64)> {
    let seed = 42;
    let split = test_split(cohort.subjects.len(), TEST_SIZE, seed as u32)?;
    let fold = cv_fold(&split.trainval, 0, 5)?;
    let stats = cohort.norm_stats(&fold.train)?;
    let data = FoldData::new(cohort, &stats, true);
    let sampling = Sampling::default();
    // The reference's --max_epochs (the topology warm-up's length).
    let max_epochs = 120;
    let mut objective = Objective::new(obj, model_cfg.decoder.fixed_support, max_epochs, seed);
    B::seed(device, fold_seed(seed, 0));
    let mut model = model_cfg.init::<B>(device);
    params::materialize(&model);
    let mut adam = Adam::<B::InnerBackend>::default();
    let order: Vec<usize> = epoch_order(fold.train.len(), seed, EPOCH as u64)
        .into_iter()
        .map(|i| fold.train[i])
        .collect();
    let t0 = Instant::now();
    for start in (0..order.len()).step_by(2) {
        let end = (start + 2).min(order.len());
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
    Ok((order.len(), t0.elapsed().as_secs_f64()))
}

struct Job<'a> {
    cohort: &'a Arc<Cohort>,
    cfg: &'a ClgOdeConfig,
}

impl BackendJob for Job<'_> {
    type Output = Vec<(&'static str, usize, f64, f64, f64)>;
    fn run<B: AutodiffBackend>(self, device: B::Device, p: Placement) -> Result<Self::Output> {
        let mut out = Vec::new();
        let cut = Pieces::for_backend(p.backend);
        op_profile::enable(op_profile::requested());
        for (name, obj) in objectives() {
            op_profile::reset();
            op_profile::phase("epoch");
            let (cpu0, reads0) = (cpu_seconds(), crate::host_reads::count());
            let (subjects, secs) =
                bench_epoch::<B>(self.cohort.clone(), self.cfg, obj, cut, &device)?;
            let cpu = cpu_seconds() - cpu0;
            let steps = subjects.div_ceil(2).max(1);
            let reads = (crate::host_reads::count() - reads0) as f64 / steps as f64;
            let report = op_profile::take();
            if !report.ops.is_empty() {
                eprintln!(
                    "\n### {} CLG-ODE epoch ({name} objective): {steps} steps of 2 subjects, \
                     {:.1} ms/step",
                    p.backend.name(),
                    1e3 * secs / steps as f64
                );
                super::profile::print_ops(&report, steps, 25);
            }
            out.push((name, subjects, secs, cpu / subjects.max(1) as f64, reads));
        }
        op_profile::enable(false);
        Ok(out)
    }
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let tmp = std::env::temp_dir().join(format!("trainer-bench-gnn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    eprintln!(
        "[bench] synthetic cohort: {} subjects x {} nodes",
        args.subjects, args.nodes
    );
    write_synthetic_cohort(&tmp, args.subjects, args.nodes, 1)?;
    let loaded = load_cohort(&CohortPaths::under(&tmp), &LoadOptions::default());
    let _ = std::fs::remove_dir_all(&tmp);
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
        let result = backend::dispatch_checked(
            placement,
            Job {
                cohort: &cohort,
                cfg: &cfg,
            },
        );
        match result {
            Ok(v) => {
                for (objective, subjects, secs, cpu, reads) in v {
                    rows.push(GnnBenchRow {
                        backend: placement.backend.name().into(),
                        device: placement.device.to_string(),
                        objective,
                        training_subjects: subjects,
                        seconds_per_epoch: secs,
                        cpu_seconds_per_subject: cpu,
                        host_reads_per_step: reads,
                        error: None,
                    })
                }
            }
            Err(e) => rows.push(GnnBenchRow {
                backend: placement.backend.name().into(),
                device: placement.device.to_string(),
                objective: "",
                training_subjects: 0,
                seconds_per_epoch: f64::NAN,
                cpu_seconds_per_subject: f64::NAN,
                host_reads_per_step: f64::NAN,
                error: Some(format!("{e:#}")),
            }),
        }
    }
    let peak = peak_rss_bytes();
    println!(
        "{:<12} {:<8} {:>9} {:>9} {:>12} {:>14} {:>11}",
        "backend", "device", "objective", "subjects", "s/epoch", "CPU s/subject", "reads/step"
    );
    for r in &rows {
        println!(
            "{:<12} {:<8} {:>9} {:>9} {:>12.2} {:>14.3} {:>11.1}{}",
            r.backend,
            r.device,
            r.objective,
            r.training_subjects,
            r.seconds_per_epoch,
            r.cpu_seconds_per_subject,
            r.host_reads_per_step,
            r.error
                .as_deref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
    }
    println!("peak RSS {:.2} GB", peak as f64 / 1e9);
    let json = serde_json::json!({
        "target": "gnn", "subjects": args.subjects, "nodes": args.nodes,
        "peak_rss_bytes": peak, "rows": rows,
    });
    println!("{}", serde_json::to_string(&json)?);
    if let Some(path) = &args.json {
        write_json(path, &json)?;
    }
    Ok(())
}
