//! The names the reports and figures give runs (`trainer compare`'s rows, `trainer plot`'s and
//! `plot-sc`'s legends): `--label NAME=PATH` where given, else a short default name, never a
//! whole path: the run directory's name, or where two runs' directories share a name the
//! shortest tail of their paths that tells them apart (`cv-a/fold0`, `cv-b/fold0`). A label whose
//! PATH is not one of the runs given, or a name given to two different runs, is refused
//! ([`Exit::Usage`]), never ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::error::{Exit, ExitError};

/// `--label NAME=PATH`: the name of the run (or sweep) at PATH.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Label {
    pub name: String,
    pub path: PathBuf,
}

/// Parses `NAME=PATH` (split at the first `=`; neither side empty): clap's value parser of
/// `--label`, so a malformed one is a usage error naming it.
pub(crate) fn parse(text: &str) -> Result<Label, String> {
    match text.split_once('=') {
        Some((name, path)) if !name.trim().is_empty() && !path.is_empty() => Ok(Label {
            name: name.trim().to_string(),
            path: PathBuf::from(path),
        }),
        _ => Err(format!(
            "`{text}`: expected NAME=PATH, PATH one of the runs given (e.g. --label \
             eb-drift=runs/eb-drift)"
        )),
    }
}

/// Whether `a` and `b` name the same file: equal as written, or once resolved.
fn same(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (a.canonicalize(), b.canonicalize()),
            (Ok(x), Ok(y)) if x == y
        )
}

/// The `--label` of each of `paths` (`None`: none given). Refuses a label whose path is none of
/// `paths`, a name given to two different runs, and a run given two names.
pub(crate) fn given(labels: &[Label], paths: &[PathBuf]) -> Result<Vec<Option<String>>> {
    given_as(labels, paths, false)
}

/// [`given`], with `shared`: one name may label several runs (one configuration's folds).
fn given_as(labels: &[Label], paths: &[PathBuf], shared: bool) -> Result<Vec<Option<String>>> {
    let usage = |m: String| -> anyhow::Error { ExitError::new(Exit::Usage, m).into() };
    let mut out: Vec<Option<String>> = vec![None; paths.len()];
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for l in labels {
        let Some(i) = paths.iter().position(|p| same(p, &l.path)) else {
            let runs: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            return Err(usage(format!(
                "--label {}={}: {} is not one of the runs given ({})",
                l.name,
                l.path.display(),
                l.path.display(),
                runs.join(", ")
            )));
        };
        if let Some(&j) = by_name.get(l.name.as_str())
            && j != i
            && !shared
        {
            return Err(usage(format!(
                "--label {}: the name is given to two runs, {} and {}: one name per run",
                l.name,
                paths[j].display(),
                paths[i].display()
            )));
        }
        match &out[i] {
            Some(other) if *other != l.name => {
                return Err(usage(format!(
                    "--label: {} is given two names, {other} and {}",
                    paths[i].display(),
                    l.name
                )));
            }
            _ => {}
        }
        by_name.insert(&l.name, i);
        out[i] = Some(l.name.clone());
    }
    Ok(out)
}

/// The short default name of each of `paths` (see the module's documentation), none equal to a
/// name in `taken` (the labels given) unless the whole path is.
pub(crate) fn default_names(paths: &[PathBuf], taken: &[&str]) -> Vec<String> {
    let parts: Vec<Vec<String>> = paths.iter().map(|p| components(p)).collect();
    let tail = |i: usize, k: usize| {
        let c = &parts[i];
        c[c.len().saturating_sub(k)..].join("/")
    };
    let mut k = vec![1usize; paths.len()];
    loop {
        let names: Vec<String> = (0..paths.len()).map(|i| tail(i, k[i])).collect();
        let mut grew = false;
        for i in 0..paths.len() {
            let clash = taken.contains(&names[i].as_str())
                || (0..paths.len()).any(|j| j != i && names[j] == names[i]);
            if clash && k[i] < parts[i].len() {
                k[i] += 1;
                grew = true;
            }
        }
        if !grew {
            return names;
        }
    }
}

/// The path's names, the last one a real name (`.` or `..` resolved where it can be).
fn components(p: &Path) -> Vec<String> {
    let named = p.file_name().is_some() && !p.ends_with("..");
    let p = if named {
        p.to_path_buf()
    } else {
        p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
    };
    let c: Vec<String> = p
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if c.is_empty() {
        vec![p.display().to_string()]
    } else {
        c
    }
}

/// One name per path: its `--label`, else its default name ([`default_names`], told apart
/// from the other unlabelled runs and from the labels).
pub(crate) fn names(labels: &[Label], paths: &[PathBuf]) -> Result<Vec<String>> {
    names_as(labels, paths, false)
}

/// [`names`] where one `--label` name may be given to several runs: the runs of one
/// configuration (its folds, its seeds), which a figure pools (`plot-sc --strata`).
pub(crate) fn configuration_names(labels: &[Label], paths: &[PathBuf]) -> Result<Vec<String>> {
    names_as(labels, paths, true)
}

fn names_as(labels: &[Label], paths: &[PathBuf], shared: bool) -> Result<Vec<String>> {
    let given = given_as(labels, paths, shared)?;
    let taken: Vec<&str> = given.iter().flatten().map(String::as_str).collect();
    let unlabelled: Vec<PathBuf> = paths
        .iter()
        .zip(&given)
        .filter(|(_, g)| g.is_none())
        .map(|(p, _)| p.clone())
        .collect();
    let mut defaults = default_names(&unlabelled, &taken).into_iter();
    Ok(given
        .iter()
        .map(|g| match g {
            Some(name) => name.clone(),
            None => defaults.next().expect("one default per unlabelled path"),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::exit_of;

    fn paths(p: &[&str]) -> Vec<PathBuf> {
        p.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn labels_parse_as_name_equals_path() {
        assert_eq!(
            parse("eb drift=runs/a=b").unwrap(),
            Label {
                name: "eb drift".into(),
                path: "runs/a=b".into()
            }
        );
        for bad in ["runs/a", "=runs/a", "eb=", " =x"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("expected NAME=PATH") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn default_names_are_the_shortest_tails_that_differ_never_the_whole_path() {
        let p = paths(&[
            "/scratch/me/cv-a/fold0",
            "/scratch/me/cv-b/fold0",
            "/scratch/me/eb-drift",
        ]);
        assert_eq!(
            default_names(&p, &[]),
            ["cv-a/fold0", "cv-b/fold0", "eb-drift"]
        );
        // A default never equals a label given to another run.
        assert_eq!(
            default_names(&paths(&["x/eb-drift"]), &["eb-drift"]),
            ["x/eb-drift"]
        );
        // The same path twice keeps one name (the pooling check refuses it elsewhere).
        assert_eq!(default_names(&paths(&["a/b", "a/b"]), &[]), ["a/b", "a/b"]);
        assert_eq!(default_names(&paths(&["runs/x/"]), &[]), ["x"]);
    }

    #[test]
    fn a_label_must_name_a_run_given_once() {
        let p = paths(&["runs/a", "runs/b"]);
        let l = |t: &str| parse(t).unwrap();
        assert_eq!(
            names(&[l("A=runs/a")], &p).unwrap(),
            ["A".to_string(), "b".into()]
        );
        assert_eq!(names(&[l("A=runs/a"), l("A=runs/a")], &p).unwrap()[0], "A");
        let e = names(&[l("A=runs/c")], &p).unwrap_err();
        assert_eq!(exit_of(&e), Exit::Usage);
        assert_eq!(
            e.to_string(),
            "--label A=runs/c: runs/c is not one of the runs given (runs/a, runs/b)"
        );
        let e = names(&[l("A=runs/a"), l("A=runs/b")], &p).unwrap_err();
        assert_eq!(exit_of(&e), Exit::Usage);
        assert!(e.to_string().contains("two runs, runs/a and runs/b"), "{e}");
        let e = names(&[l("A=runs/a"), l("B=runs/a")], &p).unwrap_err();
        assert!(e.to_string().contains("two names, A and B"), "{e}");
        // A configuration: one name for several runs, where a figure pools them.
        assert_eq!(
            configuration_names(&[l("A=runs/a"), l("A=runs/b")], &p).unwrap(),
            ["A", "A"]
        );
        let e = configuration_names(&[l("A=runs/a"), l("B=runs/a")], &p).unwrap_err();
        assert!(e.to_string().contains("two names, A and B"), "{e}");
    }
}
