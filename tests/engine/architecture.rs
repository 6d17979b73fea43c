//! docs/architecture.md stays true to src/: every top-level module is in the import-layer
//! table, imports only from layers below its own, and the module map's line counts are within
//! 10% (`scripts/module-map.py --check`; `--write` regenerates the counts); and no files import
//! each other in a circle anywhere in src/, nor the children of a folder in a loop
//! (`scripts/file_circles.py`).

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
/// (the layer check above sees only top-level modules); no two children of a folder (its files
/// and subfolders, each with all it holds) either.
#[test]
fn no_import_circle_between_the_files_of_src() {
    let (ok, out) = file_circles(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(
        ok && out.contains("file circles: 0") && out.contains("folder loops: 0"),
        "{out}"
    );
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
    assert!(
        ok && out.contains("file circles: 0") && out.contains("folder loops: 0"),
        "{out}"
    );
}

/// A name the parent re-exports (`pub use`) leads to the file that defines it: a child using
/// `super::Dir`, which its sibling defines, depends on that sibling, not on the parent.
#[test]
fn the_circle_check_follows_pub_use_re_exports() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("out")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write("lib.rs", "pub mod out;\n");
    write(
        "out/mod.rs",
        "pub mod files;\npub mod meta;\npub use files::Dir;\n",
    );
    write("out/files.rs", "use super::meta::Meta;\npub struct Dir;\n");
    write("out/meta.rs", "use super::Dir;\npub struct Meta;\n");
    let (ok, out) = file_circles(&src);
    assert!(!ok, "{out}");
    assert!(
        out.contains("circle: src/out/files.rs src/out/meta.rs") && out.contains("file circles: 1"),
        "{out}"
    );
    // Defined in the parent itself: no circle.
    write(
        "out/mod.rs",
        "pub mod files;\npub mod meta;\npub struct Dir;\n",
    );
    write("out/files.rs", "use super::meta::Meta;\n");
    let (ok, out) = file_circles(&src);
    assert!(ok && out.contains("file circles: 0"), "{out}");
}

/// Two subfolders (a file `x.rs` and its folder `x/` count as one) whose files import each
/// other form a folder loop, though no file circle; cut one way, it is gone.
#[test]
fn the_folder_check_finds_a_loop_between_sibling_folders() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(src.join("room/a")).unwrap();
    std::fs::create_dir_all(src.join("room/b")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(src.join(name), text).unwrap();
    write("lib.rs", "pub mod room;\n");
    write("room/mod.rs", "pub mod a;\npub mod b;\n");
    write("room/a.rs", "pub mod one;\npub mod two;\n");
    write(
        "room/a/one.rs",
        "use crate::room::b::three::Three;\npub struct One;\n",
    );
    write("room/a/two.rs", "pub struct Two;\n");
    write("room/b/mod.rs", "pub mod three;\n");
    write(
        "room/b/three.rs",
        "use super::super::a::two::Two;\npub struct Three;\n",
    );
    let (ok, out) = file_circles(&src);
    assert!(!ok, "{out}");
    assert!(
        out.contains("folder loop: src/room: a b")
            && out.contains("file circles: 0")
            && out.contains("folder loops: 1"),
        "{out}"
    );
    write("room/b/three.rs", "pub struct Three;\n");
    let (ok, out) = file_circles(&src);
    assert!(
        ok && out.contains("file circles: 0") && out.contains("folder loops: 0"),
        "{out}"
    );
}
