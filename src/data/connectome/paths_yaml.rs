//! The reference project's `configs/paths.yaml`: where its data lives. Read with the subset of
//! YAML its own loader (`src/configs/paths.py`, `load_simple_yaml`) accepts: `key: value` and
//! `key:` opening a nested mapping, nesting by space indentation, `#` comments, no tabs. A value
//! is a string (quotes removed), a number, a boolean or null, as there. Relative paths are
//! relative to the project root, the folder above `configs/` (`resolve_repo_path`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

#[cfg(test)]
use super::CohortPaths;

/// The keys of the reference's scripts (`scripts/report_clg_ode_tiers.py`, its job scripts).
pub(crate) const SC_KEY: &str = "local.data.sc_connectome_schaefer400";
pub(crate) const MORPH_KEY: &str = "local.data.morphology";
pub(crate) const TABLE_KEY: &str = "local.data.subject_info_sc";

/// The data flags of `train-gnn`, `eval-gnn`, `predict` and `plot-sc` (their snake-case ids)
/// and the key of the file that names each; the subject table is optional.
pub(crate) const DATA_FLAGS: &[(&str, &str)] = &[
    ("sc_dir", SC_KEY),
    ("morph_root", MORPH_KEY),
    ("subject_info_csv", TABLE_KEY),
];

/// The key naming `train-gnn`'s `--results_dir` for `--model model`, as the reference's
/// scripts read it: `train_clg_ode.py`, `train_gnn_baseline.py`, `train_vector_lstm_baseline.py`;
/// the models of ours that the reference lacks write under `local.outputs.results`.
pub(crate) fn results_key(model: &str) -> &'static str {
    match model {
        "clg-ode" => "local.outputs.clg_ode",
        "gcn" => "local.outputs.gnn_baseline",
        "vector-lstm" => "local.outputs.vector_lstm_baseline",
        _ => "local.outputs.results",
    }
}

/// The flags of `command` a paths file can give (flag id, key), for `--model model`; `None` for
/// a command that reads no paths file. The reference's baseline scripts (`gcn`, `vector-lstm`)
/// take no subject table, so the file gives them none either.
pub(crate) fn wanted_flags(
    command: &str,
    model: &str,
) -> Option<Vec<(&'static str, &'static str)>> {
    let data = DATA_FLAGS.iter().copied();
    match command {
        "train-gnn" => {
            let mut v: Vec<_> = data
                .filter(|(_, key)| !(*key == TABLE_KEY && matches!(model, "gcn" | "vector-lstm")))
                .collect();
            v.push(("results_dir", results_key(model)));
            Some(v)
        }
        "eval-gnn" | "predict" | "plot-sc" => Some(data.collect()),
        _ => None,
    }
}

/// One value of the file: a nested mapping or a scalar as written (quotes removed).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Map(BTreeMap<String, Node>),
    Scalar(String),
}

/// A parsed `paths.yaml` and the project root its relative paths start from.
#[derive(Debug, Clone)]
pub(crate) struct PathsYaml {
    pub file: PathBuf,
    pub root: PathBuf,
    pub tree: BTreeMap<String, Node>,
}

impl PathsYaml {
    /// Reads `file`; errors name the file and line.
    pub(crate) fn read(file: &Path) -> Result<Self> {
        let size = std::fs::metadata(file)
            .with_context(|| format!("{}: cannot read the paths file", file.display()))?
            .len();
        if size > MAX_BYTES {
            bail!(
                "{}: {size} bytes, more than a paths file holds (at most {MAX_BYTES})",
                file.display()
            );
        }
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("{}: cannot read the paths file", file.display()))?;
        let tree = parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        let abs = std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf());
        // configs/paths.yaml → the project root is the parent of configs/, resolved as the
        // reference resolves it (`Path(__file__).resolve()`: no `..`, links followed).
        let configs = abs.parent().map(Path::to_path_buf).unwrap_or_default();
        let configs = std::fs::canonicalize(&configs).unwrap_or(configs);
        let root = configs.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Self {
            file: file.to_path_buf(),
            root,
            tree,
        })
    }

    /// The scalar at `dotted` (`local.data.morphology`), or `None` when a part is missing.
    pub(crate) fn get(&self, dotted: &str) -> Option<&str> {
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
    pub(crate) fn path(&self, dotted: &str) -> Result<PathBuf> {
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
        if value.contains("$(") || value.contains('`') || value.contains("${") {
            bail!(
                "{}: {dotted} = {value:?}: shell syntax in a path; trainer runs no shell and \
                 expands nothing: write the path itself",
                self.file.display()
            );
        }
        let p = PathBuf::from(value);
        if !p.is_absolute() && p.components().any(|c| c == std::path::Component::ParentDir) {
            bail!(
                "{}: {dotted} = {value:?}: a relative path leaves the project root ({}) with \
                 `..`; write it as an absolute path",
                self.file.display(),
                self.root.display()
            );
        }
        Ok(if p.is_absolute() {
            p
        } else {
            self.root.join(p)
        })
    }

    /// The flags among `wanted` (flag id, dotted key) that this file names, with their resolved
    /// absolute paths: (flag, path, key). A key the file lacks is left out (the caller says
    /// whether it was needed); a key present but empty or not a path is an error.
    pub(crate) fn flags(&self, wanted: &[(&str, &str)]) -> Result<Vec<(String, PathBuf, String)>> {
        let mut out = Vec::new();
        for &(flag, key) in wanted {
            if self.get(key).is_some() {
                let p = self.path(key)?;
                out.push((flag.to_string(), p, key.to_string()));
            }
        }
        Ok(out)
    }

    /// The cohort the file names: SC matrices, morphology and the subject table (the table is
    /// optional: a file without its key gives none).
    #[cfg(test)]
    pub(crate) fn cohort(&self) -> Result<CohortPaths> {
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

/// The largest paths file read (the reference's is 2 KB).
pub(crate) const MAX_BYTES: u64 = 1 << 20;
/// The deepest nesting read (the reference's is 3 levels).
pub(crate) const MAX_DEPTH: usize = 16;

/// Keys of the sections trainer reads, as the reference's `configs/paths.yaml` has them: a key
/// outside these lists there is a typo more often than a plan, and is refused with the list.
const KNOWN: &[(&str, &[&str])] = &[
    (
        "local.data",
        &[
            "raw",
            "external",
            "interim",
            "processed",
            "sc_connectome_schaefer400",
            "morphology",
            "subject_info_sc",
        ],
    ),
    (
        "local.outputs",
        &[
            "logs",
            "results",
            "figures",
            "clg_ode",
            "vector_lstm_baseline",
            "gnn_baseline",
        ],
    ),
];

/// Parses the subset of YAML above; an error names the 1-based line. Everything outside the
/// subset is refused rather than read another way than YAML (or the reference's loader) would:
/// anchors, aliases, tags, flow collections, block scalars, sequences, several documents, a `#`
/// inside a value (YAML keeps it, the reference's loader cuts the value there), a key given twice,
/// nesting deeper than [`MAX_DEPTH`].
pub(crate) fn parse(text: &str) -> Result<BTreeMap<String, Node>, String> {
    // A stack of (indent, path of keys) of the open mappings; the root has indent -1.
    let mut root = BTreeMap::new();
    let mut open: Vec<(i64, Vec<String>)> = vec![(-1, Vec::new())];
    let mut seen = std::collections::BTreeSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        if raw.contains('\t') {
            return Err(format!("line {line_no}: a tab (indent with spaces)"));
        }
        if let Some(c) = raw.chars().find(|c| c.is_control()) {
            return Err(format!(
                "line {line_no}: a control character (U+{:04X})",
                u32::from(c)
            ));
        }
        let (content, comment) = match raw.split_once('#') {
            Some((before, after)) => (before, Some(after)),
            None => (raw, None),
        };
        let line = content.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if comment.is_some() && !content.ends_with([' ', '\t']) {
            return Err(format!(
                "line {line_no}: `#` inside a value: YAML keeps it as part of the value, the \
                 reference's loader cuts the value there; rename the path so it has no `#`"
            ));
        }
        let body = line.trim_start();
        if body.starts_with("---") || body.starts_with("...") || body.starts_with('%') {
            return Err(format!(
                "line {line_no}: YAML documents and directives (`---`, `...`, `%`) are not \
                 read: one mapping of `key: value` lines"
            ));
        }
        if body.starts_with("- ") || body == "-" {
            return Err(format!(
                "line {line_no}: a sequence item (`- `): a paths file is `key: value` lines"
            ));
        }
        let indent = (line.len() - body.len()) as i64;
        let Some((key, value)) = body.split_once(':') else {
            return Err(format!("line {line_no}: expected `key: value` or `key:`"));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("line {line_no}: an empty key"));
        }
        let value = value.trim();
        for text in [key, value] {
            if let Some(c) = text.chars().next().filter(|c| "&*!|>[{@`".contains(*c)) {
                return Err(format!(
                    "line {line_no}: `{c}` opens YAML syntax this reader does not follow \
                     (anchors, aliases, tags, block scalars, flow collections): write the plain \
                     value, as the reference's configs/paths.yaml does"
                ));
            }
        }
        while open.last().is_some_and(|(at, _)| indent <= *at) {
            open.pop();
        }
        let Some((_, parent)) = open.last() else {
            return Err(format!("line {line_no}: indentation"));
        };
        if parent.len() >= MAX_DEPTH {
            return Err(format!(
                "line {line_no}: nested deeper than {MAX_DEPTH} levels (the reference's file \
                 has 3)"
            ));
        }
        let mut path = parent.clone();
        path.push(key.to_string());
        let dotted = path.join(".");
        if !seen.insert(dotted.clone()) {
            return Err(format!("line {line_no}: `{dotted}` is given twice"));
        }
        let section = parent.join(".");
        if let Some((_, keys)) = KNOWN.iter().find(|(s, _)| *s == section)
            && !keys.contains(&key)
        {
            return Err(format!(
                "line {line_no}: unknown key `{dotted}` (the reference's {section} has: {})",
                keys.join(", ")
            ));
        }
        let node = if value.is_empty() {
            Node::Map(BTreeMap::new())
        } else {
            Node::Scalar(unquote(value).to_string())
        };
        if !insert(&mut root, &path, node) {
            return Err(format!(
                "line {line_no}: `{dotted}` is inside a key that already has a value"
            ));
        }
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

/// Inserts `node` at `path`; `false` when a parent on the way is a scalar.
fn insert(map: &mut BTreeMap<String, Node>, path: &[String], node: Node) -> bool {
    let Some((last, parents)) = path.split_last() else {
        return false;
    };
    let mut cur = map;
    for p in parents {
        let next = cur
            .entry(p.clone())
            .or_insert_with(|| Node::Map(BTreeMap::new()));
        let Node::Map(m) = next else {
            return false;
        };
        cur = m;
    }
    cur.insert(last.clone(), node);
    true
}

#[cfg(test)]
mod tests;
