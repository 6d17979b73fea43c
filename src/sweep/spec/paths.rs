//! `paths_yaml = "FILE"` in a spec (in `[base]`, a variant or the grid): the reference
//! project's `configs/paths.yaml` naming the data. The paths it gives become each task's own
//! flags at plan time (`sc_dir`, `morph_root`, `subject_info_csv`, `results_dir`, as
//! `trainer train-gnn --paths-yaml` reads them), resolved to absolute paths: the manifest and the
//! tasks' files record them, and the tasks run without the file. A flag the task sets wins. The
//! file is found from the spec's folder, as `config = "…"` is.

use std::path::Path;

use anyhow::{Result, anyhow, bail};

use super::Task;
use crate::data::connectome::paths_yaml::{PathsYaml, wanted_flags};

/// Replaces task `t`'s `paths_yaml` with the flags the file gives it.
pub(crate) fn expand_paths_yaml(spec_path: &Path, command: &str, t: &mut Task) -> Result<()> {
    let Some(value) = t
        .flags
        .remove("paths_yaml")
        .or_else(|| t.flags.remove("paths-yaml"))
    else {
        return Ok(());
    };
    let Some(name) = value.as_str() else {
        bail!(
            "{}: `paths_yaml` must be a file name, not {value}",
            spec_path.display()
        );
    };
    let path = spec_path.parent().unwrap_or(Path::new(".")).join(name);
    let yaml = PathsYaml::read(&path)
        .map_err(|e| anyhow!("{}: paths_yaml = \"{name}\": {e:#}", spec_path.display()))?;
    let model = t
        .flags
        .get("model")
        .and_then(|m| m.as_str())
        .unwrap_or("clg-ode")
        .to_string();
    let Some(wanted) = wanted_flags(command, &model) else {
        bail!(
            "{}: `paths_yaml` names data, and trainer {command} reads none",
            spec_path.display()
        );
    };
    let given =
        |flag: &str| t.flags.contains_key(flag) || t.flags.contains_key(&flag.replace('_', "-"));
    let found = yaml
        .flags(&wanted)
        .map_err(|e| anyhow!("{}: paths_yaml = \"{name}\": {e:#}", spec_path.display()))?;
    let add: Vec<(String, String)> = found
        .into_iter()
        .filter(|(flag, _, _)| !given(flag))
        .map(|(flag, p, _)| (flag, p.to_string_lossy().into_owned()))
        .collect();
    for (flag, p) in add {
        t.flags.insert(flag, toml::Value::String(p));
    }
    Ok(())
}
