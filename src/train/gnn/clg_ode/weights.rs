//! CLG-ODE's weights from elsewhere: `--resume-from` (another run's checkpoint, matched by
//! name) and the objective's state at the end of a saved run.

use std::path::Path;

use anyhow::{Context, Result};
use burn::tensor::backend::AutodiffBackend;

use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::objective::ObjectiveState;
use crate::outputs::RunDir;
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

/// `--resume_from`: the weights of a checkpoint, matched by name (missing and extra tensors
/// tolerated, as the reference's strict=False; shapes must fit). At least half of the model's
/// tensors must load: anything less is another model's checkpoint.
pub(super) fn weights_from<B: AutodiffBackend>(
    model: ClgOde<B>,
    path: &Path,
    device: &B::Device,
    log: bool,
) -> Result<ClgOde<B>> {
    let ck = Checkpoint::load(path)?;
    params::materialize(&model);
    let total = params::names(&model).len();
    let (model, missing, unexpected) = params::load_partial(model, &ck.model(), device)
        .with_context(|| format!("--resume-from {}", path.display()))?;
    let loaded = total - missing.len();
    if 2 * loaded < total {
        anyhow::bail!(
            "--resume-from {}: only {loaded} of CLG-ODE's {total} tensors are in this checkpoint, \
             which holds model `{}` ({} tensors): give a train-gnn checkpoint \
             (checkpoints/clg_ode_fold<k>_best.safetensors)",
            path.display(),
            ck.model_name().unwrap_or("unknown"),
            ck.model().len(),
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

/// The objective's state at the end of the run, as the test scoring at the end of training
/// used it: from its last resume checkpoint, else from `finished.json` (which keeps it when the
/// run's end drops the resume state); the initial state when neither has it.
pub(super) fn final_state(run_dir: &Path) -> ObjectiveState {
    let run = RunDir::new(run_dir);
    let from_checkpoint = || {
        Checkpoint::read_metadata(&run.last_checkpoint())
            .ok()?
            .get("job_state")
            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
    };
    let from_finished = || {
        crate::outputs::run_files::read_json::<serde_json::Value>(&run.finished_json())
            .ok()
            .map(|v| v["job_state"].clone())
    };
    from_checkpoint()
        .or_else(from_finished)
        .and_then(|v| serde_json::from_value(v["objective"].clone()).ok())
        .unwrap_or_default()
}
