//! The values of `[resources]`, each checked on its own: one allow-list per kind of field,
//! lengths bounded, time limits and memory sizes parsed without overflow.

use anyhow::{Result, bail};

/// What a value of `[resources]` may be: one allow-list per kind of field. Every value is also
/// quoted where it reaches a shell (`super::quote`); the lists keep directive lines, which no
/// shell reads, to what the schedulers expect.
#[derive(Clone, Copy)]
pub(super) enum Kind {
    /// partition, account, qos, gpu_type, mig: `q_ai4`, `gpu,cpu`, `3g.20gb`.
    Name,
    /// A module for `module load`: `singularity/3.8`, `CUDA/12.1.1-GCC-12`, `py@3.11`.
    Module,
    /// A Slurm feature expression or an LSF select string: `v100|a100`, `ib&(a100|h100)`.
    Constraint,
    /// A path (image, bind): anything printable; `binds` also without `,` (their separator).
    Path { comma: bool },
    /// A whole directive line (`extra`): an option, printable.
    Line,
}

impl Kind {
    fn allows(self, c: char) -> bool {
        let plain = c.is_ascii_alphanumeric() || "._-".contains(c);
        match self {
            Kind::Name => plain || ",+".contains(c),
            Kind::Module => plain || "/+@:=".contains(c),
            Kind::Constraint => plain || "|&()*!=<>:,".contains(c),
            Kind::Path { comma } => !c.is_control() && (comma || c != ','),
            Kind::Line => !c.is_control(),
        }
    }

    fn max_len(self) -> usize {
        match self {
            Kind::Name => 128,
            Kind::Module | Kind::Constraint => 256,
            Kind::Path { .. } => crate::cluster::scheduler::quote::MAX_PATH,
            Kind::Line => 1024,
        }
    }

    fn expected(self) -> &'static str {
        match self {
            Kind::Name => "one word of letters, digits and `. _ - , +`",
            Kind::Module => "one module name of letters, digits and `. _ - / + @ : =`",
            Kind::Constraint => {
                "one feature expression of letters, digits and `. _ - | & ( ) * ! = < > : ,`"
            }
            Kind::Path { comma: true } => "a path without control characters",
            Kind::Path { comma: false } => "a path without control characters or `,`",
            Kind::Line => "one directive option starting with `-`, without control characters",
        }
    }
}

/// `v` checked against `kind`'s allow-list and length; the error names the key, shows the
/// value (its first 60 characters) and says what was expected.
pub(super) fn checked(key: &str, v: &str, kind: Kind) -> Result<String> {
    let v = if matches!(kind, Kind::Line) {
        v.trim()
    } else {
        v
    };
    let shown = crate::cluster::scheduler::quote::shown(v);
    let bad = |why: String| anyhow::anyhow!("`{key}` = {shown}: expected {}{why}", kind.expected());
    if v.is_empty() {
        return Err(bad(" (it is empty)".into()));
    }
    if let Some(c) = v.chars().find(|&c| !kind.allows(c)) {
        return Err(bad(format!(" (found {c:?})")));
    }
    let option = matches!(kind, Kind::Line);
    if option != v.starts_with('-') {
        return Err(bad(if option {
            " (it does not start with `-`)".into()
        } else {
            " (it starts with `-`, which would read as an option)".into()
        }));
    }
    if v.len() > kind.max_len() {
        return Err(bad(format!(", at most {} bytes", kind.max_len())));
    }
    Ok(v.to_string())
}

/// Seconds of a Slurm-style time limit: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`,
/// `D-HH:MM:SS`.
pub fn parse_time(v: &str) -> Result<u64> {
    let bad = || {
        anyhow::anyhow!(
            "`time` = {v:?}: expected minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]] (Slurm's forms)"
        )
    };
    let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
    let (days, rest) = match v.split_once('-') {
        Some((d, r)) => (Some(num(d)?), r),
        None => (None, v),
    };
    let parts: Vec<u64> = rest.split(':').map(num).collect::<Result<_>>()?;
    // Each field in u128: `5124095576030432:00:00` must not wrap to an hour.
    let f = |x: &u64| u128::from(*x);
    let secs: u128 = match (days, parts.as_slice()) {
        (None, [m]) => f(m) * 60,
        (None, [m, s]) => f(m) * 60 + f(s),
        (None, [h, m, s]) => f(h) * 3600 + f(m) * 60 + f(s),
        (Some(d), [h]) => f(&d) * 86400 + f(h) * 3600,
        (Some(d), [h, m]) => f(&d) * 86400 + f(h) * 3600 + f(m) * 60,
        (Some(d), [h, m, s]) => f(&d) * 86400 + f(h) * 3600 + f(m) * 60 + f(s),
        _ => return Err(bad()),
    };
    if secs == 0 || secs > 365 * 86400 {
        bail!("`time` = {v:?}: expected a limit between one second and a year");
    }
    Ok(secs as u64)
}

/// Megabytes of a memory size: a number (MB) or with a unit K, M, G, T (optionally `B`).
pub fn parse_mem(v: &str) -> Result<u64> {
    let bad = || anyhow::anyhow!("`mem` = {v:?}: expected megabytes or a size like 500M, 32G, 1T");
    let u = v.trim().to_ascii_uppercase();
    let u = u.strip_suffix('B').unwrap_or(&u);
    let (digits, scale) = match u.char_indices().last() {
        Some((i, 'K')) => (&u[..i], 1.0 / 1024.0),
        Some((i, 'M')) => (&u[..i], 1.0),
        Some((i, 'G')) => (&u[..i], 1024.0),
        Some((i, 'T')) => (&u[..i], 1024.0 * 1024.0),
        _ => (u, 1.0),
    };
    let n: f64 = digits.parse().map_err(|_| bad())?;
    let mb = (n * scale).ceil();
    if !(1.0..=1e9).contains(&mb) {
        return Err(bad());
    }
    Ok(mb as u64)
}

/// `D-HH:MM:SS` (days only when there are any).
pub fn format_time(secs: u64) -> String {
    let (d, h, m, s) = (
        secs / 86400,
        secs % 86400 / 3600,
        secs % 3600 / 60,
        secs % 60,
    );
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

pub(super) fn string(key: &str, v: &toml::Value) -> Result<String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        other => bail!("`{key}` = {other}: expected a string"),
    }
}

pub(super) fn strings(key: &str, v: &toml::Value) -> Result<Vec<String>> {
    match v {
        toml::Value::Array(items) => items.iter().map(|x| string(key, x)).collect(),
        other => Ok(vec![string(key, other)?]),
    }
}

/// A whole number from `min` to `max`; the error names the key and shows the value.
pub(super) fn count(key: &str, v: &toml::Value, min: u32, max: u32) -> Result<u32> {
    let n = match v {
        toml::Value::Integer(i) => *i,
        toml::Value::String(s) => s.trim().parse().unwrap_or(-1),
        _ => -1,
    };
    u32::try_from(n)
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            anyhow::anyhow!("`{key}` = {v}: expected a whole number from {min} to {max}")
        })
}
