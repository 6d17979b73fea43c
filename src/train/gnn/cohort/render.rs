//! `trainer cohort`'s summary as text or Markdown.

use super::{CohortSummary, Part};
use crate::outputs::group_table::{Format, text_table};

/// The summary as text or Markdown (every defect counted, the first ten named).
pub(super) fn render(sum: &CohortSummary, format: Format) -> String {
    let mut out = String::new();
    let md = format == Format::Md;
    let head = |t: &str| {
        if md {
            format!("\n## {t}\n\n")
        } else {
            format!("\n{t}\n")
        }
    };
    let a = &sum.all;
    out.push_str(&format!(
        "{}cohort: {} subjects, {} scans, {} nodes; morphology {} ROIs × {} metrics; {} site(s)\n",
        if md { "# " } else { "" },
        a.subjects,
        a.scans,
        sum.nodes,
        sum.morphology_rois,
        sum.morphology_metrics.len(),
        sum.sites
    ));
    let p = &sum.paths;
    let table = p
        .subject_info_csv
        .as_ref()
        .map_or("(none: ages are visit indices)".to_string(), |t| {
            t.display().to_string()
        });
    out.push_str(&format!(
        "{}sc_dir {}\n{}morph_root {}\n{}subject_info_csv {}\n",
        if md { "- " } else { "  " },
        p.sc_dir.display(),
        if md { "- " } else { "  " },
        p.morph_root.display(),
        if md { "- " } else { "  " },
        table
    ));
    out.push_str(&head("Scans per subject and tiers"));
    let per: Vec<String> = sum
        .scans_per_subject
        .iter()
        .map(|(k, n)| format!("{k} scan(s): {n}"))
        .collect();
    out.push_str(&format!("{}\n", per.join(", ")));
    out.push_str(&format!(
        "tiers: ≥ 3 scans {} (velocity and acceleration terms), 2 scans {} (velocity), 1 scan {} \
         (reconstruction only)\n",
        a.three_or_more_scans, a.two_scans, a.one_scan
    ));
    out.push_str(&head("Ages and Δt"));
    out.push_str(&format!(
        "ages: {} of {} scans from the subject table{}\n",
        sum.ages_from_table,
        a.scans,
        sum.ages
            .as_ref()
            .map_or(String::new(), |s| format!(" ({} years)", s.line()))
    ));
    let unit = if sum.ages_from_table == a.scans {
        "years"
    } else {
        "years or visits"
    };
    if let Some(d) = &sum.dt_consecutive {
        out.push_str(&format!(
            "Δt between consecutive visits ({} pairs, {unit}): {}\n",
            d.n,
            d.line()
        ));
    }
    if let Some(d) = &sum.dt_first_to_last {
        out.push_str(&format!(
            "Δt first to last visit ({} subjects): {}\n",
            d.n,
            d.line()
        ));
    }
    out.push_str(&head("Defects"));
    if sum.warnings.is_empty() {
        out.push_str("none\n");
    } else {
        for w in sum.warnings.iter().take(10) {
            out.push_str(&format!("{}{w}\n", if md { "- " } else { "  " }));
        }
        if sum.warnings.len() > 10 {
            out.push_str(&format!(
                "… and {} more (`--format json` lists every one)\n",
                sum.warnings.len() - 10
            ));
        }
    }
    let sp = &sum.split;
    out.push_str(&head(&format!(
        "Split (seed {}, {:.0}% test, {}-fold GroupKFold on the rest)",
        sp.seed,
        100.0 * sp.test_size,
        sp.cv_folds
    )));
    let header: Vec<String> = [
        "part",
        "subjects",
        "scans",
        "pairs",
        "≥3 scans",
        "2 scans",
        "1 scan",
    ]
    .map(String::from)
    .to_vec();
    let row = |name: String, p: &Part| {
        vec![
            name,
            p.subjects.to_string(),
            p.scans.to_string(),
            p.pairs.to_string(),
            p.three_or_more_scans.to_string(),
            p.two_scans.to_string(),
            p.one_scan.to_string(),
        ]
    };
    let mut rows = vec![
        row("test".into(), &sp.test),
        row("train+val".into(), &sp.trainval),
    ];
    for f in &sp.folds {
        rows.push(row(format!("fold {} train", f.fold), &f.train));
        rows.push(row(format!("fold {} val", f.fold), &f.val));
    }
    out.push_str(&text_table(format, &header, &rows));
    for w in &sum.split_warnings {
        out.push_str(&format!("warning: {w}\n"));
    }
    out.push_str(&head("train-gnn flags"));
    let word = |p: &std::path::Path| {
        let text = p.to_string_lossy();
        shlex::try_quote(&text).map_or_else(|_| "''".to_string(), |q| q.into_owned())
    };
    let mut flags = format!(
        "--sc_dir {} --morph_root {}",
        word(&p.sc_dir),
        word(&p.morph_root)
    );
    if let Some(t) = &p.subject_info_csv {
        flags.push_str(&format!(" --subject_info_csv {}", word(t)));
    }
    out.push_str(&format!(
        "{}{flags}{}\n",
        if md { "`" } else { "" },
        if md { "`" } else { "" }
    ));
    out
}
