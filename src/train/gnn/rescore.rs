//! `trainer eval-gnn RUN_DIR`: a finished (or stopped) `train-gnn` run re-scored without
//! retraining. The model is rebuilt from the run's `args.json`, its weights reloaded from a
//! checkpoint, the cohort loaded and split as in the run (paths overridable) ([`SavedRun`]), and
//! the split's subjects scored with the one test protocol: `metrics.json` (model, identity,
//! skill, forecast-only block, exact topology), `per_subject.csv` and `strata.json`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::json;

use super::batch::delta_t;
use super::breakdown::{
    per_subject, per_subject_at, strata, three_visit_subjects, write_per_subject,
};
use super::evaluate::{TestMetrics, exact_topology};
use super::saved_run::{DataOverrides, Forecast, Horizon, SavedRun};
use crate::backend::{self, DeviceSettings};
use crate::files::write_json;
use crate::outputs::RunDir;

/// Which subjects are scored.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalSplit {
    /// The held-out test subjects (as at the end of training).
    Test,
    /// The validation subjects of the checkpoint's fold.
    Val,
}

/// `trainer eval-gnn`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub struct EvalGnnSettings {
    /// The run directory of a `train-gnn` run (its `args.json` and `checkpoints/`).
    pub run_dir: PathBuf,
    /// `best` (the best fold's best weights, as the run's test scoring), `last` (that fold's
    /// last weights), or a checkpoint file.
    #[arg(long, default_value = "best")]
    pub checkpoint: String,
    #[arg(long, value_enum, default_value = "test")]
    pub split: EvalSplit,
    /// Output directory (default `<RUN_DIR>/eval-<split>-<checkpoint>`).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub paths: DataOverrides,
    #[command(flatten)]
    pub device: DeviceSettings,
}

/// `trainer eval-gnn`.
pub fn run(s: EvalGnnSettings) -> Result<()> {
    let run = SavedRun::open(&s.run_dir, &s.checkpoint, &s.paths)?;
    let out = match &s.out {
        Some(out) => RunDir::new(out),
        None => {
            let name = Path::new(&s.checkpoint)
                .file_stem()
                .map_or(s.checkpoint.clone(), |n| n.to_string_lossy().into_owned());
            let split = format!("{:?}", s.split).to_lowercase();
            RunDir::new(&s.run_dir).eval_dir(&split, &name)
        }
    };
    let set = &run.config.settings;
    let (data, fold) = (&run.data, run.fold);
    let subjects = match s.split {
        EvalSplit::Test => run.prep.test.clone(),
        EvalSplit::Val => run.prep.folds[0].val.clone(),
    };
    let placement = s.device.placement()?;
    let job = Forecast {
        run: &run,
        subjects: &subjects,
        horizon: Horizon::NextVisit,
    };
    let preds = backend::dispatch_checked(placement, job)?;
    let rows = per_subject(data, &subjects, &preds, set.topo_bins);
    // Visit 0 → visit 2 of the subjects with three visits, for models with a time input.
    let far_rows = if set.model_kind.info().time_input {
        let far = three_visit_subjects(data, &subjects);
        let dts: Vec<f64> = far.iter().map(|&s| delta_t(data.scans(s), 0, 2)).collect();
        let targets = vec![Some(2); far.len()];
        let job = Forecast {
            run: &run,
            subjects: &far,
            horizon: Horizon::Years {
                dts: &dts,
                targets: &targets,
            },
        };
        let preds = backend::dispatch_checked(placement, job)?;
        let visit2 = vec![2; far.len()];
        Some(per_subject_at(data, &far, &visit2, &preds, set.topo_bins))
    } else {
        None
    };
    let metrics = TestMetrics::of(&rows);
    let exact = exact_topology(
        data,
        &subjects,
        &preds.matrices,
        set.objective.topology.loss_bins,
    );
    let mut m = serde_json::to_value(&metrics)?;
    if let serde_json::Value::Object(o) = &mut m {
        o.insert("exact_topology".into(), serde_json::to_value(&exact)?);
        o.insert("fold".into(), json!(fold));
        o.insert("checkpoint".into(), json!(run.ck_path));
        o.insert(
            "split".into(),
            json!(format!("{:?}", s.split).to_lowercase()),
        );
    }
    let dir = out.path();
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    write_json(&out.eval_metrics_json(), &m)?;
    write_per_subject(&out.per_subject_csv(), &rows)?;
    write_json(&out.strata_json(), &strata(&rows, far_rows.as_deref()))?;
    eprintln!(
        "[eval-gnn] {} subjects, fold {fold}: sc_log_mse {:.6} (identity {:.6}, skill {:+.4}); \
         wrote {}",
        subjects.len(),
        metrics.model.sc_log_mse,
        metrics.identity_baseline.sc_log_mse,
        metrics.skill.skill,
        dir.display()
    );
    Ok(())
}
