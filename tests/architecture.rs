//! docs/architecture.md stays true to src/: every top-level module is in the import-layer
//! table, imports only from layers below its own, and the module map's line counts are within
//! 10% (`scripts/module-map.py --check`; `--write` regenerates the counts).

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
