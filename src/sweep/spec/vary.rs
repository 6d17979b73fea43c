//! What varies besides `[grid]`: `[[zip]]` axes (keys that vary together) and the `KEY=VALUE`
//! overrides given after the spec on the command line.

use anyhow::{Result, bail};

use super::file::SpecFile;
use crate::sweep::expand::Zip;
use crate::training_command::TrainingCommand;

/// `key=value` arguments after the spec, over it: a list becomes the grid axis of `key`, a
/// single value is set in `[base]`; either way the spec's own values of `key` (in `[base]`,
/// `[grid]`, the variants and `[then]`) give way, each with a line on stderr. A zipped key
/// cannot be overridden alone.
pub(super) fn apply_overrides(
    file: &mut SpecFile,
    command: TrainingCommand,
    overrides: &[(String, toml::Value)],
    known: &dyn Fn(&str, &str) -> bool,
) -> Result<()> {
    for (key, value) in overrides {
        if !known(command.name(), key) {
            bail!("`{key}=…` (command line): `{key}` is not a flag of trainer {command}");
        }
        if file.zip.iter().any(|z| z.contains_key(key)) {
            bail!("`{key}=…` (command line): `{key}` varies in a [[zip]]; change it in the spec");
        }
        // The command line wins over every place of the spec, `[then]` (phase 2) too; each
        // value it replaces is said once.
        let mut shadowed = Vec::new();
        for (name, t) in [
            ("base", Some(&mut file.base)),
            ("grid", Some(&mut file.grid)),
            ("then", file.then.as_mut()),
        ] {
            if let Some(old) = t.and_then(|t| t.remove(key)) {
                shadowed.push(format!("[{name}] {key} = {old}"));
            }
        }
        for v in file.variant.iter_mut().flatten() {
            if let Some(old) = v.remove(key) {
                let name = v.get("name").and_then(|n| n.as_str()).unwrap_or("?");
                shadowed.push(format!("variant {name}: {key} = {old}"));
            }
        }
        for what in shadowed {
            eprintln!("[sweep] {key}={value} (command line) replaces the spec's {what}");
        }
        let target = if value.is_array() {
            &mut file.grid
        } else {
            &mut file.base
        };
        target.insert(key.clone(), value.clone());
    }
    Ok(())
}

/// `KEY=VALUE` as a flag name and a TOML value (a string when VALUE is not TOML: `preset=residual`).
pub(crate) fn parse_override(arg: &str) -> Result<(String, toml::Value)> {
    let Some((key, value)) = arg.split_once('=') else {
        bail!(
            "`{arg}`: expected KEY=VALUE after the spec (max_epochs=5, learning_rate=[1e-3,1e-4])"
        );
    };
    let key = key.trim().replace('-', "_");
    if key.is_empty() {
        bail!("`{arg}`: expected KEY=VALUE with a flag name before `=`");
    }
    let parsed = format!("v = {value}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"));
    Ok((
        key,
        parsed.unwrap_or_else(|| toml::Value::String(value.to_string())),
    ))
}

/// The `n`-th `[[zip]]` table as an axis: its keys' lists (one length, keys not in `[grid]`),
/// labelled by its `name` list or `zip-<i>`.
pub(super) fn zip_axis(
    n: usize,
    z: &toml::Table,
    grid: &toml::Table,
    check_key: &dyn Fn(&str) -> Result<()>,
) -> Result<Zip> {
    let axis = if n == 0 {
        "zip".to_string()
    } else {
        format!("zip{}", n + 1)
    };
    let mut keys = Vec::new();
    let mut labels = None;
    for (k, v) in z {
        let Some(list) = v.as_array().filter(|a| !a.is_empty()) else {
            bail!("[[zip]] `{k}`: expected a non-empty list (the i-th values go together)");
        };
        if k == "name" {
            let names: Vec<String> = list
                .iter()
                .map(|x| match x.as_str() {
                    Some(s) if !s.is_empty() && !s.contains('/') => Ok(s.to_string()),
                    _ => bail!("[[zip]] `name`: expected words without `/`, got {x}"),
                })
                .collect::<Result<_>>()?;
            labels = Some(names);
            continue;
        }
        check_key(k)?;
        if grid.contains_key(k) {
            bail!("[[zip]] `{k}` is also in [grid]: vary it in one place");
        }
        keys.push((k.clone(), list.clone()));
    }
    let Some(len) = keys.first().map(|(_, v)| v.len()) else {
        bail!("[[zip]] needs at least one flag with a list of values");
    };
    if let Some((k, v)) = keys.iter().find(|(_, v)| v.len() != len) {
        bail!(
            "[[zip]] `{k}` has {} values, `{}` has {len}: zipped lists must be as long",
            v.len(),
            keys[0].0
        );
    }
    let labels = labels.unwrap_or_else(|| (0..len).map(|i| format!("{axis}-{i}")).collect());
    if labels.len() != len {
        bail!(
            "[[zip]] `name` has {} labels for {len} values",
            labels.len()
        );
    }
    let unique: std::collections::BTreeSet<&String> = labels.iter().collect();
    if unique.len() != labels.len() {
        bail!("[[zip]] `name`: labels must differ");
    }
    Ok(Zip { axis, labels, keys })
}
