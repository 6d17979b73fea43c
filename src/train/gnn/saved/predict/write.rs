//! What `trainer predict` writes: the matrices, `predictions.csv`, the population means and the
//! plots, into a staging directory (stale ones of killed runs removed first).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use ndarray::Array2;

use super::PredictSettings;
use super::plan::Item;
use crate::outputs::heatmap;
use crate::train::gnn::protocol::saved_run::SavedRun;

/// Writes an N×N matrix as CSV (no header): the upper triangle mirrored, zero diagonal.
pub(crate) fn write_matrix(path: &Path, m: &Array2<f32>) -> Result<()> {
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

/// Removes the staging directories of `trainer predict` processes that no longer run (killed
/// before they could clean up).
pub(super) fn remove_stale_staging(parent: &Path) {
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
pub(super) fn write_all(
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
            let (truth, start) = (scans[v].a_raw.dense(), scans[0].a_raw.dense());
            let fig = heatmap::Comparison {
                title: format!("{name} (Δt {:.2} y)", item.dt),
                truth: &truth,
                prediction: m,
                start: &start,
                roi_names: names,
                network_lines: s.network_lines,
                layout: crate::outputs::figure::Layout::Screen,
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
