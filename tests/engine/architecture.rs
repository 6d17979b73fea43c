//! docs/architecture.md stays true to src/: every top-level module is in the import-layer
//! table, imports only from layers below its own, and the module map's line counts are within
//! 10% (`scripts/module-map.py --check`; `--write` regenerates the counts); and no files import
//! each other in a circle anywhere in src/ (`scripts/file_circles.py`).

use std::process::Command;

#[test]
fn architecture_md_matches_src() {
    let root = env!("CARGO_MANIFEST_DIR");
    let o = Command::new("python3")
        .arg(format!("{root}/scripts/module-map.py"))
        .arg("--check")
        .output()
        .expect("python3 runs scripts/module-map.py");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "docs/architecture.md disagrees with src/:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("0 problem(s)"), "{out}");
}

/// `scripts/file_circles.py DIR`: its exit status and output.
fn file_circles(dir: &std::path::Path) -> (bool, String) {
    let root = env!("CARGO_MANIFEST_DIR");
    let o = Command::new("python3")
        .arg(format!("{root}/scripts/file_circles.py"))
        .arg(dir)
        .output()
        .expect("python3 runs scripts/file_circles.py");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// No two files of src/ import each other, directly or around a longer circle, in any folder
/// (the layer check above sees only top-level modules).
#[test]
fn no_import_circle_between_the_files_of_src() {
    let (ok, out) = file_circles(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(ok && out.contains("file circles: 0"), "{out}");
}

/// The circle check finds a constructed circle three files long inside a folder (a child using
/// its parent counts; the parent using its own child does not), and stays quiet once it is cut.
#[test]
fn the_circle_check_finds_a_constructed_circle_and_passes_a_chain() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("room")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write("lib.rs", "pub mod room;\n");
    write(
        "room/mod.rs",
        "mod a;\nmod b;\nmod c;\nuse a::A;\npub struct Top;\n",
    );
    write("room/a.rs", "use super::b::B;\npub struct A;\n");
    write("room/b.rs", "pub struct B(crate::room::c::C);\n");
    write("room/c.rs", "use super::{a::A, Top};\npub struct C;\n");
    let (ok, out) = file_circles(&src);
    assert!(!ok, "{out}");
    assert!(
        out.contains("circle: src/room/a.rs src/room/b.rs src/room/c.rs")
            && out.contains("file circles: 1"),
        "{out}"
    );
    write(
        "room/c.rs",
        "use super::Top;\npub struct C;\n#[cfg(test)]\nmod tests {\n    use super::super::a::A;\n}\n",
    );
    let (ok, out) = file_circles(&src);
    assert!(ok && out.contains("file circles: 0"), "{out}");
}
