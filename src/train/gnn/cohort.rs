//! `trainer cohort`: a connectome cohort summarised before any training, loaded and split exactly
//! as `train-gnn` loads and splits it: subjects and scans, scans per subject and the reference's
//! tiers (≥ 3 scans: velocity and acceleration; 2: velocity; 1: reconstruction only), ages and
//! Δt between visits, every defect the readers found, and what the test split and each fold get.
//! The data may be named by the reference project's `configs/paths.yaml`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};
use serde::Serialize;
use serde_json::json;

use super::prepared::{Prepared, Split, TEST_SIZE, prepare};
use crate::data::connectome::paths_yaml::PathsYaml;
use crate::data::connectome::preprocess::quantile_linear;
use crate::data::connectome::{CohortPaths, Subject};
use crate::outputs::group_table::Format;
use crate::settings::at_least_two;

mod render;
use render::render;

/// `trainer cohort`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct CohortSettings {
    /// The reference project's `configs/paths.yaml`: its `local.data.sc_connectome_schaefer400`,
    /// `local.data.morphology` and `local.data.subject_info_sc` name the data (relative paths
    /// from the project root, the folder above `configs/`). A path flag below wins over it.
    #[arg(long, value_name = "FILE")]
    pub paths_yaml: Option<PathBuf>,
    /// Directory of SC matrices (as `train-gnn --sc_dir`).
    #[arg(long, alias = "sc_dir")]
    pub sc_dir: Option<PathBuf>,
    /// Root of the morphology tree (as `train-gnn --morph_root`).
    #[arg(long, alias = "morph_root")]
    pub morph_root: Option<PathBuf>,
    /// Subject table (as `train-gnn --subject_info_csv`); without it ages are visit indices.
    #[arg(long, alias = "subject_info_csv")]
    pub subject_info_csv: Option<PathBuf>,
    /// Folds of the cross-validation (as `train-gnn --cv_folds`).
    #[arg(long, alias = "cv_folds", default_value_t = 5, value_parser = at_least_two)]
    pub cv_folds: usize,
    /// Seed of the test split (as `train-gnn --seed`/`--random-state`).
    #[arg(
        long,
        visible_alias = "random-state",
        alias = "random_state",
        default_value_t = 42
    )]
    pub seed: u64,
    /// `table` (text), `md` (Markdown) or `json` (everything, every defect listed).
    #[arg(long, value_enum, default_value = "table")]
    pub format: CohortFormat,
}

/// How `trainer cohort` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CohortFormat {
    Table,
    Md,
    Json,
}

/// Subjects of one part of the split, by what they can train.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub(crate) struct Part {
    pub subjects: usize,
    pub scans: usize,
    /// Consecutive visit pairs (forecasts a model can learn or be scored on).
    pub pairs: usize,
    pub three_or_more_scans: usize,
    pub two_scans: usize,
    pub one_scan: usize,
}

impl Part {
    fn of<'a>(subjects: impl IntoIterator<Item = &'a Subject>) -> Self {
        let mut p = Part::default();
        for s in subjects {
            let n = s.scans.len();
            p.subjects += 1;
            p.scans += n;
            p.pairs += n.saturating_sub(1);
            match n {
                0 => {}
                1 => p.one_scan += 1,
                2 => p.two_scans += 1,
                _ => p.three_or_more_scans += 1,
            }
        }
        p
    }
}

/// A distribution's summary (numpy's default linear quantiles: [`quantile_linear`]).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct Spread {
    pub n: usize,
    pub min: f64,
    pub p10: f64,
    pub median: f64,
    pub p90: f64,
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Option<Self> {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q = |p: f64| quantile_linear(&v, p);
        Some(Self {
            n: v.len(),
            min: v[0],
            p10: q(0.1),
            median: q(0.5),
            p90: q(0.9),
            max: v[v.len() - 1],
        })
    }

    fn line(&self) -> String {
        format!(
            "min {:.2}, p10 {:.2}, median {:.2}, p90 {:.2}, max {:.2}",
            self.min, self.p10, self.median, self.p90, self.max
        )
    }
}

/// What `trainer cohort` reports.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CohortSummary {
    pub paths: CohortPaths,
    pub nodes: usize,
    pub morphology_rois: usize,
    pub morphology_metrics: Vec<String>,
    pub sites: usize,
    pub all: Part,
    /// Subjects by their number of scans.
    pub scans_per_subject: BTreeMap<usize, usize>,
    /// Scans whose age came from the subject table (the others' age is their visit index).
    pub ages_from_table: usize,
    pub ages: Option<Spread>,
    /// Δt (years, or visits without ages) between consecutive visits, as training computes it.
    pub dt_consecutive: Option<Spread>,
    /// Δt from each subject's first to last visit (subjects with two scans or more).
    pub dt_first_to_last: Option<Spread>,
    /// How many of each defect the readers found (the counts of `run_meta.json`).
    pub defects: serde_json::Value,
    /// One line per defect (what `train-gnn` logs as warnings).
    pub warnings: Vec<String>,
    pub split: SplitSummary,
    /// What the split leaves without a forecast to learn or score.
    pub split_warnings: Vec<String>,
}

/// The test split and each fold.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SplitSummary {
    pub seed: u64,
    pub test_size: f64,
    pub cv_folds: usize,
    pub test: Part,
    pub trainval: Part,
    pub folds: Vec<FoldParts>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct FoldParts {
    pub fold: usize,
    pub train: Part,
    pub val: Part,
}

/// The data paths: the flags, else the paths file, else an error naming both.
fn cohort_paths(s: &CohortSettings) -> Result<CohortPaths> {
    let from_file = match &s.paths_yaml {
        Some(f) => Some(PathsYaml::read(f)?),
        None => None,
    };
    let pick = |flag: &Option<PathBuf>, key: &str, name: &str| -> Result<PathBuf> {
        match (flag, &from_file) {
            (Some(p), _) => Ok(p.clone()),
            (None, Some(f)) => f.path(key),
            (None, None) => bail!("--{name} is needed (or --paths-yaml naming the data)"),
        }
    };
    use crate::data::connectome::paths_yaml::{MORPH_KEY, SC_KEY, TABLE_KEY};
    let subject_info_csv = match (&s.subject_info_csv, &from_file) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(f)) if f.get(TABLE_KEY).is_some() => Some(f.path(TABLE_KEY)?),
        _ => None,
    };
    Ok(CohortPaths {
        sc_dir: pick(&s.sc_dir, SC_KEY, "sc-dir")?,
        morph_root: pick(&s.morph_root, MORPH_KEY, "morph-root")?,
        subject_info_csv,
    })
}

/// Loads, splits and summarises the cohort.
pub(crate) fn summarise(s: &CohortSettings) -> Result<CohortSummary> {
    let paths = cohort_paths(s)?;
    let prep = prepare(
        &paths,
        &Split {
            folds: (0..s.cv_folds).collect(),
            cv_folds: s.cv_folds,
            seed: s.seed,
            topo_bins: 32,
        },
    )?;
    Ok(summary_of(paths, &prep, s))
}

fn summary_of(paths: CohortPaths, prep: &Prepared, s: &CohortSettings) -> CohortSummary {
    let c = &prep.cohort;
    let part = |idx: &[usize]| Part::of(idx.iter().map(|&i| &c.subjects[i]));
    let mut scans_per_subject = BTreeMap::new();
    let (mut ages, mut dts, mut spans, mut from_table) = (vec![], vec![], vec![], 0);
    for sub in &c.subjects {
        *scans_per_subject.entry(sub.scans.len()).or_insert(0) += 1;
        for (v, scan) in sub.scans.iter().enumerate() {
            from_table += usize::from(scan.age_from_table);
            if scan.age_from_table {
                ages.push(scan.age);
            }
            if v > 0 {
                dts.push(super::protocol::fold_data::delta_t(&sub.scans, v - 1, v));
            }
        }
        if sub.scans.len() > 1 {
            spans.push(super::protocol::fold_data::delta_t(
                &sub.scans,
                0,
                sub.scans.len() - 1,
            ));
        }
    }
    let folds: Vec<FoldParts> = prep
        .folds
        .iter()
        .map(|f| FoldParts {
            fold: f.fold,
            train: part(&f.train),
            val: part(&f.val),
        })
        .collect();
    let test = part(&prep.test);
    let mut split_warnings = Vec::new();
    if test.pairs == 0 {
        split_warnings.push(
            "the test subjects have no two scans: the test metrics would score each visit's \
             reconstruction, not a forecast (more subjects with follow-ups are needed)"
                .to_string(),
        );
    }
    for f in &folds {
        if f.val.pairs == 0 {
            split_warnings.push(format!(
                "fold {}: no validation subject has two scans: its validation forecast metrics \
                 are undefined (fewer --cv-folds, or more subjects with follow-ups)",
                f.fold
            ));
        }
        if f.train.pairs == 0 {
            split_warnings.push(format!(
                "fold {}: no training subject has two scans: nothing to forecast from",
                f.fold
            ));
        }
    }
    CohortSummary {
        paths,
        nodes: c.n_nodes,
        morphology_rois: c.rois.len(),
        morphology_metrics: c.metrics.clone(),
        sites: c.sites.len(),
        all: Part::of(&c.subjects),
        scans_per_subject,
        ages_from_table: from_table,
        ages: Spread::of(ages),
        dt_consecutive: Spread::of(dts),
        dt_first_to_last: Spread::of(spans),
        defects: prep.report.counts(),
        warnings: prep.report.warnings(),
        split: SplitSummary {
            seed: s.seed,
            test_size: TEST_SIZE,
            cv_folds: s.cv_folds,
            test,
            trainval: part(&prep.trainval),
            folds,
        },
        split_warnings,
    }
}

/// `trainer cohort`.
pub(crate) fn run(s: CohortSettings) -> Result<()> {
    let sum = summarise(&s)?;
    let text = match s.format {
        CohortFormat::Json => serde_json::to_string_pretty(&json!(sum))? + "\n",
        CohortFormat::Table => render(&sum, Format::Table),
        CohortFormat::Md => render(&sum, Format::Md),
    };
    print!("{text}");
    Ok(())
}
