//! `trainer compare`'s other outputs: the paired view (`--against`), every run's strata as a
//! table (`--strata`) and the validation curves (`--plot`).

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::{CompareSettings, Run, group_value, groups, pooling, read_json};
use crate::outputs::group_table::Format;
use crate::report::against::{self, Compared};

/// `--against MODEL`: our finished runs (of one cohort, unless `--pool-cohorts`), each paired
/// with that model's run of its fold and seed ([`against`]; `identity`: with its own identity
/// forecast), as `--format` (default Markdown): one row per run, or with `--group-by KEY` one
/// per configuration (the keys' values; [`against::grouped_lines`]); runs left unpaired are
/// named on standard error.
pub(super) fn against(runs: &[Run], s: &CompareSettings, model: &str) -> Result<()> {
    let by_configuration = !s.group_by.is_empty();
    let keys = if by_configuration {
        groups::check_keys(runs, &s.group_by)?;
        s.group_by.clone()
    } else {
        groups::configuration_keys(runs)
    };
    let done: Vec<&Run> = runs
        .iter()
        .filter(|r| r.reference.is_none() && r.done())
        .collect();
    let apart = "compare each cohort's runs on their own";
    pooling::check_cohorts(std::slice::from_ref(&done), s.pool_cohorts, apart)?;
    let ours: Vec<Compared> = done
        .iter()
        .map(|r| Compared {
            name: r.name.clone(),
            dir: r.dir.path(),
            configuration: keys
                .iter()
                .map(|k| format!("{k}={}", group_value(r, k)))
                .collect::<Vec<_>>()
                .join(" "),
            fold: group_value(r, "fold"),
            seed: group_value(r, "seed"),
        })
        .collect();
    let format = s.format_or(Format::Md);
    let mut unpaired: Vec<String> = if by_configuration {
        let lines = against::grouped_lines(&ours, model, &s.metrics)?;
        print!(
            "{}",
            against::render_grouped_as(&lines, model, &keys, format)?
        );
        // Each unpaired run once (a configuration's lines repeat them per metric).
        let mut names: Vec<String> = Vec::new();
        for l in &lines {
            for u in &l.unpaired {
                let run = ours
                    .iter()
                    .find(|r| u.starts_with(&format!("{}: ", r.name)))
                    .map(|r| r.name.clone());
                if let Some(run) = run
                    && !names.contains(&run)
                {
                    names.push(run);
                }
            }
        }
        names
    } else {
        let lines = against::against_lines(&ours, model, &s.metrics)?;
        print!("{}", against::render_as(&lines, model, format)?);
        lines
            .iter()
            .filter(|l| l.unpaired.is_some())
            .map(|l| l.run.clone())
            .collect()
    };
    unpaired.dedup();
    if !unpaired.is_empty() {
        eprintln!(
            "[compare] {} run(s) without a {model} run of the same fold and seed (unpaired): {}",
            unpaired.len(),
            unpaired.join(" ")
        );
    }
    Ok(())
}

/// `--strata`: each run's strata as `format` (a table per run, or one table of rows run ×
/// stratum), runs without `strata.json` named.
pub(super) fn strata_tables(runs: &[Run], format: Format) -> Result<()> {
    use crate::outputs::strata;
    let mut all = Vec::new();
    let mut missing = Vec::new();
    for r in runs.iter().filter(|r| r.reference.is_none()) {
        match read_json(&r.dir.strata_json()) {
            Some(v) => all.push((r.name.clone(), strata::read(&v))),
            None => missing.push(r.name.as_str()),
        }
    }
    print!("{}", strata::render(&all, format)?);
    if !missing.is_empty() {
        eprintln!(
            "[compare] {} run(s) without strata.json: {}",
            missing.len(),
            missing.join(" ")
        );
    }
    Ok(())
}

/// `--plot`: the validation skill (else loss) per epoch of our runs with results, each line
/// labelled by its group (grouped view) or its name.
pub(super) fn plot(runs: &[Run], s: &CompareSettings, out: &Path) -> Result<()> {
    let keys = if s.group_by.is_empty() {
        groups::configuration_keys(runs)
    } else {
        s.group_by.clone()
    };
    let ours: Vec<(String, PathBuf)> = runs
        .iter()
        .filter(|r| r.reference.is_none() && r.done())
        .map(|r| {
            let label = if s.grouped() {
                let kv = keys.iter().map(|k| format!("{k}={}", group_value(r, k)));
                format!("{} ({})", kv.collect::<Vec<_>>().join(" "), r.legend)
            } else {
                r.legend.clone()
            };
            (label, r.dir.path().to_path_buf())
        })
        .collect();
    if ours.is_empty() {
        bail!(
            "--plot: no run of ours has results to plot (the reference's runs have no curves here)"
        );
    }
    if ours.len() < runs.len() {
        eprintln!(
            "[compare] --plot: {} run(s) left out (the reference's, or without results)",
            runs.len() - ours.len()
        );
    }
    let layout = crate::outputs::figure::Layout::column(s.column);
    crate::report::plot::validation_curves(&ours, layout, out)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}
