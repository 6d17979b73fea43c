//! Text the binary writes for other programs to read, made safe for them in one place each:
//!
//! * **figures**: every SVG goes through [`svg_document`] (`figure::svg_string`, the one place
//!   an SVG is drawn): the text of each `<text>` element is [`svg_safe`] and no character that
//!   XML 1.0 forbids is left anywhere, so a title, a run's name, a legend label or a metric
//!   name with control characters still gives a well-formed file. `<`, `>`, `&` and quotes are
//!   escaped by plotters' SVG backend itself (as entities), not here.
//! * **CSV for spreadsheets**: every text cell of every CSV a report writes goes through
//!   [`csv_cell`] (OWASP's "CSV Injection"): a cell a spreadsheet would evaluate as a formula
//!   gets a leading `'`; numeric columns are written as numbers and never pass through it.

use std::borrow::Cow;

/// Whether `c` may appear in an XML 1.0 document (its `Char` production: TAB, LF, CR, and
/// U+0020–U+D7FF, U+E000–U+FFFD, U+10000–U+10FFFF).
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// A piece of figure text as it is drawn: the control characters that separate words (TAB, LF,
/// VT, FF, CR, NEL) become a space (a label is one line), every other C0 or C1 control
/// character and DEL is dropped, and so is every character XML 1.0 forbids (U+FFFE, U+FFFF).
/// Anything else stays, bidirectional overrides (U+202E) included: they are valid XML.
pub fn svg_safe(text: &str) -> String {
    text.chars()
        .filter_map(|c| match c {
            '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | '\u{85}' => Some(' '),
            c if c.is_control() || !is_xml_char(c) => None,
            c => Some(c),
        })
        .collect()
}

/// An SVG document written by plotters, made well-formed XML whatever text was drawn: the
/// content of every `<text>` element is [`svg_safe`] (plotters frames it with a newline on
/// each side, which stays), and any character XML forbids is dropped from the rest.
///
/// Plotters escapes `<` in text and attributes, so a raw `<` always opens a tag: a `<text`
/// element's content runs from its tag's `>` to the next `<`.
pub(crate) fn svg_document(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(open) = find_text_tag(rest) {
        let Some(gt) = rest[open..].find('>').map(|g| open + g) else {
            break;
        };
        let tag = &rest[..=gt];
        push_xml(&mut out, tag);
        rest = &rest[gt + 1..];
        if tag.ends_with("/>") {
            continue; // `<text …/>`: no content
        }
        let end = rest.find('<').unwrap_or(rest.len());
        let content = &rest[..end];
        let (lead, inner) = match content.strip_prefix('\n') {
            Some(inner) => ("\n", inner),
            None => ("", content),
        };
        let (inner, trail) = match inner.strip_suffix('\n') {
            Some(inner) => (inner, "\n"),
            None => (inner, ""),
        };
        out.push_str(lead);
        out.push_str(&svg_safe(inner));
        out.push_str(trail);
        rest = &rest[end..];
    }
    push_xml(&mut out, rest);
    out
}

/// Where the next `<text` start tag begins in `s` (not `<textPath` or the like).
fn find_text_tag(s: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find("<text").map(|i| from + i) {
        match s.as_bytes().get(i + 5) {
            Some(b' ' | b'>' | b'/' | b'\n' | b'\t' | b'\r') => return Some(i),
            _ => from = i + 5,
        }
    }
    None
}

/// `s` into `out` without the characters XML forbids.
fn push_xml(out: &mut String, s: &str) {
    out.extend(s.chars().filter(|&c| is_xml_char(c)));
}

/// The first characters with which a spreadsheet reads a cell as a formula (OWASP's list).
const FORMULA_START: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// A text cell of a CSV, safe to open in a spreadsheet: a cell starting with `=`, `+`, `-`, `@`,
/// TAB or CR gets a leading `'` (the spreadsheet then shows it as text), unless it is a plain
/// number (`-0.003`, `+1e5`: digits, sign, point and exponent only, a finite value), which a
/// spreadsheet reads as the number it is. The CSV writer quotes the cell where it needs to.
pub(crate) fn csv_cell(cell: &str) -> Cow<'_, str> {
    match cell.chars().next() {
        Some(c) if FORMULA_START.contains(&c) && !is_plain_number(cell) => {
            Cow::Owned(format!("'{cell}"))
        }
        _ => Cow::Borrowed(cell),
    }
}

/// [`csv_cell`] of every cell of a row.
pub(crate) fn csv_row<S: AsRef<str>>(row: &[S]) -> Vec<String> {
    row.iter()
        .map(|c| csv_cell(c.as_ref()).into_owned())
        .collect()
}

/// A decimal number and nothing else: what a spreadsheet reads as a number, never a formula.
fn is_plain_number(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'+' | b'-' | b'.' | b'e' | b'E'))
        && s.parse::<f64>().is_ok_and(f64::is_finite)
}

#[cfg(test)]
mod tests;
