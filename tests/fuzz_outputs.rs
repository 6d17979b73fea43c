//! Every output well-formed whatever the names in it (issue 71): each figure type drawn with
//! hostile text (a title, a run's name, a legend label, a stratum, a measure: control
//! characters, `<`, `&`, quotes, U+FFFF, a right-to-left override, 10 kB) is an SVG that parses
//! as XML and still shows the text, less its control characters; each CSV a report writes with
//! hostile names (`=HYPERLINK(…)`, `+cmd`, `@SUM(1)`, `-2+3`, a leading TAB) has no cell a
//! spreadsheet would evaluate, its numbers still numbers. Fixed cases, then random strings.
//! Case budget: `TRAINER_FUZZ_CASES` (see tests/common/fuzz.rs).

#[path = "common/fuzz.rs"]
mod fuzz;

use std::path::{Path, PathBuf};
use std::time::Instant;

use ndarray::Array2;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use trainer::metrics::paired::{SEED, paired_values};
use trainer::metrics::pr::pr_curve;
use trainer::outputs::compare::{Format, RunSummary, render_runs};
use trainer::outputs::curves::{self, Chart, Line};
use trainer::outputs::figure::Layout;
use trainer::outputs::frontier::{Frontier, FrontierPoint};
use trainer::outputs::group_table::{Grouping, grouped};
use trainer::outputs::heatmap::{self, Comparison};
use trainer::outputs::pr_chart::{PrChart, PrLine};
use trainer::outputs::strata::{self, StrataSkill, Stratum};
use trainer::outputs::text::svg_safe;
use trainer::outputs::trajectory::{Panel, Track, Trajectories};
use trainer::report::against::{AgainstLine, render_as};

type Case = Result<(), TestCaseError>;

/// The names of the campaign's repros, and text XML cannot hold.
fn hostile() -> Vec<String> {
    let mut v: Vec<String> = [
        "a\u{1}b\u{1b}[31m\u{7f}c\u{9f}",
        "<tag attr=\"x\">&amp; 'q' </text>",
        "x\u{FFFE}\u{FFFF}y\u{0}",
        "\u{202E}gnp.exe",
        "tab\tline\nbreak\r",
        "=HYPERLINK(\"http://x\",\"y\")",
        "+cmd",
        "@SUM(1)",
        "-2+3",
        "\tx",
        "\r=1",
    ]
    .map(String::from)
    .to_vec();
    v.push(format!("{}\u{1}&<", "long ".repeat(2_000)));
    v
}

/// The figure types: `trainer plot`'s curves, `plot-sc`'s heatmaps, strata, precision–recall
/// and trajectories, `compare --frontier`.
const KINDS: [&str; 6] = [
    "curves",
    "heatmap",
    "strata",
    "pr",
    "trajectory",
    "frontier",
];

/// One figure of type `KINDS[kind]` with `title` as its title and `label` wherever a name goes
/// (a line's label, a run, a stratum, a measure, a subject, a configuration), laid out as
/// `layout`, drawn into `dir` as `<type>-<layout>.<ext>`.
fn draw(kind: usize, dir: &Path, title: &str, label: &str, layout: Layout, ext: &str) -> PathBuf {
    let out = dir.join(format!("{}-{layout:?}.{ext}", KINDS[kind]));
    let drawn = match kind {
        0 => {
            let line = |label: &str, y: f64| Line {
                label: label.into(),
                points: vec![(1.0, y), (2.0, y + 0.5)],
                dashed: false,
            };
            let charts = [Chart {
                title: label.into(),
                lines: vec![line(label, 1.0), line("other", 2.0)],
            }];
            curves::render_titled(&charts, Some(title), layout, &out)
        }
        1 => {
            let m = Array2::from_shape_fn((6, 6), |(i, j)| (i + j) as f32 / 10.0);
            let fig = Comparison {
                title: title.into(),
                truth: &m,
                prediction: &m,
                start: &m,
                roi_names: None,
                network_lines: false,
                layout,
            };
            heatmap::render(&fig, &out)
        }
        2 => {
            let stratum = |label: &str, skill: f64| Stratum {
                label: label.into(),
                range: label.into(),
                n: 7,
                mse: Some(1.0),
                identity_mse: Some(2.0),
                skill: Some(skill),
                interval: None,
            };
            let strata = vec![stratum(label, 0.25), stratum("Δt long", -0.5)];
            let fig = StrataSkill {
                title: title.into(),
                runs: vec![(label.into(), strata.clone()), ("b".into(), strata)],
                warning_on_figure: true,
                pooled: Default::default(),
                layout,
            };
            heatmap::render(&fig, &out)
        }
        3 => {
            let pairs = [(0.9, true), (0.5, false), (0.4, true), (0.1, false)];
            let (a, b) = (pr_curve(&pairs).unwrap(), pr_curve(&pairs[1..]).unwrap());
            let fig = PrChart {
                title: title.into(),
                lines: vec![PrLine::of_run(label, &a), PrLine::pooled("b", &[&a, &b])],
                layout,
            };
            heatmap::render(&fig, &out)
        }
        5 => {
            let point = |label: &str, y: f64| FrontierPoint {
                label: label.into(),
                y: vec![y, y + 0.1],
                x: vec![vec![-y, 0.2], vec![y]],
            };
            let fig = Frontier {
                title: title.into(),
                x_metrics: vec!["skill_ecc_l2".into(), label.into()],
                y_metric: "skill".into(),
                points: vec![point(label, 0.3), point("b", -0.1)],
            };
            heatmap::render(&fig, &out)
        }
        _ => {
            let track = |subject: &str| Track {
                subject: subject.into(),
                observed: vec![(60.0, 1.0), (62.0, 1.5)],
                forecast: vec![(60.0, 1.0), (62.0, 1.4)],
            };
            let fig = Trajectories {
                title: title.into(),
                panels: vec![Panel {
                    measure: label.into(),
                    tracks: vec![track(label), track("s2")],
                }],
                layout,
            };
            heatmap::render(&fig, &out)
        }
    };
    drawn.unwrap_or_else(|e| panic!("{}: {e:#}", KINDS[kind]));
    out
}

/// The SVG at `path` parses as XML, no text in it has a control character, and `expect` (each
/// as [`svg_safe`] draws it) is the text of one of its `<text>` elements.
fn check_svg(path: &Path, expect: &[&str]) -> Case {
    let svg = std::fs::read_to_string(path).unwrap();
    let doc = roxmltree::Document::parse(&svg);
    prop_assert!(doc.is_ok(), "{}: not XML: {:?}", path.display(), doc.err());
    let doc = doc.unwrap();
    let texts: Vec<String> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| {
            let t = n.text().unwrap_or_default();
            let t = t.strip_prefix('\n').unwrap_or(t);
            t.strip_suffix('\n').unwrap_or(t).to_string()
        })
        .collect();
    for t in &texts {
        prop_assert!(
            !t.chars().any(char::is_control),
            "{}: {t:?}",
            path.display()
        );
    }
    for e in expect {
        let drawn = svg_safe(e);
        if !drawn.trim().is_empty() {
            let short = |t: &str| t.chars().take(120).collect::<String>();
            prop_assert!(
                texts.contains(&drawn),
                "{}: no text {:?} in {:?}",
                path.display(),
                short(&drawn),
                texts.iter().map(|t| short(t)).collect::<Vec<_>>()
            );
        }
    }
    Ok(())
}

#[test]
fn every_figure_with_hostile_text_is_well_formed_xml_and_shows_it() {
    let t = tempfile::tempdir().unwrap();
    for (i, text) in hostile().iter().enumerate() {
        let dir = t.path().join(i.to_string());
        for (kind, name) in KINDS.iter().enumerate() {
            for layout in [Layout::Screen, Layout::Column] {
                let svg = draw(kind, &dir, text, text, layout, "svg");
                // The title is drawn as given (a heatmap's wrapped in a column); a label may
                // carry a suffix (`(AP …)`) or a range.
                let lines = title_lines(kind, text, layout);
                let mut expect: Vec<&str> = lines.iter().map(String::as_str).collect();
                if ["curves", "strata"].contains(name) {
                    expect.push(text);
                }
                check_svg(&svg, &expect).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            }
        }
    }
    // The PNG of the same text draws too.
    let long = hostile().pop().unwrap();
    for kind in 0..KINDS.len() {
        for layout in [Layout::Screen, Layout::Column] {
            draw(kind, t.path(), &long, "a\u{1}<", layout, "png");
        }
    }
}

/// The lines a figure of type `KINDS[kind]` draws its title in: the heatmaps wrap theirs in a
/// column; the others draw it as one text.
fn title_lines(kind: usize, title: &str, layout: Layout) -> Vec<String> {
    if KINDS[kind] == "heatmap" {
        heatmap::title_lines(title, layout)
    } else {
        vec![title.to_string()]
    }
}

/// Laid out for a journal's column, every figure is 400 pixels wide and none of its text is
/// smaller than 6 pt when it is placed 89 mm wide: an SVG's `font-size` (plotters writes a
/// 12-pixel font as 9.68, its size over 1.24) × 89 / 400 mm, over 0.3528 mm a point: 6.1 pt for
/// the 12-pixel font, within the 5–7 pt journals ask for. The screen layouts are wider.
#[test]
fn column_figures_are_a_column_wide_and_print_their_text_at_6_pt() {
    let t = tempfile::tempdir().unwrap();
    let attr = |svg: &str, name: &str| -> Vec<f64> {
        let key = format!("{name}=\"");
        svg.match_indices(&key)
            .map(|(at, _)| {
                let rest = &svg[at + key.len()..];
                rest[..rest.find('"').unwrap()].parse::<f64>().unwrap()
            })
            .collect()
    };
    for (kind, name) in KINDS.iter().enumerate() {
        let column = std::fs::read_to_string(draw(
            kind,
            t.path(),
            "a title",
            "eb-drift",
            Layout::Column,
            "svg",
        ))
        .unwrap();
        let screen = std::fs::read_to_string(draw(
            kind,
            t.path(),
            "a title",
            "eb-drift",
            Layout::Screen,
            "svg",
        ))
        .unwrap();
        let width = |svg: &str| attr(svg, "width")[0];
        assert_eq!(width(&column), 400.0, "{name}");
        if *name != "frontier" {
            assert!(width(&screen) > 400.0, "{name}: {}", width(&screen));
        }
        let sizes = attr(&column, "font-size");
        assert!(!sizes.is_empty(), "{name}: no text");
        let smallest = sizes.iter().copied().fold(f64::INFINITY, f64::min);
        let points = smallest * 89.0 / 400.0 / 0.3528;
        assert!(
            points >= 6.0,
            "{name}: {smallest} px prints at {points:.1} pt"
        );
    }
}

/// Whether a spreadsheet would evaluate `cell`: it starts with `=`, `+`, `-`, `@`, TAB or CR
/// and is not a number.
fn formula(cell: &str) -> bool {
    cell.starts_with(['=', '+', '-', '@', '\t', '\r']) && cell.parse::<f64>().is_err()
}

/// `csv` parses, no cell (header included) is a formula, and the cells of `text_columns` are
/// `names` (in order, each as itself or behind a `'`).
fn check_csv(what: &str, csv: &str, text_columns: &[&str], names: &[&str]) -> Case {
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let header = r
        .headers()
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    let header: Vec<String> = header.iter().map(String::from).collect();
    let rows: Vec<csv::StringRecord> = r
        .records()
        .collect::<Result<_, _>>()
        .map_err(|e| TestCaseError::fail(format!("{what}: {e}")))?;
    for cell in header
        .iter()
        .map(String::as_str)
        .chain(rows.iter().flatten())
    {
        let short: String = cell.chars().take(80).collect();
        prop_assert!(!formula(cell), "{what}: formula cell {short:?}");
    }
    for col in text_columns {
        let i = header.iter().position(|h| h == col).unwrap();
        for (row, name) in rows.iter().zip(names.iter().cycle()) {
            let cell = &row[i];
            prop_assert!(
                cell == *name || cell.strip_prefix('\'') == Some(name),
                "{what}: column {col}: {cell:?} for {name:?}"
            );
        }
    }
    Ok(())
}

/// Every CSV a report writes, with `names` as its runs' names, keys and labels; numbers (a
/// negative skill among them) stay numbers.
fn check_all_csv(names: &[&str]) -> Case {
    let skill = -0.003;
    let summaries: Vec<RunSummary> = names
        .iter()
        .map(|n| RunSummary {
            run: n.to_string(),
            skill: Some(skill),
            ..Default::default()
        })
        .collect();
    let csv = render_runs(&summaries, Format::Csv).unwrap();
    check_csv("per-run", &csv, &["run"], names)?;
    let mut r = csv::Reader::from_reader(csv.as_bytes());
    let col = r
        .headers()
        .unwrap()
        .iter()
        .position(|h| h == "skill")
        .unwrap();
    for row in r.records() {
        prop_assert_eq!(row.unwrap()[col].parse::<f64>().ok(), Some(skill));
    }

    let runs: Vec<Grouping> = names
        .iter()
        .enumerate()
        .map(|(i, n)| Grouping {
            name: n.to_string(),
            key: vec![n.to_string()],
            values: (i % 2 == 0).then(|| vec![Some(skill)]),
        })
        .collect();
    let table = grouped(&["variant".into()], &["skill".into()], &runs);
    check_csv("grouped", &table.csv().unwrap(), &[], names)?;

    let stratum = Stratum {
        label: names[0].to_string(),
        range: names[names.len() - 1].to_string(),
        n: 3,
        mse: Some(1.0),
        identity_mse: Some(2.0),
        skill: Some(skill),
        interval: None,
    };
    let runs: Vec<(String, Vec<Stratum>)> = names
        .iter()
        .map(|n| (n.to_string(), vec![stratum.clone()]))
        .collect();
    let csv = strata::render(&runs, Format::Csv).unwrap();
    check_csv("strata", &csv, &["run"], names)?;

    let paired = paired_values(&[(1.0, 2.0), (1.5, 1.0), (0.5, 1.0)], SEED);
    let lines: Vec<AgainstLine> = names
        .iter()
        .map(|n| AgainstLine {
            run: n.to_string(),
            configuration: format!("variant={n}"),
            model: n.to_string(),
            fold: n.to_string(),
            seed: "-1".into(),
            against: Some(n.to_string()),
            is_against: false,
            unpaired: None,
            metric: "sc_log_mse".into(),
            vs_against: Some(paired),
            dropped_vs_against: 0,
            vs_identity: paired,
            dropped_vs_identity: 0,
        })
        .collect();
    let csv = render_as(&lines, names[0], Format::Csv).unwrap();
    check_csv("against", &csv, &["run", "model", "fold", "partner"], names)
}

#[test]
fn every_csv_with_hostile_names_has_no_formula_cell() {
    let names = hostile();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    check_all_csv(&names).unwrap();
}

/// A random hostile string: pieces of markup, controls, formula starts, characters XML forbids
/// and any character, sometimes long.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => prop::sample::select(vec![
            "=", "+", "-", "@", "\t", "\r", "\n", "<", ">", "&", "\"", "'", "&amp;", "]]>",
            "\u{0}", "\u{1b}", "\u{7f}", "\u{85}", "\u{9f}", "\u{FFFE}", "\u{FFFF}", "\u{202E}",
            "-0.5", "1e3", "fold0", "Δt", " ",
        ])
        .prop_map(String::from),
        4 => any::<char>().prop_map(String::from),
        1 => (1usize..1_000).prop_map(|n| "w".repeat(n)),
    ];
    prop::collection::vec(piece, 0..10).prop_map(|v| v.concat())
}

#[test]
fn random_hostile_text_gives_well_formed_figures_and_no_formula_cells() {
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let mut runner = TestRunner::new(fuzz::config());
    let strategy = (
        (0..KINDS.len(), any::<bool>()),
        text(),
        text(),
        prop::collection::vec(text(), 1..4),
    );
    let result = runner.run(&strategy, |((kind, column), title, label, names)| {
        let layout = Layout::column(column);
        let svg = draw(kind, dir.path(), &title, &label, layout, "svg");
        let lines = title_lines(kind, &title, layout);
        check_svg(&svg, &lines.iter().map(String::as_str).collect::<Vec<_>>())?;
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        check_all_csv(&names)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    fuzz::report("outputs", 0, fuzz::cases(), t0);
}
