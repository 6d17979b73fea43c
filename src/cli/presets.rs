//! Named configurations: `trainer train-gnn --preset NAME`. A preset is data: a TOML file of
//! flag values under `presets/` (`<command>.<name>.toml`, its first comment lines saying what
//! it is), layered under the configuration file and the command line.

/// `(command, name, the file's text)`.
const PRESETS: &[(&str, &str, &str)] = &[
    (
        "train-gnn",
        "residual",
        include_str!("../../presets/train-gnn.residual.toml"),
    ),
    (
        "train-gnn",
        "drift-residual",
        include_str!("../../presets/train-gnn.drift-residual.toml"),
    ),
    (
        "train-gnn",
        "eb-residual",
        include_str!("../../presets/train-gnn.eb-residual.toml"),
    ),
];

/// What a preset is: its leading comment lines.
fn what(text: &str) -> String {
    text.lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The table of preset `name` of `command`, or an error listing the presets.
pub(super) fn table(command: &str, name: &str) -> Result<toml::Table, String> {
    PRESETS
        .iter()
        .find(|(c, n, _)| *c == command && *n == name)
        .map(|(_, _, t)| t.parse::<toml::Table>().expect("presets are valid TOML"))
        .ok_or_else(|| {
            let names: Vec<String> = PRESETS
                .iter()
                .filter(|(c, ..)| *c == command)
                .map(|(_, n, text)| format!("{n} ({})", what(text)))
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
