//! [`train`]: set-up, resume and the stages of a run; the epochs are in [`super::epoch`].

use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use serde_json::json;

use super::degeneracy;
use super::epoch::StageRun;
use super::epoch_ctx::Ctx;
use super::progress::fmt_secs;
use super::resume_file::ResumeFile;
use super::retention::{self, Removed};
use super::state::Position;
use super::{Done, Job, JobSpec, KeepCheckpoints, RunContext};
use crate::outputs::RunDir;
use crate::outputs::metrics::MetricsFiles;
use crate::outputs::rundir::{self, RunMeta};
use crate::toolbox::ddp::{self, CommStats};
use crate::toolbox::optim::Optimizer;
use crate::toolbox::params;
use crate::toolbox::stop;

/// Runs `job` to the end (or to a stop request) in the run directory of `ctx`. Returns the
/// process exit code.
pub(crate) fn train<B: AutodiffBackend, J: Job<B>>(
    mut job: J,
    rc: &RunContext<B>,
) -> Result<ExitCode> {
    let spec = job.spec().clone();
    let tag = format!("[{}]", spec.name);
    let comm = rc.comm.as_ref();
    let device = &rc.device;
    let main = comm.rank() == 0;
    let run_dir = rc.run_dir.clone();

    if rc.run.resume.is_some() && finished_here(rc) {
        // Its resume state may be gone (dropped at its end): nothing to read, nothing to do.
        // The directory is claimed as before (its lock, dead processes' temporaries removed).
        let _lock = if main {
            Some(rundir::claim(&run_dir, true)?)
        } else {
            None
        };
        if main {
            already_finished(&tag, &run_dir);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut pos = Position::default();
    let mut saved: Option<ResumeFile> = None;
    if let Some(path) = &rc.resume {
        let file = ResumeFile::load(path, &spec, || {
            Ok(params::names(&job.init_model(0, device)?))
        })?;
        let s = &file.saved;
        let state = serde_json::from_value(s.job_state.clone())
            .map_err(|e| anyhow::anyhow!("{}: unreadable job state: {e}", path.display()))?;
        job.restore(state);
        pos = s.position.clone();
        if main
            && !(pos.stage >= spec.plan.stages && RunDir::new(&run_dir).finished_json().is_file())
        {
            eprintln!(
                "{tag} resuming from {} at {}epoch {} item {}",
                path.display(),
                if spec.plan.stages > 1 {
                    format!("stage {}/{} ", pos.stage + 1, spec.plan.stages)
                } else {
                    String::new()
                },
                pos.epoch + 1,
                pos.epoch_items
            );
        }
        saved = Some(file);
    }

    // After the checkpoint was read (a bad one leaves no directory behind); held until the run
    // ends, so that no second run writes into this directory meanwhile.
    let _lock = if main {
        Some(rundir::claim(&run_dir, rc.run.resume.is_some())?)
    } else {
        None
    };
    let finished = RunDir::new(&run_dir).finished_json();
    if pos.stage >= spec.plan.stages && finished.is_file() {
        if main {
            already_finished(&tag, &run_dir);
        }
        return Ok(ExitCode::SUCCESS);
    }
    stop::install()?;
    let metrics = MetricsFiles::new(&run_dir);
    if main {
        let run_files = RunDir::new(&run_dir);
        // run_meta.json first: it marks the directory as a run (`rundir::claim`).
        write_meta(rc, &spec)?;
        run_files.write_args(&spec.config)?;
        if let Some(toml) = &rc.run.resolved_config {
            run_files.write_config_toml(&with_settled(toml, &spec.settled))?;
        }
        if let Some(row) = saved.as_ref().and_then(|f| f.saved.row.as_ref()) {
            // The process may have died between the epoch's checkpoint and its metrics row.
            metrics.append_unless_present(row, &row.key_columns())?;
        }
    }

    let mut ctx = Ctx::<B> {
        tag,
        comm,
        device,
        run: &rc.run,
        run_dir: run_dir.clone(),
        metrics,
        config: serde_json::to_string(&spec.config)?,
        comm_stats: CommStats::default(),
        steps_here: 0,
        resumed_from: rc.resume.clone(),
        removed: Removed::default(),
        capture: rc.step_capture,
        spec,
    };
    let started = Instant::now();
    while pos.stage < ctx.spec.plan.stages {
        // A checkpoint written at a stage boundary holds the previous stage's weights: the new
        // stage starts fresh.
        let mid_stage = saved.is_some() && (pos.epoch > 0 || pos.epoch_items > 0);
        let stage = job.begin_stage(pos.stage, mid_stage)?;
        let mut model = job.init_model(pos.stage, device)?;
        params::materialize(&model);
        let names = params::names(&model);
        let mut optimizer =
            Optimizer::<B::InnerBackend>::new(ctx.spec.plan.optimizer, rc.fused_adam);
        let mut best = None;
        let mut sums = J::Epoch::default();
        match saved.take() {
            Some(file) if mid_stage => {
                model = file.model(model, device)?;
                file.restore_optimizer(&mut optimizer, &names, device)?;
                best = file.saved.best;
                if !pos.acc.is_null() {
                    sums = serde_json::from_value(pos.acc.clone()).map_err(|e| {
                        anyhow::anyhow!("the checkpoint's epoch sums are unreadable: {e}")
                    })?;
                }
            }
            _ => model = ddp::broadcast_params(comm, model, device)?,
        }
        if main && !stage.label.is_empty() {
            eprintln!(
                "{} {}: {} training items",
                ctx.tag, stage.label, stage.items
            );
        }
        let label = stage.label.clone();
        let mut sr = StageRun {
            job: &mut job,
            stage,
            names,
            optimizer,
            best,
            sums,
            last_loss: f64::NAN,
        };
        let (model, stopped) = sr.run(&mut ctx, &mut pos, model)?;
        if let Some(code) = stopped {
            log_checkpoints(&ctx);
            return Ok(code);
        }
        let what = if label.is_empty() {
            String::new()
        } else {
            format!("{label} ")
        };
        ddp::log_digest(&ctx.tag, &what, comm, &model);
    }
    ctx.comm_stats.log(&ctx.tag, comm);
    job.finish(&Done {
        run_dir: &run_dir,
        stages: &pos.finished,
        device,
        comm,
    })?;
    if main {
        let warnings = degeneracy::check(
            &ctx.metrics.rows()?,
            &pos.finished,
            ctx.spec.monitor.as_ref(),
            &ctx.spec.phases,
            ctx.spec.validate_initial.as_deref(),
        );
        for w in &warnings {
            eprintln!("{} warning: {w}", ctx.tag);
        }
        let run_files = RunDir::new(&run_dir);
        let mut record = serde_json::json!({
            "finished_at": chrono::Local::now().to_rfc3339(),
            "seconds": started.elapsed().as_secs_f64(),
            "warnings": warnings,
        });
        // `best-last`: the resume state goes once `finished.json` says the run is done (and
        // keeps the job's state it held), so that a kill between the two leaves a run that
        // `--resume auto` calls finished.
        let resume = (rc.run.keep_checkpoints == KeepCheckpoints::BestLast)
            .then(|| {
                let elsewhere = pos
                    .finished
                    .iter()
                    .all(|s| s.last_checkpoint.as_ref().is_some_and(|p| p.is_file()));
                retention::finished_resume(&run_files, &ctx.spec, elsewhere, &ctx.tag)
            })
            .flatten();
        if let Some(r) = &resume {
            record["resume_state"] = r.record();
            record["job_state"] = r.job_state.clone();
        }
        run_files.write_finished(&record)?;
        if let Some(r) = resume {
            ctx.removed.resume = r.drop_it(&ctx.tag);
            if ctx.removed.resume.is_none() {
                record["resume_state"] = serde_json::json!(null);
                run_files.write_finished(&record)?;
            }
        }
    }
    log_checkpoints(&ctx);
    if main {
        eprintln!(
            "{} done in {}; run directory {}",
            ctx.tag,
            fmt_secs(started.elapsed().as_secs_f64()),
            run_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the run directory holds a finished run (`finished.json`) and the checkpoint to
/// resume is its own resume checkpoint, or none (`--resume auto` where it was dropped).
fn finished_here<B: AutodiffBackend>(rc: &RunContext<B>) -> bool {
    let run = RunDir::new(&rc.run_dir);
    let own = run.last_checkpoint();
    let same = |p: &std::path::Path| match (p.canonicalize(), own.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => p == own,
    };
    run.finished_json().is_file() && rc.resume.as_deref().is_none_or(same)
}

/// Says that the run in `run_dir` is finished and nothing is done: every file stays as the run
/// wrote it (a re-scoring would rewrite the results' CPU seconds, run_meta's argv and
/// created_at).
fn already_finished(tag: &str, run_dir: &std::path::Path) {
    eprintln!(
        "{tag} {} is already finished ({}); nothing done. To train again, start a new run \
         (another --run-name / --out)",
        run_dir.display(),
        RunDir::new(run_dir).finished_json().display()
    );
}

/// The checkpoint files by kind, their sizes and what this process removed (rank 0).
fn log_checkpoints<B: AutodiffBackend>(ctx: &Ctx<'_, B>) {
    let run = RunDir::new(&ctx.run_dir);
    if let Some(line) = ctx
        .main()
        .then(|| retention::summary(&run, ctx.run.keep_checkpoints, ctx.removed))
        .flatten()
    {
        eprintln!("{} {line}", ctx.tag);
    }
}

fn write_meta<B: AutodiffBackend>(rc: &RunContext<B>, spec: &JobSpec) -> Result<()> {
    let placement = rc.placement;
    let mut meta = RunMeta::new(
        &rc.run_dir,
        placement.backend.name(),
        &placement.device.to_string(),
        rc.job_id.clone(),
        rc.cluster_record(),
        rc.preflight.clone(),
    );
    meta.world_size = rc.world_size();
    let extra = &mut meta.extra;
    extra.insert(
        "effective_batch_size".into(),
        json!(spec.plan.global_batch(rc.world_size())),
    );
    extra.insert("per_rank_batch_size".into(), json!(spec.plan.batch_size));
    if spec.plan.micro_batches > 1 {
        extra.insert("micro_batches".into(), json!(spec.plan.micro_batches));
    }
    extra.insert("collective".into(), json!(rc.comm.name()));
    if let Some(cubecl) = placement.backend.cubecl_settings() {
        extra.insert("cubecl".into(), cubecl);
    }
    extra.insert(
        "resumed_from".into(),
        json!(rc.resume.as_ref().map(|p| p.display().to_string())),
    );
    extra.extend(spec.outputs.meta.clone());
    RunDir::new(&rc.run_dir).write_run_meta(&meta)
}

/// `config.toml`'s text with the values the job settled (`JobSpec::settled`) added to their
/// sections; a key the command line set is kept as given.
fn with_settled(toml: &str, settled: &toml::Table) -> String {
    if settled.is_empty() {
        return toml.to_string();
    }
    let Ok(mut root) = toml.parse::<toml::Table>() else {
        return toml.to_string();
    };
    for (section, values) in settled {
        let Some(values) = values.as_table() else {
            continue;
        };
        let table = root
            .entry(section.clone())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(table) = table.as_table_mut() {
            for (k, v) in values {
                table.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    toml::to_string(&root).unwrap_or_else(|_| toml.to_string())
}

#[cfg(test)]
mod tests {
    use super::with_settled;

    #[test]
    fn settled_values_fill_their_section_and_never_override_a_flag() {
        let settled: toml::Table = toml::from_str("[optimisation]\nbatch_size = 80\n").unwrap();
        let left_open = "seed = 1\n\n[optimisation]\nlearning_rate = 0.001\n";
        let got: toml::Table = with_settled(left_open, &settled).parse().unwrap();
        assert_eq!(got["optimisation"]["batch_size"].as_integer(), Some(80));
        assert_eq!(got["optimisation"]["learning_rate"].as_float(), Some(0.001));
        assert_eq!(got["seed"].as_integer(), Some(1));
        let given = "[optimisation]\nbatch_size = 4\n";
        let got: toml::Table = with_settled(given, &settled).parse().unwrap();
        assert_eq!(got["optimisation"]["batch_size"].as_integer(), Some(4));
        let no_section = "seed = 1\n";
        let got: toml::Table = with_settled(no_section, &settled).parse().unwrap();
        assert_eq!(got["optimisation"]["batch_size"].as_integer(), Some(80));
        assert_eq!(with_settled(given, &toml::Table::new()), given);
    }
}
