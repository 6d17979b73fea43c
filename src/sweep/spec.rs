//! A sweep specification (`SPEC.toml`) and the tasks it expands to.
//!
//! ```toml
//! command = "train-gnn"          # or "train-mnist"
//! folds = [0, 1]                 # optional: --cv-fold of each task
//! seeds = [1, 2]                 # optional: --seed of each task
//! [base]                         # flags of every task (either spelling)
//! max_epochs = 40
//! preset = "residual"
//! [grid]                         # every combination
//! pos_weight = [1.0, 3.0]
//! lambda_density = [0.0, 0.01]
//! [[variant]]                    # and/or named variants
//! name = "fixed"
//! fixed_support = true
//! ```
//!
//! A task is a variant × a grid point × a fold × a seed; its name is built from what varies
//! (`fixed/pw3_ld0.01/fold0`), stable across re-planning.
//!
//! An optional `[then]` table makes a two-stage sweep: every task above (phase 1) gets a
//! phase-2 task with the `[then]` flags on top of its own, resumed (`--resume-from`) from its
//! phase-1 task's best checkpoint, named `<then name>/<phase-1 name>` (`name = "..."` in
//! `[then]`, default `phase2`); `stage` (`phase1` or the then-name) is a varied key for tables.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::expand::{Space, Zip, then_stage};
use super::resources::Resources;

/// One task of a sweep: its stable name and its flags (flag name → TOML value).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    pub index: usize,
    pub name: String,
    /// What varies, for tables: key → value as written (`variant`, grid keys, `fold`, `seed`).
    pub varied: BTreeMap<String, String>,
    pub flags: toml::Table,
    /// Phase 2 of a two-stage sweep: the phase-1 task whose best checkpoint this one starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<usize>,
}

/// A parsed specification.
#[derive(Debug, Clone)]
pub struct Spec {
    pub command: String,
    pub tasks: Vec<Task>,
    /// The `[resources]` table: what each task asks of the queue.
    pub resources: Resources,
}

/// The line of `key` in the spec text (1-based; 0 when not found), for errors.
fn line_of(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
                || l.starts_with(&format!("[{key}]"))
                || l.starts_with(&format!("[[{key}]]"))
        })
        .map_or(0, |i| i + 1)
}

impl Spec {
    /// Parses `text` (from `path`, named in errors); `known(command, key)` says whether `key` is a
    /// flag of the command in either spelling.
    pub fn parse(
        path: &Path,
        text: &str,
        known: &dyn Fn(&str, &str) -> bool,
        max_tasks: usize,
        overrides: &[(String, toml::Value)],
    ) -> Result<Spec> {
        let at = |key: &str| format!("{}:{}", path.display(), line_of(text, key));
        let mut table: toml::Table = text
            .parse()
            .map_err(|e| anyhow::anyhow!("{}: not valid TOML: {e}", path.display()))?;
        apply_overrides(&mut table, overrides, known)?;
        for key in table.keys() {
            if ![
                "command",
                "base",
                "grid",
                "variant",
                "folds",
                "seeds",
                "then",
                "resources",
                "zip",
            ]
            .contains(&key.as_str())
            {
                bail!(
                    "{}: unknown key `{key}`; a spec has command, base, grid, variant, folds, \
                     seeds, then, resources, zip",
                    at(key)
                );
            }
        }
        let command = match table.get("command").and_then(|c| c.as_str()) {
            Some(c @ ("train-gnn" | "train-mnist")) => c.to_string(),
            Some(c) => bail!(
                "{}: command `{c}`: expected train-gnn or train-mnist",
                at("command")
            ),
            None => bail!(
                "{}: no `command = \"train-gnn\"` (or train-mnist)",
                path.display()
            ),
        };
        let check_key = |key: &str| -> Result<()> {
            let per_task = ["cv_fold", "cv-fold", "seed", "random_state", "random-state"];
            if per_task.contains(&key) {
                bail!(
                    "{}: `{key}` is set per task: use `folds = [...]` / `seeds = [...]`",
                    at(key)
                );
            }
            if [
                "out",
                "run_name",
                "run-name",
                "resume",
                "results_dir",
                "results-dir",
            ]
            .contains(&key)
            {
                bail!(
                    "{}: `{key}` is the sweep's to set (each task has its run directory)",
                    at(key)
                );
            }
            if !known(&command, key) {
                bail!("{}: `{key}` is not a flag of trainer {command}", at(key));
            }
            Ok(())
        };
        let sub_table = |name: &str| -> Result<toml::Table> {
            match table.get(name) {
                None => Ok(toml::Table::new()),
                Some(toml::Value::Table(t)) => Ok(t.clone()),
                Some(_) => bail!("{}: `{name}` must be a table", at(name)),
            }
        };
        let resources = Resources::from_table(&sub_table("resources")?)
            .map_err(|e| anyhow::anyhow!("{}: [resources]: {e}", at("resources")))?;
        let base = sub_table("base")?;
        for k in base.keys() {
            check_key(k)?;
        }
        let grid = sub_table("grid")?;
        let mut axes: Vec<(String, Vec<toml::Value>)> = Vec::new();
        for (k, v) in &grid {
            check_key(k)?;
            match v {
                toml::Value::Array(a) if !a.is_empty() => axes.push((k.clone(), a.clone())),
                toml::Value::Array(_) => bail!("{}: the grid of `{k}` is empty", at(k)),
                _ => bail!("{}: the grid of `{k}` must be a list", at(k)),
            }
        }
        let mut variants: Vec<(Option<String>, toml::Table)> = Vec::new();
        match table.get("variant") {
            None => variants.push((None, toml::Table::new())),
            Some(toml::Value::Array(list)) => {
                for v in list {
                    let Some(t) = v.as_table() else {
                        bail!("{}: each [[variant]] must be a table", at("variant"));
                    };
                    let Some(name) = t.get("name").and_then(|n| n.as_str()) else {
                        bail!("{}: a [[variant]] needs `name = \"...\"`", at("variant"));
                    };
                    let mut flags = t.clone();
                    flags.remove("name");
                    for k in flags.keys() {
                        check_key(k)?;
                    }
                    variants.push((Some(name.to_string()), flags));
                }
            }
            Some(_) => bail!("{}: write variants as [[variant]] tables", at("variant")),
        }
        let ints = |name: &str| -> Result<Option<Vec<i64>>> {
            match table.get(name) {
                None => Ok(None),
                Some(toml::Value::Array(a)) if !a.is_empty() => a
                    .iter()
                    .map(|v| {
                        v.as_integer().ok_or_else(|| {
                            anyhow::anyhow!("{}: `{name}` must be a list of integers", at(name))
                        })
                    })
                    .collect::<Result<Vec<_>>>()
                    .map(Some),
                Some(_) => bail!("{}: `{name}` must be a non-empty list", at(name)),
            }
        };
        let folds = ints("folds")?;
        let seeds = ints("seeds")?;
        if folds.is_some() && command != "train-gnn" {
            bail!("{}: folds are train-gnn's (--cv-fold)", at("folds"));
        }
        let zips = match table.get("zip") {
            None => Vec::new(),
            Some(toml::Value::Array(list)) => list
                .iter()
                .enumerate()
                .map(|(n, z)| {
                    let Some(z) = z.as_table() else {
                        bail!("{}: write each zip as a [[zip]] table", at("zip"));
                    };
                    zip_axis(n, z, &grid, &check_key)
                        .map_err(|e| anyhow::anyhow!("{}: {e}", at("zip")))
                })
                .collect::<Result<Vec<_>>>()?,
            Some(_) => bail!("{}: write zips as [[zip]] tables", at("zip")),
        };
        let space = Space {
            base,
            zips,
            axes,
            variants,
            folds: folds.clone(),
            seeds,
        };
        // Counted before anything is expanded: a 10^12-point grid is refused at once.
        let stages = if table.contains_key("then") { 2 } else { 1 };
        let count = space.count().saturating_mul(stages);
        if count > max_tasks as u128 {
            bail!(
                "{}: the spec expands to {count} tasks ({}), more than --max-tasks {max_tasks}: \
                 shrink the grid, or raise --max-tasks if you mean it",
                path.display(),
                space.shape(stages)
            );
        }
        let mut tasks = space.tasks();
        if table.contains_key("then") {
            let then = sub_table("then")?;
            if folds.is_none() || !known(&command, "resume_from") {
                bail!(
                    "{}: a two-stage sweep needs train-gnn and `folds = [...]` (phase 2 resumes \
                     one fold's best checkpoint)",
                    at("then")
                );
            }
            let stage = match then.get("name") {
                None => "phase2".to_string(),
                Some(toml::Value::String(n)) if !n.is_empty() && !n.contains('/') => n.clone(),
                Some(_) => bail!("{}: `name` of [then] must be a word", at("then")),
            };
            let mut flags = then.clone();
            flags.remove("name");
            for k in flags.keys() {
                if ["resume_from", "resume-from"].contains(&k.as_str()) {
                    bail!(
                        "{}: phase 2 resumes from phase 1's best checkpoint: no `{k}` in [then]",
                        at(k)
                    );
                }
                check_key(k)?;
            }
            tasks = then_stage(tasks, &stage, &flags);
        }
        let mut seen = BTreeMap::new();
        for t in &tasks {
            if let Some(first) = seen.insert(t.name.clone(), t.index) {
                bail!(
                    "{}: tasks {first} and {} are both named `{}` (two variants or grid values \
                     that print alike)",
                    path.display(),
                    t.index,
                    t.name
                );
            }
        }
        Ok(Spec {
            command,
            tasks,
            resources,
        })
    }
}

/// `key=value` arguments after the spec, over it: a list becomes the grid axis of `key`, a
/// single value is set in `[base]`; either way the spec's own values of `key` (in `[base]`,
/// `[grid]`, the variants) give way. A zipped key cannot be overridden alone.
fn apply_overrides(
    table: &mut toml::Table,
    overrides: &[(String, toml::Value)],
    known: &dyn Fn(&str, &str) -> bool,
) -> Result<()> {
    let command = table
        .get("command")
        .and_then(|c| c.as_str())
        .unwrap_or_default()
        .to_string();
    for (key, value) in overrides {
        if !known(&command, key) {
            bail!("`{key}=…` (command line): `{key}` is not a flag of trainer {command}");
        }
        let zipped = table
            .get("zip")
            .and_then(|z| z.as_array())
            .is_some_and(|zs| {
                zs.iter()
                    .any(|z| z.as_table().is_some_and(|z| z.contains_key(key)))
            });
        if zipped {
            bail!("`{key}=…` (command line): `{key}` varies in a [[zip]]; change it in the spec");
        }
        for name in ["base", "grid"] {
            if let Some(t) = table.get_mut(name).and_then(|t| t.as_table_mut()) {
                t.remove(key);
            }
        }
        if let Some(vs) = table.get_mut("variant").and_then(|v| v.as_array_mut()) {
            for v in vs.iter_mut().filter_map(|v| v.as_table_mut()) {
                v.remove(key);
            }
        }
        let target = if value.is_array() { "grid" } else { "base" };
        let t = table
            .entry(target)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(t) = t.as_table_mut() {
            t.insert(key.clone(), value.clone());
        }
    }
    Ok(())
}

/// `KEY=VALUE` as a flag name and a TOML value (a string when VALUE is not TOML: `preset=residual`).
pub fn parse_override(arg: &str) -> Result<(String, toml::Value)> {
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
fn zip_axis(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn known(_: &str, key: &str) -> bool {
        [
            "max_epochs",
            "pos_weight",
            "lambda_density",
            "fixed_support",
            "preset",
            "resume_from",
        ]
        .contains(&key)
    }

    fn parse(text: &str) -> Result<Spec> {
        Spec::parse(Path::new("s.toml"), text, &known, 100_000, &[])
    }

    #[test]
    fn a_grid_times_folds_expands_with_stable_names() {
        let s = parse(
            "command = \"train-gnn\"\nfolds = [0, 1]\n[base]\nmax_epochs = 3\n[grid]\n\
             pos_weight = [1.0, 3.0]\nlambda_density = [0.0, 0.01]\n",
        )
        .unwrap();
        let names: Vec<&str> = s.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names.len(), 8);
        assert!(names.contains(&"ld0.01_pw3.0/fold1"), "{names:?}");
        let t = &s.tasks[0];
        assert_eq!(t.flags["max_epochs"].as_integer(), Some(3));
        assert_eq!(t.flags["cv_fold"].as_integer(), Some(0));
        assert_eq!(t.varied["fold"], "0");
    }

    #[test]
    fn zipped_keys_vary_together_and_name_their_tasks() {
        let s = parse(
            "command = \"train-gnn\"\nfolds = [0]\n[grid]\nlambda_density = [0.0, 0.01]\n\
             [[zip]]\nname = [\"a\", \"b\"]\nmax_epochs = [1, 2]\npos_weight = [1.0, 3.0]\n",
        )
        .unwrap();
        let names: Vec<&str> = s.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "a/ld0.0/fold0",
                "a/ld0.01/fold0",
                "b/ld0.0/fold0",
                "b/ld0.01/fold0"
            ]
        );
        let b = &s.tasks[2];
        assert_eq!(b.flags["max_epochs"].as_integer(), Some(2));
        assert_eq!(b.flags["pos_weight"].as_float(), Some(3.0));
        assert_eq!(b.varied["zip"], "b");
        assert_eq!(b.varied["max_epochs"], "2");
        for (zip, needle) in [
            (
                "max_epochs = [1, 2]\npos_weight = [1.0]\n",
                "zipped lists must be as long",
            ),
            ("lambda_density = [1.0, 2.0]\n", "also in [grid]"),
            (
                "name = [\"a\"]\nmax_epochs = [1, 2]\n",
                "1 labels for 2 values",
            ),
            (
                "name = [\"a\", \"a\"]\nmax_epochs = [1, 2]\n",
                "labels must differ",
            ),
            ("max_epochs = 3\n", "expected a non-empty list"),
            ("nope = [1]\n", "not a flag"),
        ] {
            let e = parse(&format!(
                "command = \"train-gnn\"\n[grid]\nlambda_density = [0.0]\n[[zip]]\n{zip}"
            ))
            .unwrap_err()
            .to_string();
            assert!(e.contains(needle), "{zip}: {e}");
        }
    }

    #[test]
    fn command_line_overrides_replace_the_specs_values() {
        let text = "command = \"train-gnn\"\n[base]\nmax_epochs = 3\n[grid]\n\
                    pos_weight = [1.0, 3.0]\n[[variant]]\nname = \"v\"\nmax_epochs = 9\n";
        let over = |args: &[&str]| -> Result<Spec> {
            let o: Vec<(String, toml::Value)> =
                args.iter().map(|a| parse_override(a).unwrap()).collect();
            Spec::parse(Path::new("s.toml"), text, &known, 100_000, &o)
        };
        let s = over(&[
            "max_epochs=5",
            "pos_weight=[2.0]",
            "lambda-density=[0.0, 0.1]",
        ])
        .unwrap();
        let names: Vec<&str> = s.tasks.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["v/ld0.0_pw2.0", "v/ld0.1_pw2.0"]);
        assert!(
            s.tasks
                .iter()
                .all(|t| t.flags["max_epochs"].as_integer() == Some(5))
        );
        assert_eq!(
            parse_override("preset=residual").unwrap().1.as_str(),
            Some("residual")
        );
        assert!(parse_override("max_epochs").is_err());
        let e = over(&["nope=1"]).unwrap_err().to_string();
        assert!(
            e.contains("`nope` is not a flag of trainer train-gnn"),
            "{e}"
        );
    }

    #[test]
    fn variants_and_errors_name_the_line() {
        let s = parse(
            "command = \"train-gnn\"\n[[variant]]\nname = \"a\"\nfixed_support = true\n\
             [[variant]]\nname = \"b\"\n",
        )
        .unwrap();
        assert_eq!(s.tasks.len(), 2);
        assert_eq!(s.tasks[0].name, "a");
        let e = parse("command = \"train-gnn\"\n[grid]\nbogus = [1]\n").unwrap_err();
        assert!(
            e.to_string().contains("s.toml:3") && e.to_string().contains("bogus"),
            "{e}"
        );
        let e = parse("command = \"train-gnn\"\n[grid]\npos_weight = []\n").unwrap_err();
        assert!(
            e.to_string()
                .contains("s.toml:3: the grid of `pos_weight` is empty"),
            "{e}"
        );
        let e = parse(
            "command = \"train-gnn\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("both named `a`"), "{e}");
        let e = parse("command = \"train-gnn\"\n[then]\nmax_epochs = 1\n").unwrap_err();
        assert!(
            e.to_string().contains("s.toml:2") && e.to_string().contains("folds"),
            "{e}"
        );
        let e = parse("command = \"train-gnn\"\nfolds = [0]\n[then]\nresume_from = \"x\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("s.toml:4"), "{e}");
    }

    #[test]
    fn a_then_stage_adds_one_resumed_task_per_phase_one_task() {
        let s = parse(
            "command = \"train-gnn\"\nfolds = [0, 1]\n[grid]\npos_weight = [1.0, 3.0]\n\
             [then]\nname = \"fine\"\nlambda_density = 0.1\n",
        )
        .unwrap();
        assert_eq!(s.tasks.len(), 8);
        let p2 = &s.tasks[5];
        assert_eq!(p2.after, Some(1));
        assert_eq!(p2.name, format!("fine/{}", s.tasks[1].name));
        assert_eq!(p2.flags["lambda_density"].as_float(), Some(0.1));
        assert_eq!(p2.flags["cv_fold"], s.tasks[1].flags["cv_fold"]);
        assert_eq!(p2.varied["stage"], "fine");
        assert_eq!(s.tasks[1].varied["stage"], "phase1");
        assert!(s.tasks[..4].iter().all(|t| t.after.is_none()));
    }
}
