//! The reference project's `configs/paths.yaml` on the command line: `--paths-yaml FILE` of
//! `train-gnn`, `eval-gnn`, `predict` and `plot-sc` (and `train-gnn --config FILE.yaml`, as the
//! reference's baseline scripts pass it, or `paths_yaml = "…"` in a `--config` file). The data
//! paths the file names become flags layered under the command line and the `--config` file,
//! here, once: below the CLI a run sees plain paths, and its `config.toml` and `args.json` hold
//! them resolved, so it repeats without the file. A flag given wins over the file, said once.

use std::ffi::OsString;
use std::path::Path;

use clap::parser::ValueSource;

use crate::training_command::TrainingCommand;
use clap::{ArgMatches, Command};

use crate::data::connectome::paths_yaml::{PathsYaml, wanted_flags};

/// The flags `train-gnn` cannot run without.
const REQUIRED: &[&str] = &["sc_dir", "morph_root", "results_dir"];

/// What the file adds to the command line: flags, and where each came from (for errors).
pub(super) struct Layer {
    pub args: Vec<OsString>,
    pub sources: Vec<(String, String)>,
}

/// The flags `file` gives `command` (`cmd`, parsed leniently as `given`), for those neither the
/// command line nor the `--config` file (`from_config`: its keys) gives. The file is read only
/// when one is missing; `named_by` is how the user named it (`--paths-yaml`, `--config`).
pub(super) fn layer(
    command: &str,
    cmd: &Command,
    given: &ArgMatches,
    from_config: &[String],
    file: &Path,
    named_by: &str,
    model: &str,
) -> Result<Layer, String> {
    let Some(wanted) = wanted_flags(command, model) else {
        return Ok(Layer {
            args: Vec::new(),
            sources: Vec::new(),
        });
    };
    let is_given = |flag: &str| {
        given.value_source(flag) == Some(ValueSource::CommandLine)
            || from_config.iter().any(|k| k == flag)
    };
    let long = |flag: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id().as_str() == flag)
            .and_then(|a| a.get_long())
            .unwrap_or(flag)
            .to_string()
    };
    let name = format!("{named_by} {}", file.display());
    let mut layer = Layer {
        args: Vec::new(),
        sources: Vec::new(),
    };
    if wanted.iter().all(|(flag, _)| is_given(flag)) {
        if named_by == "--paths-yaml" {
            eprintln!("[trainer] {name}: not read, every path it could give is given as a flag");
        }
        return Ok(layer);
    }
    let yaml = PathsYaml::read(file).map_err(|e| format!("{named_by}: {e:#}"))?;
    let found = yaml
        .flags(&wanted)
        .map_err(|e| format!("{named_by}: {e:#}"))?;
    let mut overridden = Vec::new();
    for (flag, path, key) in &found {
        if is_given(flag) {
            overridden.push(format!("--{} over its {key}", long(flag)));
            continue;
        }
        let mut arg = OsString::from(format!("--{}=", long(flag)));
        arg.push(path.as_os_str());
        layer.args.push(arg);
        layer
            .sources
            .push((flag.clone(), format!("{name} (key {key})")));
    }
    if TrainingCommand::from_name(command).is_some_and(TrainingCommand::is_gnn) {
        for flag in REQUIRED {
            let key = wanted.iter().find(|(f, _)| f == flag).map(|(_, k)| *k);
            if !is_given(flag) && !found.iter().any(|(f, _, _)| f == flag) {
                return Err(format!(
                    "{name}: no key {} and no --{} given: one of them names the path",
                    key.unwrap_or("?"),
                    long(flag)
                ));
            }
        }
    }
    if !overridden.is_empty() {
        eprintln!(
            "[trainer] {name}: the flags given win: {}",
            overridden.join(", ")
        );
    }
    Ok(layer)
}
