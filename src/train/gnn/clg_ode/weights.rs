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
pub fn weights_from<B: AutodiffBackend>(
    model: ClgOde<B>,
    path: &Path,
    device: &B::Device,
    log: bool,
) -> Result<ClgOde<B>> {
    let ck = Checkpoint::load(path)?;
    params::materialize(&model);
    let total = params::names(&model).len();
    let (model, missing, unexpected) =
        params::load_partial(model, &ck.model(), device)
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

/// The objective's state at the end of the run (from its last resume checkpoint), as the test
/// scoring at the end of training used it; the initial state when there is none.
pub fn final_state(run_dir: &Path) -> ObjectiveState {
    Checkpoint::load(&RunDir::new(run_dir).last_checkpoint())
        .ok()
        .and_then(|ck| ck.metadata.get("job_state").cloned())
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| serde_json::from_value(v["objective"].clone()).ok())
        .unwrap_or_default()
}
