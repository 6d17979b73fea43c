//! The `--model` values ([`ModelKind`]): one variant per model, its doc comment the value's
//! help. `registry.rs` turns a kind into its model's type (the compiler asks for the line there
//! when a variant is added here).

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// The models `train-gnn` trains, on one loader, split and test protocol.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum ModelKind {
    /// CLG-ODE, the coupled latent graph ODE.
    ClgOde,
    /// The start scan plus a per-edge drift × Δt (closed form).
    LinearDrift,
    /// Empirical Bayes: the population trajectory plus the subject's deviation shrunk by how
    /// much it repeats between visits, times each edge's existence probability (closed form,
    /// docs/eb-drift.md).
    EbDrift,
    /// The reference's two-layer GCN baseline (gradient-trained, `--hidden-dim` channels).
    Gcn,
    /// The reference's VectorLSTM baseline (upper triangle → Linear → LSTM → Linear,
    /// `--latent-dim` units).
    VectorLstm,
    /// A toy: the start scan times a trained scale (tests only).
    #[cfg(test)]
    Identity,
}

/// Its `--model` value (`vector-lstm`).
impl std::fmt::Display for ModelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => write!(f, "{self:?}"),
        }
    }
}
