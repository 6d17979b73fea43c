//! Named configurations: `trainer train-gnn --preset NAME`. A preset is a TOML table of flag
//! values layered under the configuration file and the command line.

/// `(command, name, what it is, its values)`.
pub const PRESETS: &[(&str, &str, &str, &str)] = &[(
    "train-gnn",
    "residual",
    "fixed support + log-space residual skip (the authors' best variant) started at the \
     identity forecast (residual_scale_init = 0), lr 1e-3, no topology loss; measured to beat \
     the identity on both synthetic generators; early stopping on the validation skill",
    r#"
fixed_support = true
residual_skip = true
residual_tau = 1.0
residual_cap = 0.5
residual_scale_init = 0.0
lambda_topo = 0.0
gradnorm_scope = "none"
lambda_kl = 0.0
lambda_vel = 0.0
lambda_acc = 0.0
lambda_delta_log = 0.01
adjacent_pair_prob = 1.0
sc_pos_edge_drop_prob = 0.0
morph_noise_sigma = 0.0
latent_dim = 32
hidden_dim = 64
solver_steps = 6
learning_rate = 1e-3
max_epochs = 40
patience = 10
early_stop_metric = "val_skill"
val_sc_eval_every = 1
"#,
)];

/// The table of preset `name` of `command`, or an error listing the presets.
pub fn table(command: &str, name: &str) -> Result<toml::Table, String> {
    PRESETS
        .iter()
        .find(|(c, n, _, _)| *c == command && *n == name)
        .map(|(_, _, _, t)| t.parse::<toml::Table>().expect("presets are valid TOML"))
        .ok_or_else(|| {
            let names: Vec<String> = PRESETS
                .iter()
                .filter(|(c, ..)| *c == command)
                .map(|(_, n, what, _)| format!("{n} ({what})"))
                .collect();
            format!(
                "--preset {name}: no such preset of `trainer {command}`; presets: {}",
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join("; ")
                }
            )
        })
}
