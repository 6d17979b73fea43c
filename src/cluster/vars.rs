//! A snapshot of environment variables, so every scheduler can be built and tested from a map.
//!
//! Only [`Vars::from_process`] reads the real process environment; everything else in
//! `cluster` takes a `&Vars`, which unit tests build with [`Vars::from_pairs`].

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;

use super::error::EnvError;

/// Environment variables by name. Empty or all-blank values count as unset, because schedulers
/// and shell wrappers often export `VAR=` rather than leaving a variable out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vars {
    map: BTreeMap<String, String>,
}

impl Vars {
    /// The current process environment (names or values that are not UTF-8 are skipped).
    pub fn from_process() -> Self {
        let map = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        Self { map }
    }

    /// Builds a map from `(name, value)` pairs, e.g. `Vars::from_pairs([("RANK", "0")])`.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let map = pairs
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        Self { map }
    }

    /// The trimmed value of `name`, or `None` when unset or blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.map
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// The raw value of `name` as set, blank included (`CUDA_VISIBLE_DEVICES=""` means "no GPU").
    pub fn get_raw(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    /// Whether `name` is set to a non-blank value.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The first of `names` that is set, with its value.
    pub fn first_of<'a>(&'a self, names: &[&'a str]) -> Option<(&'a str, &'a str)> {
        names.iter().find_map(|n| self.get(n).map(|v| (*n, v)))
    }

    /// Parses `name` as `T`; unset gives `Ok(None)`, a bad value an error naming the variable.
    pub fn parse<T: FromStr>(
        &self,
        name: &str,
        expected: &'static str,
    ) -> Result<Option<T>, EnvError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v.parse::<T>().map(Some).map_err(|_| EnvError::Invalid {
                var: name.to_string(),
                value: v.to_string(),
                expected,
            }),
        }
    }

    /// Parses `name` as a non-negative integer (`Ok(None)` when unset).
    pub fn parse_u32(&self, name: &str) -> Result<Option<u32>, EnvError> {
        self.parse::<u32>(name, "a non-negative integer")
    }

    /// Parses `name` as a non-negative integer that `scheduler` must set.
    pub fn require_u32(
        &self,
        name: &str,
        scheduler: &'static str,
        why: &str,
    ) -> Result<u32, EnvError> {
        self.parse_u32(name)?.ok_or_else(|| EnvError::Missing {
            var: name.to_string(),
            scheduler,
            why: why.to_string(),
        })
    }
}

impl From<HashMap<String, String>> for Vars {
    fn from(map: HashMap<String, String>) -> Self {
        Self {
            map: map.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_values_count_as_unset() {
        let v = Vars::from_pairs([("A", " "), ("B", " 3 ")]);
        assert_eq!(v.get("A"), None);
        assert_eq!(v.get_raw("A"), Some(" "));
        assert_eq!(v.parse_u32("B").ok().flatten(), Some(3));
    }

    #[test]
    fn bad_integer_names_the_variable() {
        let v = Vars::from_pairs([("SLURM_PROCID", "x1")]);
        let err = v.parse_u32("SLURM_PROCID").unwrap_err().to_string();
        assert!(err.contains("SLURM_PROCID"), "{err}");
        let err = v
            .require_u32("NOPE", "slurm", "needed")
            .unwrap_err()
            .to_string();
        assert!(err.contains("NOPE"), "{err}");
    }
}
