//! The rules of `outputs::text`; every figure and every CSV of the binary with hostile text is
//! `tests/fuzz_outputs.rs` (and, through the binary, `tests/sweep/compare_hostile.rs`).

use super::*;

#[test]
fn figure_text_keeps_no_control_character_and_nothing_xml_forbids() {
    assert_eq!(svg_safe("plain Δt ≤ 1.92 y"), "plain Δt ≤ 1.92 y");
    assert_eq!(svg_safe("a\u{1}b\u{1b}[31mc\u{7f}d\u{9f}e"), "ab[31mcde");
    assert_eq!(
        svg_safe("tab\there\r\nnext\u{85}line"),
        "tab here  next line"
    );
    assert_eq!(svg_safe("x\u{FFFE}\u{FFFF}y\u{0}"), "xy");
    // Valid XML stays, a right-to-left override and characters to escape included (plotters
    // escapes `<`, `&` and quotes itself).
    assert_eq!(svg_safe("\u{202E}<&\"'>"), "\u{202E}<&\"'>");
    assert_eq!(svg_safe("🙂\u{10FFFF}"), "🙂\u{10FFFF}");
}

#[test]
fn an_svg_document_keeps_its_structure_and_loses_what_xml_forbids() {
    let svg = "<svg width=\"1\">\n<text x=\"0\" dy=\"0.5ex\">\na\u{1}&lt;b\u{FFFF}\tc\n</text>\n\
               <textPath>\nkeep\u{7}\n</textPath>\n<text x=\"1\"/>\n<rect/>\n<text>\n\u{1b}\n</text>\n\
               </svg>\n";
    let out = svg_document(svg);
    assert_eq!(
        out,
        "<svg width=\"1\">\n<text x=\"0\" dy=\"0.5ex\">\na&lt;b c\n</text>\n\
         <textPath>\nkeep\n</textPath>\n<text x=\"1\"/>\n<rect/>\n<text>\n\n</text>\n</svg>\n"
    );
    assert!(out.chars().all(is_xml_char));
    // Without plotters' framing newlines, or cut short: still nothing XML forbids.
    assert_eq!(svg_document("<text>\u{1}x</text>"), "<text>x</text>");
    assert_eq!(svg_document("<text>x\u{1}"), "<text>x");
    assert_eq!(svg_document("<text \u{1}"), "<text ");
}

#[test]
fn a_csv_text_cell_is_never_a_spreadsheet_formula() {
    for (cell, want) in [
        (
            "=HYPERLINK(\"http://x\",\"y\")",
            "'=HYPERLINK(\"http://x\",\"y\")",
        ),
        ("+cmd", "'+cmd"),
        ("@SUM(1)", "'@SUM(1)"),
        ("-2+3", "'-2+3"),
        ("\tx", "'\tx"),
        ("\r=1", "'\r=1"),
        ("-", "'-"),
        ("-inf", "'-inf"),
        ("-NaN", "'-NaN"),
        ("- 1", "'- 1"),
        // Plain numbers stay numbers; text that starts otherwise stays as it is.
        ("-0.003", "-0.003"),
        ("+1e5", "+1e5"),
        ("-2.5E-4", "-2.5E-4"),
        ("0.5", "0.5"),
        ("a=b", "a=b"),
        (" =1", " =1"),
        ("'=1", "'=1"),
        ("", ""),
        ("model=clg-ode", "model=clg-ode"),
    ] {
        assert_eq!(csv_cell(cell), want, "{cell:?}");
    }
    assert_eq!(csv_row(&["=1", "2", "-3"]), ["'=1", "2", "-3"]);
}

/// Every SVG is drawn by `figure::svg_string`, so every figure's text goes through
/// [`svg_document`]: no other file of the crate uses plotters' SVG backend.
#[test]
fn no_figure_draws_an_svg_around_the_sanitiser() {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let users: Vec<String> = files
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f).is_ok_and(|t| t.contains(&["SVG", "Backend"].concat()))
        })
        .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert_eq!(users, ["outputs/figure.rs"]);
}
