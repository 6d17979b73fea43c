//! The files a stage writes: its resume checkpoint ([`ResumeFile`], after an epoch, every
//! `--checkpoint-every` steps and at a stop) and its model files (best, last and per epoch, at
//! the end of an epoch).

use std::path::{Path, PathBuf};

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;

use super::epoch::{StageRun, Weights};
use super::epoch_ctx::Ctx;
use super::resume_file::{Contents, ResumeFile, Saved};
use super::state::Position;
use super::{Job, KeepCheckpoints, Monitor, retention};
use crate::outputs::RunDir;
use crate::outputs::metrics_row::MetricsRow;
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

/// Where the end of an epoch writes the stage's model.
pub(super) struct ModelPaths {
    /// The best model: the stage's model file, or without one the best checkpoint of a
    /// monitored run.
    pub best: Option<PathBuf>,
    /// The stage's last model file.
    pub last: Option<PathBuf>,
}

impl<B: AutodiffBackend, J: Job<B>> StageRun<'_, B, J> {
    /// Writes the resume checkpoint `last.safetensors` (rank 0), and `epoch_NNN.safetensors`
    /// at the end of an epoch with `--keep-checkpoints all`. `row`: the epoch's metrics row.
    pub(super) fn save(
        &self,
        ctx: &Ctx<'_, B>,
        pos: &Position,
        model: &J::Model,
        row: Option<&MetricsRow>,
    ) -> Result<()> {
        if !ctx.main() {
            return Ok(());
        }
        let mut pos = pos.clone();
        pos.acc = serde_json::to_value(&self.sums)?;
        let weights = params::collect(model);
        let file = ResumeFile::new(
            &ctx.spec,
            &ctx.config,
            Contents {
                weights,
                optimizer: &self.optimizer,
                names: &self.names,
                saved: Saved {
                    position: pos,
                    job_state: serde_json::to_value(self.job.state())?,
                    row: row.cloned(),
                    best: self.best.clone(),
                },
            },
        )?;
        let run_files = RunDir::new(&ctx.run_dir);
        // A job with model files keeps its epochs as model files (`keep_model_files`).
        if ctx.run.keep_checkpoints == KeepCheckpoints::All
            && self.stage.model_file.is_none()
            && let Some(epoch) = row.and_then(MetricsRow::epoch)
        {
            let path = run_files.epoch_checkpoint(epoch);
            file.save(&path)?;
            retention::record(&run_files, &path, &ctx.tag)?;
        }
        file.save(&run_files.last_checkpoint())
    }

    /// Where this stage's best and last models go (`monitor`: the stage's).
    pub(super) fn model_paths(&self, ctx: &Ctx<'_, B>, monitor: Option<&Monitor>) -> ModelPaths {
        let run_files = RunDir::new(&ctx.run_dir);
        let files = &self.stage.model_file;
        ModelPaths {
            best: match (files, monitor) {
                (Some(f), _) => Some(run_files.best_model(&f.stem)),
                (None, Some(_)) => Some(run_files.best_checkpoint()),
                (None, None) => None,
            },
            last: files.as_ref().map(|f| run_files.last_model(&f.stem)),
        }
    }

    /// The model files of the 1-based `epoch` that just ended (rank 0): the best when it
    /// `improved` (its weights also kept for the resume checkpoint), the last, and the epoch's
    /// own with `--keep-checkpoints all`; `monitored`: the stage's metric and its value.
    pub(super) fn keep_model_files(
        &mut self,
        ctx: &Ctx<'_, B>,
        paths: &ModelPaths,
        weights: Weights,
        epoch: usize,
        (improved, monitored): (bool, Option<(&str, f64)>),
    ) -> Result<()> {
        let model_file = |path: &Path| self.model_file(ctx, path, &weights, epoch, monitored);
        if improved && let Some(p) = &paths.best {
            model_file(p)?;
        }
        if let Some(p) = &paths.last {
            model_file(p)?;
        }
        if ctx.run.keep_checkpoints == KeepCheckpoints::All
            && let Some(f) = &self.stage.model_file
        {
            let run_files = RunDir::new(&ctx.run_dir);
            let path = run_files.epoch_model(&f.stem, epoch as u64);
            model_file(&path)?;
            retention::record(&run_files, &path, &ctx.tag)?;
        }
        if improved {
            self.best = Some(weights);
        }
        Ok(())
    }

    /// Writes a model-only file: `weights`, the stage's metadata, the model name, the 1-based
    /// `epoch` (0: before training) and the monitored metric's value.
    pub(super) fn model_file(
        &self,
        ctx: &Ctx<'_, B>,
        path: &Path,
        weights: &Weights,
        epoch: usize,
        monitored: Option<(&str, f64)>,
    ) -> Result<()> {
        let mut ck = Checkpoint::default();
        ck.put_model(weights.iter().cloned());
        if let Some(f) = &self.stage.model_file {
            ck.metadata.extend(f.metadata.clone());
        }
        ck.set_model_name(ctx.spec.model_name);
        ck.metadata.insert("epoch".into(), epoch.to_string());
        if let Some((metric, value)) = monitored {
            ck.metadata.insert(metric.into(), value.to_string());
        }
        ck.save(path)
    }
}
