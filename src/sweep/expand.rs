//! A spec's tasks: every variant × grid point × fold × seed, named from what varies
//! (`fixed/ld0.01_pw3.0/fold1`), and a two-stage sweep's phase-2 tasks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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

/// What a spec varies, read and checked by [`super::spec`].
pub(crate) struct Space {
    /// Flags of every task.
    pub base: toml::Table,
    /// Grid axes: flag → its values.
    pub axes: Vec<(String, Vec<toml::Value>)>,
    /// `[[zip]]` axes: flags that vary together, each point labelled.
    pub zips: Vec<Zip>,
    /// Named variants and their flags (one unnamed, empty one without `[[variant]]`).
    pub variants: Vec<(Option<String>, toml::Table)>,
    pub folds: Option<Vec<i64>>,
    pub seeds: Option<Vec<i64>>,
}

/// One `[[zip]]` table: the i-th values of its keys make point i, labelled `labels[i]`.
pub(crate) struct Zip {
    /// The key naming this axis in tables (`zip`, `zip2`, …).
    pub axis: String,
    pub labels: Vec<String>,
    pub keys: Vec<(String, Vec<toml::Value>)>,
}

impl Zip {
    /// Point `i`: its label and its flags.
    fn point(&self, i: usize) -> (String, Vec<(String, toml::Value)>) {
        let flags = self
            .keys
            .iter()
            .map(|(k, v)| (k.clone(), v[i].clone()))
            .collect();
        (self.labels[i].clone(), flags)
    }
}

impl Space {
    /// How many tasks [`Space::tasks`] would make (saturating: a grid of 10^30 points counts as
    /// `u128::MAX`), computed without expanding anything.
    pub(crate) fn count(&self) -> u128 {
        let lens = self
            .axes
            .iter()
            .map(|(_, v)| v.len())
            .chain(self.zips.iter().map(|z| z.labels.len()))
            .chain([self.variants.len()])
            .chain(self.folds.as_ref().map(Vec::len))
            .chain(self.seeds.as_ref().map(Vec::len));
        lens.fold(1u128, |n, len| n.saturating_mul(len as u128))
    }

    /// Values of the spec that another place of it overrides in every task they reach (a
    /// variant over `[base]`, a grid or zip axis over `[base]` or a variant), one line each.
    pub(crate) fn shadowed(&self) -> Vec<String> {
        let mut out = Vec::new();
        let name = |n: &Option<String>| n.clone().unwrap_or_else(|| "(unnamed)".into());
        for (v, flags) in &self.variants {
            for (k, value) in flags {
                if let Some(old) = self.base.get(k) {
                    out.push(format!(
                        "variant {}: {k} = {value} replaces [base] {k} = {old}",
                        name(v)
                    ));
                }
            }
        }
        let axes = self.axes.iter().map(|(k, _)| (k.as_str(), "[grid]"));
        let zipped = self.zips.iter().flat_map(|z| {
            z.keys
                .iter()
                .map(move |(k, _)| (k.as_str(), z.axis.as_str()))
        });
        for (k, place) in axes.chain(zipped) {
            if let Some(old) = self.base.get(k) {
                out.push(format!("{place} {k} replaces [base] {k} = {old}"));
            }
            for (v, flags) in &self.variants {
                if let Some(old) = flags.get(k) {
                    out.push(format!(
                        "{place} {k} replaces variant {}'s {k} = {old}",
                        name(v)
                    ));
                }
            }
        }
        out
    }

    /// `3 variants × 10 × 10 (grid) × 5 folds × 2 stages`, for messages.
    pub(crate) fn shape(&self, stages: u128) -> String {
        let mut parts = vec![format!("{} variant(s)", self.variants.len())];
        for (k, v) in &self.axes {
            parts.push(format!("{} {k}", v.len()));
        }
        for z in &self.zips {
            let keys: Vec<&str> = z.keys.iter().map(|(k, _)| k.as_str()).collect();
            parts.push(format!(
                "{} {}({})",
                z.labels.len(),
                z.axis,
                keys.join(", ")
            ));
        }
        if let Some(f) = &self.folds {
            parts.push(format!("{} folds", f.len()));
        }
        if let Some(s) = &self.seeds {
            parts.push(format!("{} seeds", s.len()));
        }
        if stages > 1 {
            parts.push(format!("{stages} stages"));
        }
        parts.join(" × ")
    }

    /// Every task, the last grid axis fastest, then folds, then seeds.
    pub(crate) fn tasks(&self) -> Vec<Task> {
        let Space {
            base,
            axes,
            zips,
            variants,
            folds,
            seeds,
        } = self;
        let names: Vec<String> = axes.iter().map(|(k, _)| k.clone()).collect();
        let short = abbreviations(&names);

        // Every grid point, the last axis fastest.
        let mut points: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
        for (k, values) in axes {
            points = points
                .into_iter()
                .flat_map(|p| {
                    values.iter().map(move |v| {
                        let mut q = p.clone();
                        q.push((k.clone(), v.clone()));
                        q
                    })
                })
                .collect();
        }
        // Then each zip's points: (axis, label, flags).
        type Zipped = Vec<(String, String, Vec<(String, toml::Value)>)>;
        let mut zipped: Vec<Zipped> = vec![Vec::new()];
        for z in zips {
            zipped = zipped
                .into_iter()
                .flat_map(|p| {
                    (0..z.labels.len()).map(move |i| {
                        let mut q = p.clone();
                        let (label, flags) = z.point(i);
                        q.push((z.axis.clone(), label, flags));
                        q
                    })
                })
                .collect();
        }
        let points: Vec<(Zipped, Vec<(String, toml::Value)>)> = zipped
            .iter()
            .flat_map(|z| points.iter().map(move |p| (z.clone(), p.clone())))
            .collect();
        let mut tasks = Vec::new();
        for (variant, vflags) in variants {
            for (zip_point, point) in &points {
                for fold in folds
                    .clone()
                    .map_or(vec![None], |f| f.into_iter().map(Some).collect())
                {
                    for seed in seeds
                        .clone()
                        .map_or(vec![None], |s| s.into_iter().map(Some).collect())
                    {
                        let mut flags = base.clone();
                        flags.extend(vflags.clone());
                        let mut varied = BTreeMap::new();
                        let mut parts = Vec::new();
                        if let Some(v) = variant {
                            parts.push(v.clone());
                            varied.insert("variant".to_string(), v.clone());
                        }
                        for (axis, label, zflags) in zip_point {
                            parts.push(label.clone());
                            varied.insert(axis.clone(), label.clone());
                            for (k, v) in zflags {
                                flags.insert(k.clone(), v.clone());
                                varied.insert(k.clone(), show(v));
                            }
                        }
                        let grid_part: Vec<String> = point
                            .iter()
                            .map(|(k, v)| format!("{}{}", short[k], show(v)))
                            .collect();
                        if !grid_part.is_empty() {
                            parts.push(grid_part.join("_"));
                        }
                        for (k, v) in point {
                            flags.insert(k.clone(), v.clone());
                            varied.insert(k.clone(), show(v));
                        }
                        if let Some(f) = fold {
                            flags.insert("cv_fold".into(), toml::Value::Integer(f));
                            parts.push(format!("fold{f}"));
                            varied.insert("fold".into(), f.to_string());
                        }
                        if let Some(s) = seed {
                            flags.insert("seed".into(), toml::Value::Integer(s));
                            parts.push(format!("seed{s}"));
                            varied.insert("seed".into(), s.to_string());
                        }
                        if parts.is_empty() {
                            parts.push("run".into());
                        }
                        tasks.push(Task {
                            index: tasks.len(),
                            name: parts.join("/"),
                            varied,
                            flags,
                            after: None,
                        });
                    }
                }
            }
        }
        tasks
    }
}

/// A value as it appears in a task name (`0.01`, `true`, `residual`).
fn show(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A short name for a flag: its words' initials (`pos_weight` → `pw`), unless two varied flags
/// share them (then the whole name).
fn abbreviations(keys: &[String]) -> BTreeMap<String, String> {
    let initials = |k: &str| -> String {
        k.split(['_', '-'])
            .filter_map(|w| w.chars().next())
            .collect()
    };
    keys.iter()
        .map(|k| {
            let short = initials(k);
            let unique = keys.iter().filter(|o| initials(o) == short).count() == 1;
            (k.clone(), if unique { short } else { k.clone() })
        })
        .collect()
}

/// Phase 1 (`tasks`, marked `stage = phase1`) followed by one phase-2 task per phase-1 task:
/// its flags with `then` on top, named `<stage>/<name>`, resumed from it.
pub(crate) fn then_stage(tasks: Vec<Task>, stage: &str, then: &toml::Table) -> Vec<Task> {
    let first: Vec<Task> = tasks
        .into_iter()
        .map(|mut t| {
            t.varied.insert("stage".into(), "phase1".into());
            t
        })
        .collect();
    let second: Vec<Task> = first
        .iter()
        .map(|t| {
            let mut flags = t.flags.clone();
            flags.extend(then.clone());
            let mut varied = t.varied.clone();
            varied.insert("stage".into(), stage.to_string());
            Task {
                index: first.len() + t.index,
                name: format!("{stage}/{}", t.name),
                varied,
                flags,
                after: Some(t.index),
            }
        })
        .collect();
    first.into_iter().chain(second).collect()
}
