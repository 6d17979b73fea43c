//! `trainer bench gnn`: CLG-ODE training cost on a synthetic cohort (reference defaults apart
//! from epochs): wall seconds per epoch, CPU seconds per training subject per epoch and peak
//! resident memory, for every compiled backend and usable device, in one run.

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;

use crate::backend::fast_cpu::profile as op_profile;
use crate::backend::{self, BackendJob, Placement};
use crate::cli::BenchArgs;
use crate::data::connectome::{CohortPaths, LoadOptions, load_cohort, write_synthetic_cohort};
use crate::models::clg_ode::ClgOdeConfig;

use crate::engine::usage::{cpu_seconds, peak_rss_bytes};
use crate::files::write_json;
use crate::train::gnn::bench_epoch;

#[derive(Debug, Clone, Serialize)]
pub struct GnnBenchRow {
    pub backend: String,
    pub device: String,
    /// 0: manifold + KL terms only; 20: velocity and acceleration terms on as well.
    pub schedule_epoch: usize,
    pub training_subjects: usize,
    pub seconds_per_epoch: f64,
    pub cpu_seconds_per_subject: f64,
    pub error: Option<String>,
}

struct Job<'a> {
    cohort: &'a crate::data::connectome::Cohort,
    cfg: &'a ClgOdeConfig,
}

impl BackendJob for Job<'_> {
    type Output = Vec<(usize, usize, f64, f64)>;
    fn run<B: AutodiffBackend>(self, device: B::Device, p: Placement) -> Result<Self::Output> {
        let mut out = Vec::new();
        op_profile::enable(op_profile::requested());
        for schedule in [0usize, 20] {
            op_profile::reset();
            op_profile::phase("epoch");
            let cpu0 = cpu_seconds();
            let r = bench_epoch::<B>(self.cohort, self.cfg, 2, schedule, 42, &device)?;
            let cpu = cpu_seconds() - cpu0;
            let report = op_profile::take();
            if !report.ops.is_empty() {
                let steps = r.subjects.div_ceil(2);
                eprintln!(
                    "\n### {} CLG-ODE epoch (schedule epoch {schedule}): {steps} steps of 2 \
                     subjects, {:.1} ms/step",
                    p.backend.name(),
                    1e3 * r.seconds / steps.max(1) as f64
                );
                super::profile::print_ops(&report, steps, 25);
            }
            out.push((
                schedule,
                r.subjects,
                r.seconds,
                cpu / r.subjects.max(1) as f64,
            ));
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
    let (cohort, _) = loaded?;
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
        let result = backend::dispatch(
            placement,
            Job {
                cohort: &cohort,
                cfg: &cfg,
            },
        );
        match result {
            Ok(v) => {
                for (schedule, subjects, secs, cpu) in v {
                    rows.push(GnnBenchRow {
                        backend: placement.backend.name().into(),
                        device: placement.device.to_string(),
                        schedule_epoch: schedule,
                        training_subjects: subjects,
                        seconds_per_epoch: secs,
                        cpu_seconds_per_subject: cpu,
                        error: None,
                    })
                }
            }
            Err(e) => rows.push(GnnBenchRow {
                backend: placement.backend.name().into(),
                device: placement.device.to_string(),
                schedule_epoch: 0,
                training_subjects: 0,
                seconds_per_epoch: f64::NAN,
                cpu_seconds_per_subject: f64::NAN,
                error: Some(format!("{e:#}")),
            }),
        }
    }
    let peak = peak_rss_bytes();
    println!(
        "{:<8} {:<8} {:>9} {:>9} {:>12} {:>14}",
        "backend", "device", "schedule", "subjects", "s/epoch", "CPU s/subject"
    );
    for r in &rows {
        println!(
            "{:<8} {:<8} {:>9} {:>9} {:>12.2} {:>14.3}{}",
            r.backend,
            r.device,
            r.schedule_epoch,
            r.training_subjects,
            r.seconds_per_epoch,
            r.cpu_seconds_per_subject,
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
