//! Configuration in layers: defaults < `--config FILE.toml` < command-line flags; and the
//! resolved configuration of a run, written as `config.toml` into its run directory, which
//! repeats the run when passed back with `--config`.
//!
//! The file's keys are the flags' names (`batch_size` or `batch-size`), at the top level or
//! under the `--help` headings as sections (`[data]`, `[model]`, `[optimisation]`, `[run]`,
//! `[cluster]`). A key or section the command does not know is an error naming it and the file.
//! The file's values become flags placed before the command line's, for the flags the command
//! line does not give, so clap parses and validates everything alike. A `--preset` (given on the
//! command line or in the file) is a named table of values layered under the file
//! (`presets`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;

use crate::training_command::TrainingCommand;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command, CommandFactory, FromArgMatches};

use super::presets;
use super::{Cli, RunArgs};

/// Flags that describe one process rather than the run's configuration: never written to
/// `config.toml`.
const PER_PROCESS: &[&str] = &[
    "config",
    // Read once at the top: config.toml holds the paths it gave, resolved.
    "paths_yaml",
    "print_config",
    "out",
    "run_name",
    "resume",
    "stop_after_steps",
    "help",
    "version",
];

/// Parses the process's command line with its `--config` file.
pub fn parse_cli() -> Result<Cli, clap::Error> {
    parse_from(std::env::args_os().collect())
}

/// Parses `argv` (program name first), layering a `--config` file under the flags, and fills
/// in the resolved configuration of training commands.
pub(crate) fn parse_from(argv: Vec<OsString>) -> Result<Cli, clap::Error> {
    let root = Cli::command();
    // A first, lenient pass finds the sub-command, its `--config` and the flags given.
    let lenient = root
        .clone()
        .ignore_errors(true)
        .mut_subcommands(|s| s.ignore_errors(true))
        .try_get_matches_from(&argv)
        .ok();
    let mut argv = argv;
    // Where layered values came from, to name it when clap refuses one: (flag, source).
    let mut sources: Vec<(String, String)> = Vec::new();
    if let Some(m) = &lenient
        && let Some((name, given)) = m.subcommand()
    {
        let cmd = root.find_subcommand(name).expect("parsed sub-command");
        let gnn = TrainingCommand::from_name(name).is_some_and(TrainingCommand::is_gnn);
        let mut layered = Vec::new();
        let mut in_file = Vec::new();
        let mut preset = given.get_one::<String>("preset").cloned();
        // `train-gnn --config FILE.yaml`: the reference's path registry, as its baseline
        // scripts pass it; read as `--paths-yaml` (`cli/paths.rs`).
        let yaml_config = given
            .get_one::<PathBuf>("config")
            .filter(|path| gnn && is_yaml(path))
            .cloned();
        let config = given
            .get_one::<PathBuf>("config")
            .filter(|path| !(gnn && is_yaml(path)));
        let mut paths_yaml: Option<(PathBuf, &str)> = given
            .try_get_one::<PathBuf>("paths_yaml")
            .ok()
            .flatten()
            .map(|p| (p.clone(), "--paths-yaml"));
        if let Some(y) = yaml_config {
            if paths_yaml.is_some() {
                return Err(usage_error(format!(
                    "--config {} and --paths-yaml both name a paths file: give one",
                    y.display()
                )));
            }
            paths_yaml = Some((y, "--config"));
        }
        let mut model = given
            .try_get_raw("model")
            .ok()
            .flatten()
            .and_then(|mut v| v.next())
            .map(|v| v.to_string_lossy().into_owned());
        if let Some(path) = config {
            let table = read_file(path)?;
            if preset.is_none() {
                preset = lookup(&table, "preset");
            }
            if model.is_none() {
                model = lookup(&table, "model");
            }
            if paths_yaml.is_none() {
                paths_yaml = lookup(&table, "paths_yaml").map(|p| (PathBuf::from(p), "paths_yaml"));
            }
            let source = format!("--config {}", path.display());
            let (args, keys) = table_args(cmd, given, table, &[], &source)?;
            layered = args;
            sources.extend(keys.iter().map(|k| (k.clone(), source.clone())));
            in_file = keys;
        }
        if let Some(p) = preset {
            let table = presets::table(name, &p).map_err(usage_error)?;
            if model.is_none() {
                model = lookup(&table, "model");
            }
            let source = format!("--preset {p}");
            let (args, keys) = table_args(cmd, given, table, &in_file, &source)?;
            sources.extend(keys.into_iter().map(|k| (k, source.clone())));
            layered.splice(0..0, args);
        }
        if let Some((file, named_by)) = &paths_yaml {
            let model = model.as_deref().unwrap_or("clg-ode");
            let layer = super::paths::layer(name, cmd, given, &in_file, file, named_by, model)
                .map_err(usage_error)?;
            layered.extend(layer.args);
            sources.extend(layer.sources);
        }
        let at = argv
            .iter()
            .skip(1)
            .position(|a| a == name)
            .map_or(1, |p| p + 2);
        argv.splice(at..at, layered);
    }
    let matches = root
        .clone()
        .try_get_matches_from(&argv)
        .map_err(|e| name_the_source(e, &sources))?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    if let Some((name, sub)) = matches.subcommand()
        && let Some(run) = run_args(&mut cli)
    {
        let cmd = root.find_subcommand(name).expect("parsed sub-command");
        run.resolved_config = Some(resolved_toml(cmd, sub));
    }
    Ok(cli)
}

/// A clap error about a value that came from a config file or a preset, with that file or
/// preset and key named (clap itself only knows the flag).
fn name_the_source(e: clap::Error, sources: &[(String, String)]) -> clap::Error {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let key = arg
        .trim_start_matches('-')
        .split([' ', '='])
        .next()
        .unwrap_or("")
        .replace('-', "_");
    match sources.iter().find(|(k, _)| *k == key) {
        Some((_, source)) => {
            let text = e.to_string();
            let text = text.trim_start_matches("error: ").trim_end();
            usage_error(format!("{source}: key `{key}`: {text}"))
        }
        None => e,
    }
}

/// The run flags of a training command.
fn run_args(cli: &mut Cli) -> Option<&mut RunArgs> {
    use crate::cli::Command;
    match &mut cli.command {
        Command::TrainMnist(a) => Some(&mut a.run),
        Command::TrainGnn(a) => Some(&mut a.run),
        _ => None,
    }
}

fn usage_error(msg: String) -> clap::Error {
    clap::Error::raw(ErrorKind::ValueValidation, format!("{msg}\n"))
}

/// The section name of a `--help` heading.
fn section(heading: &str) -> String {
    heading.to_ascii_lowercase()
}

/// A `.yaml`/`.yml` file name.
fn is_yaml(path: &Path) -> bool {
    matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yaml" | "yml")
    )
}

fn read_file(path: &Path) -> Result<toml::Table, clap::Error> {
    let name = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage_error(format!("--config {name}: cannot read the file: {e}")))?;
    text.parse()
        .map_err(|e| usage_error(format!("--config {name}: not valid TOML: {e}")))
}

/// A string value of `key` at the top level or in a section.
fn lookup(table: &toml::Table, key: &str) -> Option<String> {
    table
        .get(key)
        .or_else(|| {
            table
                .values()
                .filter_map(|v| v.as_table())
                .find_map(|t| t.get(key))
        })
        .and_then(|v| v.as_str())
        .map(String::from)
}

/// The flags a table (a config file, a preset) stands for, for the keys that neither the
/// command line nor `skip` give; and the flag names it holds. `name` names the table in errors.
fn table_args(
    cmd: &Command,
    given: &ArgMatches,
    table: toml::Table,
    skip: &[String],
    name: &str,
) -> Result<(Vec<OsString>, Vec<String>), clap::Error> {
    let sections: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_help_heading().map(section))
        .collect();
    let mut entries: Vec<(String, toml::Value)> = Vec::new();
    for (key, value) in table {
        match value {
            toml::Value::Table(t) if sections.contains(&key) => {
                entries.extend(t.into_iter().map(|(k, v)| (format!("{key}.{k}"), v)));
            }
            toml::Value::Table(_) => {
                return Err(usage_error(format!(
                    "{name}: unknown section [{key}]; sections are {}",
                    dedup(&sections).join(", ")
                )));
            }
            v => entries.push((key, v)),
        }
    }
    let mut out = Vec::new();
    let mut keys = Vec::new();
    for (key, value) in entries {
        let flag = key.rsplit('.').next().unwrap_or(&key).replace('-', "_");
        keys.push(flag.clone());
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id().as_str() == flag && !a.is_positional())
            .filter(|a| !["config", "help", "version"].contains(&a.get_id().as_str()))
            .ok_or_else(|| {
                usage_error(format!(
                    "{name}: unknown key `{key}`: `trainer {} --help` lists the flags",
                    cmd.get_name()
                ))
            })?;
        if given.value_source(&flag) == Some(ValueSource::CommandLine) || skip.contains(&flag) {
            continue;
        }
        let long = arg.get_long().unwrap_or(&flag);
        let values = match value {
            toml::Value::Array(items) if takes_many(arg) => items,
            toml::Value::Array(items) => {
                return Err(usage_error(format!(
                    "{name}: key `{key}` = {}: a list, but --{long} takes one value",
                    toml::Value::Array(items)
                )));
            }
            v => vec![v],
        };
        for v in values {
            match (v, is_switch(arg)) {
                (toml::Value::Boolean(true), true) => out.push(format!("--{long}").into()),
                (toml::Value::Boolean(false), true) => {}
                (toml::Value::String(s), _) => out.push(format!("--{long}={s}").into()),
                (toml::Value::Table(_), _) => {
                    return Err(usage_error(format!(
                        "{name}: key `{key}` has a table value; expected a value of --{long}"
                    )));
                }
                (v, _) => out.push(format!("--{long}={v}").into()),
            }
        }
    }
    Ok((out, keys))
}

/// Whether `arg` takes several values (repeated, or a list after one flag), so that a TOML
/// list can stand for it; for any other flag a list would silently keep its last item.
fn takes_many(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::Append)
        || arg.get_num_args().is_some_and(|n| n.max_values() > 1)
}

fn dedup(v: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in v {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// An on/off flag (no value).
fn is_switch(arg: &Arg) -> bool {
    matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse)
}

/// Whether the flag's parsed type is one of `T`s.
fn is_type<T: 'static>(arg: &Arg) -> bool {
    arg.get_value_parser().type_id() == std::any::TypeId::of::<T>()
}

/// A raw flag value as the TOML value of the flag's type.
fn toml_value(arg: &Arg, raw: &str) -> toml::Value {
    let int = is_type::<usize>(arg)
        || is_type::<Option<usize>>(arg)
        || is_type::<u64>(arg)
        || is_type::<i64>(arg)
        || is_type::<u32>(arg)
        || is_type::<i32>(arg);
    if is_switch(arg) {
        return toml::Value::Boolean(raw == "true");
    }
    if int && let Ok(i) = raw.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    if (is_type::<f64>(arg) || is_type::<Option<f64>>(arg) || is_type::<f32>(arg))
        && let Ok(f) = raw.parse::<f64>()
    {
        return toml::Value::Float(f);
    }
    toml::Value::String(raw.to_string())
}

/// The resolved configuration: every flag of `cmd` with a value (given, from the file, or
/// default), by section, except the per-process ones.
pub(crate) fn resolved_toml(cmd: &Command, matches: &ArgMatches) -> String {
    let mut root = toml::Table::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if PER_PROCESS.contains(&id) || arg.is_positional() {
            continue;
        }
        let Some(raw) = matches.get_raw(id) else {
            continue;
        };
        let vals: Vec<toml::Value> = raw.map(|v| toml_value(arg, &v.to_string_lossy())).collect();
        let multiple = matches!(arg.get_action(), ArgAction::Append)
            || arg.get_num_args().is_some_and(|r| r.max_values() > 1);
        let value = if multiple {
            toml::Value::Array(vals)
        } else if let Some(v) = vals.into_iter().next() {
            v
        } else {
            continue;
        };
        let table = match arg.get_help_heading() {
            Some(h) => root
                .entry(section(h))
                .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .expect("sections are tables"),
            None => &mut root,
        };
        table.insert(id.to_string(), value);
    }
    toml::to_string(&root).unwrap_or_default()
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
