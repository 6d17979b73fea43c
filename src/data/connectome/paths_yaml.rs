//! The reference project's `configs/paths.yaml`: where its data lives. Read with the subset of
//! YAML its own loader (`src/configs/paths.py`, `load_simple_yaml`) accepts: `key: value` and
//! `key:` opening a nested mapping, nesting by space indentation, `#` comments, no tabs. A value
//! is a string (quotes removed), a number, a boolean or null, as there. Relative paths are
//! relative to the project root, the folder above `configs/` (`resolve_repo_path`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::CohortPaths;

/// The keys of the reference's scripts (`scripts/report_clg_ode_tiers.py`, its job scripts).
pub const SC_KEY: &str = "local.data.sc_connectome_schaefer400";
pub const MORPH_KEY: &str = "local.data.morphology";
pub const TABLE_KEY: &str = "local.data.subject_info_sc";

/// One value of the file: a nested mapping or a scalar as written (quotes removed).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Map(BTreeMap<String, Node>),
    Scalar(String),
}

/// A parsed `paths.yaml` and the project root its relative paths start from.
#[derive(Debug, Clone)]
pub struct PathsYaml {
    pub file: PathBuf,
    pub root: PathBuf,
    pub tree: BTreeMap<String, Node>,
}

impl PathsYaml {
    /// Reads `file`; errors name the file and line.
    pub fn read(file: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("{}: cannot read the paths file", file.display()))?;
        let tree = parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
        // configs/paths.yaml → the project root is the parent of configs/.
        let root = abs
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Ok(Self {
            file: file.to_path_buf(),
            root,
            tree,
        })
    }

    /// The scalar at `dotted` (`local.data.morphology`), or `None` when a part is missing.
    pub fn get(&self, dotted: &str) -> Option<&str> {
        let mut parts = dotted.split('.');
        let mut node = self.tree.get(parts.next()?)?;
        for part in parts {
            match node {
                Node::Map(m) => node = m.get(part)?,
                Node::Scalar(_) => return None,
            }
        }
        match node {
            Node::Scalar(s) => Some(s),
            Node::Map(_) => None,
        }
    }

    /// The path at `dotted`, relative paths resolved from the project root; an error names the
    /// key and the file when it is missing, empty or not a path.
    pub fn path(&self, dotted: &str) -> Result<PathBuf> {
        let Some(value) = self.get(dotted) else {
            bail!(
                "{}: no key {dotted} (expected a path there, as the reference's configs/paths.yaml has)",
                self.file.display()
            );
        };
        if value.is_empty() || matches!(value.to_lowercase().as_str(), "null" | "none" | "~") {
            bail!(
                "{}: {dotted} is empty (expected a path)",
                self.file.display()
            );
        }
        let p = PathBuf::from(value);
        Ok(if p.is_absolute() {
            p
        } else {
            self.root.join(p)
        })
    }

    /// The cohort the file names: SC matrices, morphology and the subject table (the table is
    /// optional: a file without its key gives none).
    pub fn cohort(&self) -> Result<CohortPaths> {
        Ok(CohortPaths {
            sc_dir: self.path(SC_KEY)?,
            morph_root: self.path(MORPH_KEY)?,
            subject_info_csv: match self.get(TABLE_KEY) {
                Some(_) => Some(self.path(TABLE_KEY)?),
                None => None,
            },
        })
    }
}

/// Parses the subset of YAML above; an error names the 1-based line.
pub fn parse(text: &str) -> Result<BTreeMap<String, Node>, String> {
    // A stack of (indent, path of keys) of the open mappings; the root has indent -1.
    let mut root = BTreeMap::new();
    let mut open: Vec<(i64, Vec<String>)> = vec![(-1, Vec::new())];
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        if raw.contains('\t') {
            return Err(format!("line {line_no}: a tab (indent with spaces)"));
        }
        let line = raw.split('#').next().unwrap_or("").trim_end();
        if line.trim().is_empty() {
            continue;
        }
        let indent = (line.len() - line.trim_start_matches(' ').len()) as i64;
        let Some((key, value)) = line.trim_start().split_once(':') else {
            return Err(format!("line {line_no}: expected `key: value` or `key:`"));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("line {line_no}: an empty key"));
        }
        while open.last().is_some_and(|(at, _)| indent <= *at) {
            open.pop();
        }
        let Some((_, parent)) = open.last() else {
            return Err(format!("line {line_no}: indentation"));
        };
        let mut path = parent.clone();
        path.push(key.to_string());
        let value = value.trim();
        let node = if value.is_empty() {
            Node::Map(BTreeMap::new())
        } else {
            Node::Scalar(unquote(value).to_string())
        };
        insert(&mut root, &path, node);
        if value.is_empty() {
            open.push((indent, path));
        }
    }
    Ok(root)
}

fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

fn insert(map: &mut BTreeMap<String, Node>, path: &[String], node: Node) {
    let (last, parents) = path.split_last().expect("a key");
    let mut cur = map;
    for p in parents {
        let next = cur
            .entry(p.clone())
            .or_insert_with(|| Node::Map(BTreeMap::new()));
        if let Node::Scalar(_) = next {
            *next = Node::Map(BTreeMap::new());
        }
        let Node::Map(m) = next else { unreachable!() };
        cur = m;
    }
    cur.insert(last.clone(), node);
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFERENCE: &str = "# Path registry\nlocal:\n  data:\n    raw: data/raw\n    \
        sc_connectome_schaefer400: data/processed/sc_connectome/schaefer400\n    \
        morphology: \"data/processed/morphology\"  # quoted\n    \
        subject_info_sc: data/processed/table/subject_info_sc.csv\n  outputs:\n    \
        logs: outputs/logs\nhpc:\n  freesurfer:\n    bids_root: /GPFS/x/smri\n";

    #[test]
    fn the_references_layout_resolves_from_the_project_root() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("configs")).unwrap();
        let file = t.path().join("configs/paths.yaml");
        std::fs::write(&file, REFERENCE).unwrap();
        let p = PathsYaml::read(&file).unwrap();
        let c = p.cohort().unwrap();
        let root = std::path::absolute(t.path()).unwrap();
        assert_eq!(
            c.sc_dir,
            root.join("data/processed/sc_connectome/schaefer400")
        );
        assert_eq!(c.morph_root, root.join("data/processed/morphology"));
        assert_eq!(
            c.subject_info_csv,
            Some(root.join("data/processed/table/subject_info_sc.csv"))
        );
        assert_eq!(
            p.path("hpc.freesurfer.bids_root").unwrap(),
            PathBuf::from("/GPFS/x/smri")
        );
        assert_eq!(p.get("local.outputs.logs"), Some("outputs/logs"));
    }

    #[test]
    fn errors_name_the_line_or_the_key() {
        assert!(parse("local:\n\tdata: x\n").unwrap_err().contains("line 2"));
        assert!(
            parse("local:\n  just text\n")
                .unwrap_err()
                .contains("line 2")
        );
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("paths.yaml");
        std::fs::write(&file, "local:\n  data:\n    morphology: m\n").unwrap();
        let e = PathsYaml::read(&file)
            .unwrap()
            .cohort()
            .unwrap_err()
            .to_string();
        assert!(e.contains(SC_KEY) && e.contains("paths.yaml"), "{e}");
    }
}
