//! The shape of a spec file, read through serde: a key a spec does not have is refused, and
//! every error of shape names its line (the span of the key or value `toml` reports).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};

use crate::training_command::TrainingCommand;

/// A spec file's top level as written; the flags (`[base]`, `[grid]`, …) stay TOML tables, for
/// `Spec::parse` to check against the command.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SpecFile {
    #[serde(default, deserialize_with = "command")]
    pub command: Option<TrainingCommand>,
    #[serde(default, deserialize_with = "table_base")]
    pub base: toml::Table,
    #[serde(default, deserialize_with = "table_grid")]
    pub grid: toml::Table,
    /// `[[variant]]` tables, each with its `name` (still in the table).
    #[serde(default, deserialize_with = "variants")]
    pub variant: Option<Vec<toml::Table>>,
    #[serde(default, deserialize_with = "ints_folds")]
    pub folds: Option<Vec<i64>>,
    #[serde(default, deserialize_with = "ints_seeds")]
    pub seeds: Option<Vec<i64>>,
    #[serde(default, deserialize_with = "table_then_opt")]
    pub then: Option<toml::Table>,
    #[serde(default, deserialize_with = "table_resources")]
    pub resources: toml::Table,
    #[serde(default, deserialize_with = "zips")]
    pub zip: Vec<toml::Table>,
}

/// The `file:line` of a serde error's span in `text` (1-based).
pub(super) fn line_of_span(text: &str, e: &toml::de::Error) -> Option<usize> {
    let start = e.span()?.start.min(text.len());
    Some(text[..start].matches('\n').count() + 1)
}

/// A serde error's message in the spec's words: an unknown key is `` unknown key `k`; a spec has
/// command, base, … `` (the keys from serde's list of the fields above).
pub(super) fn message(e: &toml::de::Error) -> String {
    let m = e.message();
    if let Some(rest) = m.strip_prefix("unknown field `")
        && let Some((key, rest)) = rest.split_once('`')
        && let Some(fields) = rest.strip_prefix(", expected one of ")
    {
        return format!(
            "unknown key `{key}`; a spec has {}",
            fields.replace('`', "")
        );
    }
    m.to_string()
}

fn command<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TrainingCommand>, D::Error> {
    let v = toml::Value::deserialize(d)?;
    let shown = v.as_str().map_or_else(|| v.to_string(), str::to_string);
    match v.as_str().and_then(TrainingCommand::from_name) {
        Some(c) => Ok(Some(c)),
        None => Err(D::Error::custom(format!(
            "command `{shown}`: expected {}",
            TrainingCommand::expected()
        ))),
    }
}

/// A table, or `` `name` must be a table ``.
fn table<E: serde::de::Error>(name: &str, v: toml::Value) -> Result<toml::Table, E> {
    match v {
        toml::Value::Table(t) => Ok(t),
        _ => Err(E::custom(format!("`{name}` must be a table"))),
    }
}

macro_rules! table_fn {
    ($f:ident, $name:literal) => {
        fn $f<'de, D: Deserializer<'de>>(d: D) -> Result<toml::Table, D::Error> {
            table($name, toml::Value::deserialize(d)?)
        }
    };
}
table_fn!(table_base, "base");
table_fn!(table_grid, "grid");
table_fn!(table_resources, "resources");

fn table_then_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<toml::Table>, D::Error> {
    table("then", toml::Value::deserialize(d)?).map(Some)
}

/// A non-empty list of integers.
fn ints<E: serde::de::Error>(name: &str, v: toml::Value) -> Result<Option<Vec<i64>>, E> {
    match v {
        toml::Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|v| {
                v.as_integer()
                    .ok_or_else(|| E::custom(format!("`{name}` must be a list of integers")))
            })
            .collect::<Result<Vec<_>, E>>()
            .map(Some),
        _ => Err(E::custom(format!("`{name}` must be a non-empty list"))),
    }
}

fn ints_folds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<i64>>, D::Error> {
    ints("folds", toml::Value::deserialize(d)?)
}

fn ints_seeds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<i64>>, D::Error> {
    ints("seeds", toml::Value::deserialize(d)?)
}

fn variants<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<toml::Table>>, D::Error> {
    let toml::Value::Array(list) = toml::Value::deserialize(d)? else {
        return Err(D::Error::custom("write variants as [[variant]] tables"));
    };
    list.into_iter()
        .map(|v| {
            let toml::Value::Table(t) = v else {
                return Err(D::Error::custom("each [[variant]] must be a table"));
            };
            if !t.get("name").is_some_and(toml::Value::is_str) {
                return Err(D::Error::custom("a [[variant]] needs `name = \"...\"`"));
            }
            Ok(t)
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn zips<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<toml::Table>, D::Error> {
    let toml::Value::Array(list) = toml::Value::deserialize(d)? else {
        return Err(D::Error::custom("write zips as [[zip]] tables"));
    };
    list.into_iter()
        .map(|z| match z {
            toml::Value::Table(t) => Ok(t),
            _ => Err(D::Error::custom("write each zip as a [[zip]] table")),
        })
        .collect()
}
