//! `trainer predict RUN_DIR … --out DIR`: a run's model predicts connectomes and writes them in
//! the input format, N×N CSV of raw weights (symmetric, zero diagonal; our SC reader reads them
//! back), with an index `predictions.csv` (subject, start scan, start age, target age, Δt, file,
//! the true scan where one exists). Horizons: `--next-visit` (visit 1 from visit 0, the test
//! protocol), `--target-age A`, `--dt-years D` or `--ages A,B,…` (a trajectory per subject);
//! `--population` adds the mean predicted matrix per one-year age bin; `--plot` draws truth,
//! prediction, identity and both differences for every prediction with a true scan.
//!
//! Everything is written into a staging directory renamed to `--out` at the end: an error
//! (a subject not in the data, a target age before the start scan, a run without a checkpoint)
//! leaves nothing behind.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use ndarray::Array2;

use super::batch::delta_t;
use super::saved_run::{DataOverrides, Forecast, Horizon, SavedRun};
use crate::backend::{self, DeviceSettings};
use crate::outputs::heatmap;
use crate::settings::non_negative;

/// Which subjects are predicted when `--subjects` is not given.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PredictSplit {
    All,
    /// The run's held-out test subjects.
    Test,
    /// The validation subjects of the checkpoint's fold.
    Val,
}

/// How far ahead (exactly one).
#[derive(clap::Args, Debug, Clone)]
#[group(required = true, multiple = false)]
pub struct HorizonArgs {
    /// Visit 1 from visit 0 (subjects with two scans or more), as the test protocol.
    #[arg(long)]
    pub next_visit: bool,
    /// The age (years) to predict at, from visit 0.
    #[arg(long, value_parser = non_negative)]
    pub target_age: Option<f64>,
    /// Years after visit 0.
    #[arg(long, value_parser = non_negative)]
    pub dt_years: Option<f64>,
    /// Ages of a trajectory, comma-separated (ages before a subject's start scan are skipped).
    #[arg(long, value_delimiter = ',', value_parser = non_negative)]
    pub ages: Option<Vec<f64>>,
}

/// `trainer predict`'s settings.
#[derive(clap::Args, Debug, Clone)]
pub struct PredictSettings {
    /// The run directory of a `train-gnn` run.
    pub run_dir: PathBuf,
    /// `best`, `last` or a checkpoint file (as eval-gnn).
    #[arg(long, default_value = "best")]
    pub checkpoint: String,
    #[command(flatten)]
    pub paths: DataOverrides,
    /// Subjects: comma-separated ids, or a file with one id per line.
    #[arg(long)]
    pub subjects: Option<String>,
    /// The subjects when --subjects is not given.
    #[arg(long, value_enum, default_value = "all")]
    pub split: PredictSplit,
    #[command(flatten)]
    pub horizon: HorizonArgs,
    /// Also write the mean predicted matrix per one-year age bin (`population/`).
    #[arg(long)]
    pub population: bool,
    /// Also draw truth / prediction / identity / differences for predictions with a true scan
    /// (`plots/<subject>_<session>.png`).
    #[arg(long)]
    pub plot: bool,
    /// A file of ROI names in atlas order (one per line, e.g. Schaefer `7Networks_LH_Vis_1`):
    /// network boundaries are marked on the heatmaps.
    #[arg(long)]
    pub roi_names: Option<PathBuf>,
    /// Output directory (must not exist, or be empty).
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub device: DeviceSettings,
}

/// One prediction to make.
struct Item {
    subject: usize,
    dt: f64,
    target_age: f64,
    /// The visit at that Δt, if the subject has one.
    truth: Option<usize>,
    /// The file name under `sc/`.
    file: String,
}

/// The cohort's subject indices named by `--subjects` (ids or a file of ids).
fn named_subjects(run: &SavedRun, spec: &str) -> Result<Vec<usize>> {
    let ids: Vec<String> = if Path::new(spec).is_file() {
        std::fs::read_to_string(spec)
            .with_context(|| format!("--subjects {spec}: cannot read"))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    } else {
        spec.split(',').map(|s| s.trim().to_string()).collect()
    };
    let cohort = &run.prep.cohort;
    ids.iter()
        .map(|id| {
            cohort
                .subjects
                .iter()
                .position(|s| &s.id == id)
                .with_context(|| {
                    format!(
                        "--subjects: {id} is not a subject of the cohort ({} subjects with SC and \
                         morphology)",
                        cohort.subjects.len()
                    )
                })
        })
        .collect()
}

/// The visit of `subject` at `dt` years after visit 0, if any.
fn visit_at(run: &SavedRun, subject: usize, dt: f64) -> Option<usize> {
    let scans = run.data.scans(subject);
    (1..scans.len()).find(|&v| (delta_t(scans, 0, v) - dt).abs() < 1e-3)
}

fn plan(run: &SavedRun, s: &PredictSettings, subjects: &[usize]) -> Result<Vec<Item>> {
    let h = &s.horizon;
    let mut items = Vec::new();
    for &sub in subjects {
        let subject = &run.prep.cohort.subjects[sub];
        let scans = &subject.scans;
        let age0 = scans[0].age;
        let at = |dt: f64, truth: Option<usize>| {
            let session = match truth {
                Some(v) => scans[v].session.clone(),
                None => format!("ses-age{:.2}", age0 + dt),
            };
            Item {
                subject: sub,
                dt,
                target_age: age0 + dt,
                truth,
                file: format!("{}_{session}.csv", subject.id),
            }
        };
        if h.next_visit {
            if scans.len() >= 2 {
                items.push(at(delta_t(scans, 0, 1), Some(1)));
            }
        } else if let Some(a) = h.target_age {
            if a < age0 {
                bail!(
                    "--target-age {a}: before the start scan of {} ({}, age {age0})",
                    subject.id,
                    scans[0].scan_id
                );
            }
            items.push(at(a - age0, visit_at(run, sub, a - age0)));
        } else if let Some(d) = h.dt_years {
            items.push(at(d, visit_at(run, sub, d)));
        } else if let Some(ages) = &h.ages {
            for &a in ages.iter().filter(|&&a| a >= age0) {
                items.push(at(a - age0, visit_at(run, sub, a - age0)));
            }
        }
    }
    if items.is_empty() {
        bail!("nothing to predict: no subject has a target for this horizon");
    }
    Ok(items)
}

/// Writes an N×N matrix as CSV (no header): the upper triangle mirrored, zero diagonal.
pub fn write_matrix(path: &Path, m: &Array2<f32>) -> Result<()> {
    let n = m.nrows();
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
    );
    for i in 0..n {
        let row: Vec<String> = (0..n)
            .map(|j| match i.cmp(&j) {
                std::cmp::Ordering::Equal => "0".to_string(),
                std::cmp::Ordering::Less => m[(i, j)].to_string(),
                std::cmp::Ordering::Greater => m[(j, i)].to_string(),
            })
            .collect();
        writeln!(f, "{}", row.join(","))?;
    }
    f.flush()?;
    Ok(())
}

/// `trainer predict`.
pub fn run(s: PredictSettings) -> Result<()> {
    if s.out.exists() && std::fs::read_dir(&s.out).map_or(true, |mut d| d.next().is_some()) {
        bail!("--out {}: exists and is not empty", s.out.display());
    }
    let run = SavedRun::open(&s.run_dir, &s.checkpoint, &s.paths)?;
    let subjects = match &s.subjects {
        Some(spec) => named_subjects(&run, spec)?,
        None => match s.split {
            PredictSplit::All => (0..run.prep.cohort.subjects.len()).collect(),
            PredictSplit::Test => run.prep.test.clone(),
            PredictSplit::Val => run.prep.folds[0].val.clone(),
        },
    };
    let items = plan(&run, &s, &subjects)?;
    let names = match &s.roi_names {
        Some(p) => Some(heatmap::read_roi_names(p, run.data.n_nodes())?),
        None => None,
    };
    let who: Vec<usize> = items.iter().map(|i| i.subject).collect();
    let dts: Vec<f64> = items.iter().map(|i| i.dt).collect();
    let targets: Vec<Option<usize>> = items.iter().map(|i| i.truth).collect();
    let horizon = if s.horizon.next_visit {
        Horizon::NextVisit
    } else {
        Horizon::Years {
            dts: &dts,
            targets: &targets,
        }
    };
    let job = Forecast {
        run: &run,
        subjects: &who,
        horizon,
    };
    let preds = backend::dispatch_checked(s.device.placement()?, job)?;

    let parent = s.out.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    let staging = parent.join(format!(".predict-{}.tmp", std::process::id()));
    let written = std::fs::create_dir(&staging)
        .with_context(|| format!("cannot create {}", staging.display()))
        .and_then(|_| {
            write_all(
                &staging,
                &run,
                &s,
                &items,
                &preds.matrices,
                names.as_deref(),
            )
        });
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    if s.out.exists() {
        std::fs::remove_dir(&s.out)?;
    }
    std::fs::rename(&staging, &s.out)
        .with_context(|| format!("cannot move the predictions to {}", s.out.display()))?;
    eprintln!(
        "[predict] {} predictions of {} subjects (fold {}, {}); wrote {}",
        items.len(),
        subjects.len(),
        run.fold,
        run.ck_path.display(),
        s.out.display()
    );
    Ok(())
}

/// Writes the matrices, `predictions.csv`, the population means and the plots into `dir`.
fn write_all(
    dir: &Path,
    run: &SavedRun,
    s: &PredictSettings,
    items: &[Item],
    preds: &[Array2<f32>],
    names: Option<&[String]>,
) -> Result<()> {
    std::fs::create_dir(dir.join("sc"))?;
    let mut index = csv::Writer::from_path(dir.join("predictions.csv"))?;
    index.write_record([
        "subject",
        "start_scan",
        "start_age",
        "target_age",
        "dt_years",
        "file",
        "true_scan",
    ])?;
    let cohort = &run.prep.cohort;
    for (item, m) in items.iter().zip(preds) {
        let subject = &cohort.subjects[item.subject];
        let file = format!("sc/{}", item.file);
        write_matrix(&dir.join(&file), m)?;
        index.write_record([
            subject.id.clone(),
            subject.scans[0].scan_id.clone(),
            subject.scans[0].age.to_string(),
            item.target_age.to_string(),
            item.dt.to_string(),
            file,
            item.truth
                .map_or(String::new(), |v| subject.scans[v].scan_id.clone()),
        ])?;
    }
    index.flush()?;
    if s.population {
        write_population(dir, items, preds)?;
    }
    if s.plot {
        std::fs::create_dir(dir.join("plots"))?;
        for (item, m) in items.iter().zip(preds) {
            let Some(v) = item.truth else { continue };
            let scans = &cohort.subjects[item.subject].scans;
            let name = item.file.trim_end_matches(".csv");
            let fig = heatmap::Comparison {
                title: format!("{name} (Δt {:.2} y)", item.dt),
                truth: &scans[v].a_raw,
                prediction: m,
                start: &scans[0].a_raw,
                roi_names: names,
            };
            heatmap::render(&fig, &dir.join("plots").join(format!("{name}.png")))?;
        }
    }
    Ok(())
}

/// `population/age<k>.csv`: the mean predicted matrix of the predictions whose target age is
/// in [k, k+1), and `population.csv` (bin, n, file).
fn write_population(dir: &Path, items: &[Item], preds: &[Array2<f32>]) -> Result<()> {
    let mut bins: BTreeMap<i64, (usize, Array2<f64>)> = BTreeMap::new();
    for (item, m) in items.iter().zip(preds) {
        let e = bins
            .entry(item.target_age.floor() as i64)
            .or_insert_with(|| (0, Array2::zeros(m.raw_dim())));
        e.0 += 1;
        e.1 += &m.mapv(f64::from);
    }
    std::fs::create_dir(dir.join("population"))?;
    let mut index = csv::Writer::from_path(dir.join("population.csv"))?;
    index.write_record(["age_from", "age_to", "n", "file"])?;
    for (k, (n, sum)) in bins {
        let file = format!("population/age{k}.csv");
        write_matrix(&dir.join(&file), &sum.mapv(|v| (v / n as f64) as f32))?;
        index.write_record([k.to_string(), (k + 1).to_string(), n.to_string(), file])?;
    }
    index.flush()?;
    Ok(())
}
