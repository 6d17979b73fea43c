//! What every settings struct is built from: the `--help` headings (also the sections of
//! `config.toml`), value parsers for numbers that must be in range, and [`defaults`], the
//! settings of an empty command line.
//!
//! A settings struct derives `clap::Args` and serde together, so that each field carries its
//! flag, its reference (underscore) alias, its default and its doc in one place; the CLI
//! flattens it into a sub-command, and everything below the CLI sees only the plain struct.

use clap::{Args, Command, FromArgMatches};

/// `--help` headings, also the sections of `config.toml`.
pub(crate) const DATA: &str = "Data";
pub(crate) const MODEL: &str = "Model";
pub(crate) const OPTIM: &str = "Optimisation";
pub(crate) const RUN: &str = "Run";
pub(crate) const CLUSTER: &str = "Cluster";

/// The settings of an empty command line: every field at its flag's default. This is the one
/// source of defaults (no `impl Default` repeats them).
pub(crate) fn defaults<T: Args + FromArgMatches>() -> T {
    let cmd = T::augment_args(Command::new("defaults").no_binary_name(true));
    let matches = cmd
        .try_get_matches_from(std::iter::empty::<String>())
        .expect("every field of a settings struct has a default");
    T::from_arg_matches(&matches).expect("defaults convert to the settings")
}

/// A count that must be at least 1.
pub(crate) fn at_least_one(s: &str) -> Result<usize, String> {
    at_least(s, 1)
}

/// A count that must be at least 2.
pub(crate) fn at_least_two(s: &str) -> Result<usize, String> {
    at_least(s, 2)
}

fn at_least(s: &str, min: usize) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(v) if v >= min => Ok(v),
        Ok(v) => Err(format!(
            "expected a whole number of at least {min}, got {v}"
        )),
        Err(_) => Err(format!(
            "expected a whole number of at least {min}, got `{s}`"
        )),
    }
}

/// A finite number greater than 0.
pub(crate) fn positive(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("expected a number greater than 0, got {s}"))
    }
}

/// Seconds between two progress lines: a finite number from 0.1 to one day (`inf` or `1e300`
/// would make `Duration` panic; `nan` would spin).
pub(crate) fn interval_secs(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if (0.1..=86_400.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("expected seconds from 0.1 to 86400, got {s}"))
    }
}

/// A finite number ≥ 0.
pub(crate) fn non_negative(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("expected a number of at least 0, got {s}"))
    }
}

/// A finite number.
pub(crate) fn finite(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(format!("expected a finite number, got {s}")),
        Err(_) => Err(format!("expected a number, got `{s}`")),
    }
}

/// A fraction in (0, 1].
pub(crate) fn fraction(s: &str) -> Result<f64, String> {
    let v = finite(s)?;
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!("expected a number in (0, 1], got {s}"))
    }
}

/// "Off when negative": a value, or `None` for the reference's negative sentinel.
pub(crate) type OffIfNegative = Option<f64>;

/// Parses [`OffIfNegative`].
pub(crate) fn off_if_negative(s: &str) -> Result<OffIfNegative, String> {
    let v = finite(s)?;
    Ok((v >= 0.0).then_some(v))
}

/// "Never when negative" (the reference's −1): an epoch, or `None`.
pub(crate) type EpochOrNever = Option<usize>;

/// Parses [`EpochOrNever`]: a negative number (never) or an epoch ≥ 0.
pub(crate) fn epoch_or_never(s: &str) -> Result<EpochOrNever, String> {
    match s.trim().parse::<i64>() {
        Ok(v) => Ok(usize::try_from(v).ok()),
        Err(_) => Err(format!("expected -1 (never) or an epoch, got `{s}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsers() {
        assert_eq!(positive("2.5"), Ok(2.5));
        assert!(positive("0").is_err() && positive("NaN").is_err() && positive("x").is_err());
        assert_eq!(off_if_negative("-1"), Ok(None));
        assert_eq!(off_if_negative("0.25"), Ok(Some(0.25)));
        assert_eq!(epoch_or_never("-1"), Ok(None));
        assert_eq!(epoch_or_never("3"), Ok(Some(3)));
        assert!(epoch_or_never("x").is_err());
        assert!(fraction("0").is_err() && fraction("1").is_ok());
    }
}
