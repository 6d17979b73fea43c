//! User data in a sweep's scripts, never pasted as text: shell words are single-quoted
//! ([`sh`]), values of scheduler directives double-quoted the way `sbatch` and `bsub` read them
//! ([`directive`]), comment text with its control characters escaped ([`comment`]). The checks
//! here refuse what no quoting can carry: a path with a control character, or with a character
//! that Slurm's and LSF's log-file patterns or directive quotes read themselves (`%`, `"`, `\`).

use std::path::Path;

use anyhow::{Result, bail};

/// The longest path a sweep puts into a script (Linux's `PATH_MAX`).
pub(crate) const MAX_PATH: usize = 4096;

/// `s` as one shell word: unchanged when it has no special character, else single-quoted
/// (`'a b'`; a `'` goes in double quotes: `"it's "'$HOME'`, as `shlex` quotes). Control characters cannot reach here (the checks refuse them); a NUL would make
/// the word empty-quoted rather than cut.
pub(crate) fn sh(s: &str) -> String {
    match shlex::try_quote(s) {
        Ok(q) => q.into_owned(),
        Err(_) => "''".into(),
    }
}

/// A path as one shell word ([`sh`] of its text).
pub(crate) fn sh_path(p: &Path) -> String {
    sh(&p.to_string_lossy())
}

/// `s` as one value of a `#SBATCH`/`#BSUB` line: in double quotes, `"` and `\` escaped (Slurm
/// reads a directive's value with that quoting; `#` inside the quotes is not a comment).
pub(crate) fn directive(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// `s` for a `#` comment line: control characters (a newline would start a line of code)
/// written as escapes.
pub(crate) fn comment(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// `s` quoted for a message, cut after 80 characters (a 200 KB value is not repeated).
pub(crate) fn shown(s: &str) -> String {
    let head: String = s.chars().take(80).collect();
    if head.len() < s.len() {
        format!("{head:?}… ({} bytes)", s.len())
    } else {
        format!("{head:?}")
    }
}

/// The first control character of `s` (NUL, newline, escape, DEL, …), if any.
pub(crate) fn control(s: &str) -> Option<char> {
    s.chars().find(|c| c.is_control())
}

/// A path that goes into a sweep's scripts (the sweep directory, the spec): no control
/// characters, none of `%` `"` `\` (the schedulers' log patterns and directive quotes read them),
/// at most [`MAX_PATH`] bytes. Spaces, quotes and `$` are fine: the scripts quote them.
pub(crate) fn check_path(what: &str, p: &Path) -> Result<()> {
    let full = p.to_string_lossy();
    let text = shown(&full);
    if let Some(c) = control(&full) {
        bail!("{what} {text}: contains the control character {c:?}; expected a plain path");
    }
    if let Some(c) = full.chars().find(|c| "%\"\\".contains(*c)) {
        bail!(
            "{what} {text}: contains `{c}`, which Slurm's and LSF's log-file patterns and \
             directive quotes read themselves; choose a path without `%`, `\"` or `\\`"
        );
    }
    if full.len() > MAX_PATH {
        bail!(
            "{what}: a path of {} bytes; expected at most {MAX_PATH}",
            full.len()
        );
    }
    if std::str::from_utf8(p.as_os_str().as_encoded_bytes()).is_err() {
        bail!("{what} {text}: not valid UTF-8");
    }
    Ok(())
}

/// A task's name is a relative path of identifiers under `runs/`: each `/`-separated part
/// non-empty, not starting with `.` (no `.`, `..` or hidden names), without `\` or control
/// characters, at most 200 bytes; the whole at most 1000.
pub(crate) fn check_task_name(name: &str) -> Result<()> {
    let bad = |why: &str| -> Result<()> {
        bail!(
            "task name {}: {why}; a task's name is built from variant names, zip labels \
             and grid values, which must be plain names (letters, digits, `_ - + = ,` and inner \
             dots)",
            shown(name)
        )
    };
    if name.len() > 1000 {
        return bad("longer than 1000 bytes");
    }
    if let Some(c) = control(name) {
        return bad(&format!("contains the control character {c:?}"));
    }
    for part in name.split('/') {
        if part.is_empty() {
            return bad("has an empty part (a leading, trailing or doubled `/`)");
        }
        if part.starts_with('.') {
            return bad(&format!(
                "part {part:?} starts with `.` (it would leave or hide in the sweep directory)"
            ));
        }
        if part.contains('\\') {
            return bad(&format!("part {part:?} contains `\\`"));
        }
        if part.len() > 200 {
            return bad("has a part longer than 200 bytes");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_only_when_they_need_it() {
        assert_eq!(sh("q_ai4"), "q_ai4");
        assert_eq!(sh("/a b/c"), "'/a b/c'");
        assert_eq!(sh("$(touch x)"), "'$(touch x)'");
        assert_eq!(sh("it's"), "\"it's\"");
        assert_eq!(sh("it's $HOME"), "\"it's \"'$HOME'");
        assert_eq!(directive("/a b/#x"), "\"/a b/#x\"");
        assert_eq!(comment("a\nb"), "a\\nb");
    }

    #[test]
    fn names_that_leave_the_sweep_are_refused() {
        for bad in [
            "..", ".", "../../x", "a/../b", ".hidden", "a//b", "/abs", "a\\b", "a\nb",
        ] {
            assert!(check_task_name(bad).is_err(), "{bad:?}");
        }
        for good in ["run", "fixed/pw3_ld0.01/fold0", "phase2/a-b+c=1,2", "1e-05"] {
            check_task_name(good).unwrap();
        }
    }
}
