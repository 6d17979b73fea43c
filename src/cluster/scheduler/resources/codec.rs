//! How each key of the table in `key.rs` reads its value and shows it back: one [`Codec`] per
//! kind of value (a checked word, a count, a memory size, a time limit, a list), one [`Slot`]
//! per kind of field (`Option` for a value, `Vec` for a list) and one [`Flag`] per kind of
//! `sweep plan` flag. A key names its codec in the table; the per-key rules live here.

use anyhow::{Result, bail};

use super::values::{Kind, checked, count, format_time, parse_mem, parse_time, string, strings};

/// Reads a key's value from TOML (a flag's text arrives as a string; errors name the key and
/// what was expected) and shows a value the way it reads back to the same one.
pub(super) trait Codec {
    type Item;
    fn read(&self, key: &str, v: &toml::Value) -> Result<Self::Item>;
    fn show(&self, item: &Self::Item) -> toml::Value;
}

/// One word checked against its kind's allow-list (partition, account, constraint, image, …).
pub(super) struct Checked(pub Kind);

impl Codec for Checked {
    type Item = String;
    fn read(&self, key: &str, v: &toml::Value) -> Result<String> {
        checked(key, &string(key, v)?, self.0)
    }
    fn show(&self, item: &String) -> toml::Value {
        toml::Value::String(item.clone())
    }
}

/// A whole number from `.0` to `.1` (gpus, cpus).
pub(super) struct Count(pub u32, pub u32);

impl Codec for Count {
    type Item = u32;
    fn read(&self, key: &str, v: &toml::Value) -> Result<u32> {
        count(key, v, self.0, self.1)
    }
    fn show(&self, item: &u32) -> toml::Value {
        toml::Value::Integer((*item).into())
    }
}

/// A memory size, kept in megabytes ([`parse_mem`]) and shown as `{MB}M`.
pub(super) struct Mem;

impl Codec for Mem {
    type Item = u64;
    fn read(&self, key: &str, v: &toml::Value) -> Result<u64> {
        parse_mem(&string(key, v)?)
    }
    fn show(&self, item: &u64) -> toml::Value {
        toml::Value::String(format!("{item}M"))
    }
}

/// A time limit, kept in seconds: minutes as a TOML integer, or text in Slurm's forms
/// ([`parse_time`]); shown as `D-HH:MM:SS` ([`format_time`]).
pub(super) struct Time;

impl Codec for Time {
    type Item = u64;
    fn read(&self, key: &str, v: &toml::Value) -> Result<u64> {
        Ok(match v {
            // Minutes; 0 would render `--time=00:00:00`, which Slurm reads as no limit.
            toml::Value::Integer(_) => match count(key, v, 0, 525_600)? {
                0 => bail!("`time` = 0: expected a limit between one minute and a year"),
                m => u64::from(m) * 60,
            },
            other => parse_time(&string(key, other)?)?,
        })
    }
    fn show(&self, item: &u64) -> toml::Value {
        toml::Value::String(format_time(*item))
    }
}

/// A list of at most 64 entries (one string is a list of one), each checked against the kind.
pub(super) struct List(pub Kind);

impl Codec for List {
    type Item = Vec<String>;
    fn read(&self, key: &str, v: &toml::Value) -> Result<Vec<String>> {
        let list = strings(key, v)?;
        if list.len() > 64 {
            bail!("`{key}`: {} entries; expected at most 64", list.len());
        }
        list.iter().map(|x| checked(key, x, self.0)).collect()
    }
    fn show(&self, item: &Vec<String>) -> toml::Value {
        toml::Value::Array(item.iter().cloned().map(toml::Value::String).collect())
    }
}

/// A field of `Resources`: an `Option` holds one value (`None`: not set), a `Vec` a list (empty:
/// not set).
pub(super) trait Slot {
    type Item;
    fn fill(item: Self::Item) -> Self;
    fn item(&self) -> Option<&Self::Item>;
}

impl<T> Slot for Option<T> {
    type Item = T;
    fn fill(item: T) -> Self {
        Some(item)
    }
    fn item(&self) -> Option<&T> {
        self.as_ref()
    }
}

impl Slot for Vec<String> {
    type Item = Vec<String>;
    fn fill(item: Vec<String>) -> Self {
        item
    }
    fn item(&self) -> Option<&Vec<String>> {
        (!self.is_empty()).then_some(self)
    }
}

/// A `sweep plan` flag's text, as the TOML value of its key when given: a string, or a list of
/// the flag's repeats.
pub(super) trait Flag {
    fn given(self) -> Option<toml::Value>;
}

impl Flag for Option<String> {
    fn given(self) -> Option<toml::Value> {
        self.map(toml::Value::String)
    }
}

impl Flag for Vec<String> {
    fn given(self) -> Option<toml::Value> {
        (!self.is_empty())
            .then(|| toml::Value::Array(self.into_iter().map(toml::Value::String).collect()))
    }
}
