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
//! or SIGINT/SIGTERM while writing leaves nothing behind, and a staging directory a killed run
//! left is removed by the next one.
//!
//! Horizons are checked against what the fold's training subjects cover (Δt up to their
//! longest follow-up, ages within theirs); `--extrapolate` allows beyond. A forecast that is
//! not finite is an error naming the subject and horizon, never a file. Every file name is
//! distinct (`<subject>_ses-age<age>.csv`, a suffix when two ages round alike), and
//! `predictions.csv` says which part of the run's split each subject was in.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result, bail};
use ndarray::Array2;
use signal_hook::consts::{SIGINT, SIGTERM};

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
    #[arg(long, value_parser = non_negative, allow_negative_numbers = true)]
    pub target_age: Option<f64>,
    /// Years after visit 0, one or several (comma-separated: one prediction per subject and
    /// value).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = non_negative,
        allow_negative_numbers = true
    )]
    pub dt_years: Option<Vec<f64>>,
    /// Ages of a trajectory, comma-separated (ages before a subject's start scan are skipped).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = non_negative,
        allow_negative_numbers = true
    )]
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
    /// Allow horizons beyond what the fold's training subjects cover (longer Δt, ages outside
    /// theirs): the model then extrapolates.
    #[arg(long)]
    pub extrapolate: bool,
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
    let looks_like_file = spec.contains('/') || spec.ends_with(".txt") || spec.ends_with(".csv");
    let ids: Vec<String> = if Path::new(spec).is_file() {
        let ids: Vec<String> = std::fs::read_to_string(spec)
            .with_context(|| format!("--subjects {spec}: cannot read"))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        if ids.is_empty() {
            bail!("--subjects {spec}: the file names no subject (one id per line expected)");
        }
        ids
    } else if looks_like_file {
        bail!(
            "--subjects {spec}: no such file (a file of ids, one per line, or ids separated by commas)"
        );
    } else {
        spec.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
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

/// What the fold's training subjects cover: their longest Δt from visit 0, and the range of
/// their scan ages.
struct Coverage {
    dt_max: f64,
    age_min: f64,
    age_max: f64,
}

impl Coverage {
    fn of(run: &SavedRun) -> Self {
        let train = run
            .prep
            .folds
            .iter()
            .find(|f| f.fold == run.fold)
            .map_or_else(Vec::new, |f| f.train.clone());
        let mut c = Coverage {
            dt_max: 0.0,
            age_min: f64::INFINITY,
            age_max: f64::NEG_INFINITY,
        };
        for &s in &train {
            let scans = run.data.scans(s);
            for (v, scan) in scans.iter().enumerate() {
                c.age_min = c.age_min.min(scan.age);
                c.age_max = c.age_max.max(scan.age);
                if v > 0 {
                    c.dt_max = c.dt_max.max(delta_t(scans, 0, v));
                }
            }
        }
        c
    }

    /// Refuses `dt` (years after a start at `age0`) beyond the coverage, unless extrapolating.
    fn check(&self, dt: f64, age0: f64, extrapolate: bool, who: &str) -> Result<()> {
        let target = age0 + dt;
        let (dt_ok, age_ok) = (
            dt <= self.dt_max + 1e-9,
            target >= self.age_min - 1e-9 && target <= self.age_max + 1e-9,
        );
        if extrapolate || (dt_ok && age_ok) {
            return Ok(());
        }
        bail!(
            "{who}: Δt {dt} y to age {target} is outside what the fold's training subjects cover \
             (Δt up to {:.2} y, ages {:.2}–{:.2}); pass --extrapolate to predict there anyway",
            self.dt_max,
            self.age_min,
            self.age_max
        )
    }
}

/// `age` as a file-name part: at most three decimals, trailing zeros dropped (`12`, `12.001`).
fn age_label(age: f64) -> String {
    let s = format!("{age:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn plan(run: &SavedRun, s: &PredictSettings, subjects: &[usize]) -> Result<Vec<Item>> {
    let h = &s.horizon;
    let coverage = Coverage::of(run);
    let mut items = Vec::new();
    let mut files = std::collections::BTreeSet::new();
    for &sub in subjects {
        let subject = &run.prep.cohort.subjects[sub];
        let scans = &subject.scans;
        let age0 = scans[0].age;
        let mut at = |dt: f64, truth: Option<usize>| -> Result<Item> {
            if truth.is_none() {
                coverage.check(dt, age0, s.extrapolate, &subject.id)?;
            }
            let session = match truth {
                Some(v) => scans[v].session.clone(),
                None => format!("ses-age{}", age_label(age0 + dt)),
            };
            let mut file = format!("{}_{session}.csv", subject.id);
            let mut k = 2;
            while !files.insert(file.clone()) {
                file = format!("{}_{session}-{k}.csv", subject.id);
                k += 1;
            }
            Ok(Item {
                subject: sub,
                dt,
                target_age: age0 + dt,
                truth,
                file,
            })
        };
        if h.next_visit {
            if scans.len() >= 2 {
                items.push(at(delta_t(scans, 0, 1), Some(1))?);
            }
        } else if let Some(a) = h.target_age {
            if a < age0 {
                bail!(
                    "--target-age {a}: before the start scan of {} ({}, age {age0})",
                    subject.id,
                    scans[0].scan_id
                );
            }
            items.push(at(a - age0, visit_at(run, sub, a - age0))?);
        } else if let Some(dts) = &h.dt_years {
            for &d in dts {
                items.push(at(d, visit_at(run, sub, d))?);
            }
        } else if let Some(ages) = &h.ages {
            for &a in ages.iter().filter(|&&a| a >= age0) {
                items.push(at(a - age0, visit_at(run, sub, a - age0))?);
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
    run.warn_split_changes("predict");
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
    for (item, m) in items.iter().zip(&preds.matrices) {
        if m.iter().any(|v| !v.is_finite()) {
            bail!(
                "{}: the forecast {} y after visit 0 (age {}) is not finite; nothing written \
                 (a horizon this far out is beyond what the model can represent)",
                run.prep.cohort.subjects[item.subject].id,
                item.dt,
                item.target_age
            );
        }
    }

    let parent = s.out.parent().filter(|p| !p.as_os_str().is_empty());
    let parent = parent.unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    remove_stale_staging(parent);
    let staging = parent.join(format!(".predict-{}.tmp", std::process::id()));
    // SIGINT/SIGTERM while the files are written: stop, remove the staging directory.
    let stop = Arc::new(AtomicUsize::new(0));
    let hooks: Vec<_> = [SIGINT, SIGTERM]
        .iter()
        .filter_map(|&sig| signal_hook::flag::register_usize(sig, stop.clone(), sig as usize).ok())
        .collect();
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
                &stop,
            )
        });
    for hook in hooks {
        signal_hook::low_level::unregister(hook);
    }
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

/// Removes the staging directories of `trainer predict` processes that no longer run (killed
/// before they could clean up).
fn remove_stale_staging(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(".predict-")
            .and_then(|r| r.strip_suffix(".tmp"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Which part of the run's split `subject` was in: `test`, or `train`/`val` of the checkpoint's
/// fold (`-`: none, e.g. a subject only in `--sc-dir`).
fn split_of(run: &SavedRun, subject: usize) -> &'static str {
    if run.prep.test.contains(&subject) {
        return "test";
    }
    match run.prep.folds.iter().find(|f| f.fold == run.fold) {
        Some(f) if f.train.contains(&subject) => "train",
        Some(f) if f.val.contains(&subject) => "val",
        _ => "-",
    }
}

/// Writes the matrices, `predictions.csv`, the population means and the plots into `dir`;
/// stops when `stop` holds a signal (exit 128 + n).
fn write_all(
    dir: &Path,
    run: &SavedRun,
    s: &PredictSettings,
    items: &[Item],
    preds: &[Array2<f32>],
    names: Option<&[String]>,
    stop: &AtomicUsize,
) -> Result<()> {
    let stopped = || -> Result<()> {
        match stop.load(Ordering::SeqCst) {
            0 => Ok(()),
            sig => Err(crate::error::ExitError::new(
                crate::exit::Exit::Signal(sig as i32).code(),
                format!(
                    "stopped by {} while writing; nothing written",
                    crate::toolbox::stop::signal_name(sig as i32)
                ),
            )
            .into()),
        }
    };
    std::fs::create_dir(dir.join("sc"))?;
    let mut index = csv::Writer::from_path(dir.join("predictions.csv"))?;
    index.write_record([
        "subject",
        "split",
        "start_scan",
        "start_age",
        "target_age",
        "dt_years",
        "file",
        "true_scan",
    ])?;
    let cohort = &run.prep.cohort;
    for (item, m) in items.iter().zip(preds) {
        stopped()?;
        let subject = &cohort.subjects[item.subject];
        let file = format!("sc/{}", item.file);
        write_matrix(&dir.join(&file), m)?;
        index.write_record([
            subject.id.clone(),
            split_of(run, item.subject).to_string(),
            subject.scans[0].scan_id.clone(),
            subject.scans[0].age.to_string(),
            item.target_age.to_string(),
            item.dt.to_string(),
            file,
            item.truth
                .map_or(String::new(), |v| subject.scans[v].scan_id.clone()),
        ])?;
    }
    stopped()?;
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
