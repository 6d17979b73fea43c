//! The exit-code table of docs/reference/exit-codes.md ("Errors and exit codes") lists exactly
//! the codes of `trainer::exit::Exit`: a code of the enum missing from the page fails, and so
//! does a code on the page that the enum does not have.

use std::collections::BTreeSet;

use trainer::exit::Exit;

/// docs/reference/exit-codes.md of this checkout (never another copy).
fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference/exit-codes.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The first column of the table whose header is `| code | meaning | fix |`, each code as docs
/// write it (`75`, `128+n`), spaces removed; in table order, repeats kept.
fn readme_codes(readme: &str) -> Vec<String> {
    let mut lines = readme.lines().skip_while(|l| {
        let cells = cells(l);
        cells.first().map(String::as_str) != Some("code")
            || cells.get(1).map(String::as_str) != Some("meaning")
    });
    assert!(
        lines.next().is_some(),
        "docs/reference/exit-codes.md: no `| code | meaning | fix |` table"
    );
    lines
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(cells)
        .filter(|c| !c[0].starts_with("---"))
        .map(|c| c[0].clone())
        .collect()
}

fn cells(line: &str) -> Vec<String> {
    let line = line.trim();
    if !line.starts_with('|') {
        return Vec::new();
    }
    line.trim_matches('|')
        .split('|')
        .map(|c| c.chars().filter(|ch| !ch.is_whitespace()).collect())
        .collect()
}

#[test]
fn readme_exit_code_table_matches_the_enum() {
    let text = readme();
    let listed = readme_codes(&text);
    assert!(
        !listed.is_empty(),
        "docs/reference/exit-codes.md: the exit-code table has no rows"
    );
    for code in &listed {
        let well_formed = code.chars().all(|c| c.is_ascii_digit()) || code == "128+n";
        assert!(
            well_formed,
            "docs/reference/exit-codes.md: `{code}` is not an exit code"
        );
    }
    let readme: BTreeSet<&str> = listed.iter().map(String::as_str).collect();
    let labels: Vec<String> = Exit::ALL.iter().map(|e| e.code_label()).collect();
    let enumed: BTreeSet<&str> = labels.iter().map(String::as_str).collect();
    let missing: Vec<String> = Exit::ALL
        .iter()
        .filter(|e| !readme.contains(e.code_label().as_str()))
        .map(|e| format!("{} ({}: {})", e.code_label(), e.name(), e.meaning()))
        .collect();
    assert!(
        missing.is_empty(),
        "codes of trainer::exit::Exit missing from docs/reference/exit-codes.md's table: \
         {missing:?}"
    );
    let unknown: Vec<&&str> = readme.difference(&enumed).collect();
    assert!(
        unknown.is_empty(),
        "docs/reference/exit-codes.md's table lists codes that trainer::exit::Exit does not \
         have: {unknown:?}"
    );
}

#[test]
fn the_table_parser_sees_both_directions() {
    let table = "text\n\n| code | meaning | fix |\n| --- | --- | --- |\n| 0 | ok | |\n| 1 | a | |\n\
                 | 1 | b | |\n| 128 + n | sig | |\n\nafter\n| 99 | not in the table | |\n";
    assert_eq!(readme_codes(table), ["0", "1", "1", "128+n"]);
}

#[test]
fn doctor_codes_come_from_the_enum() {
    for (code, name, meaning) in trainer::cluster::exit_codes::ALL {
        let e = Exit::from_code(*code).expect("a doctor code is in Exit");
        assert_eq!((e.name(), e.meaning()), (*name, *meaning));
    }
    assert_eq!(trainer::cluster::exit_codes::NO_DRIVER, 10);
    assert_eq!(trainer::toolbox::stop::REQUEUE_EXIT, 75);
    assert_eq!(trainer::error::BACKEND_UNAVAILABLE, 3);
}
