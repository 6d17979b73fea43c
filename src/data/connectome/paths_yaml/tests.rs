use super::*;

const REFERENCE: &str = "# Path registry\nlocal:\n  data:\n    raw: data/raw\n    \
    sc_connectome_schaefer400: data/processed/sc_connectome/schaefer400\n    \
    morphology: \"data/processed/morphology\"  # quoted\n    \
    subject_info_sc: data/processed/table/subject_info_sc.csv\n  outputs:\n    \
    logs: outputs/logs\nhpc:\n  freesurfer:\n    bids_root: /GPFS/x/smri\n";

#[test]
fn the_references_layout_resolves_from_the_project_root() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("configs")).unwrap();
    let file = t.path().join("configs/paths.yaml");
    std::fs::write(&file, REFERENCE).unwrap();
    let p = PathsYaml::read(&file).unwrap();
    let c = p.cohort().unwrap();
    let root = std::fs::canonicalize(t.path()).unwrap();
    assert_eq!(
        c.sc_dir,
        root.join("data/processed/sc_connectome/schaefer400")
    );
    assert_eq!(c.morph_root, root.join("data/processed/morphology"));
    assert_eq!(
        c.subject_info_csv,
        Some(root.join("data/processed/table/subject_info_sc.csv"))
    );
    assert_eq!(
        p.path("hpc.freesurfer.bids_root").unwrap(),
        PathBuf::from("/GPFS/x/smri")
    );
    assert_eq!(p.get("local.outputs.logs"), Some("outputs/logs"));
}

#[test]
fn errors_name_the_line_or_the_key() {
    assert!(parse("local:\n\tdata: x\n").unwrap_err().contains("line 2"));
    assert!(
        parse("local:\n  just text\n")
            .unwrap_err()
            .contains("line 2")
    );
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("paths.yaml");
    std::fs::write(&file, "local:\n  data:\n    morphology: m\n").unwrap();
    let e = PathsYaml::read(&file)
        .unwrap()
        .cohort()
        .unwrap_err()
        .to_string();
    assert!(e.contains(SC_KEY) && e.contains("paths.yaml"), "{e}");
}

/// Each hostile or ambiguous file is refused with its line and what was wrong.
#[test]
fn hostile_yaml_is_refused_naming_the_line() {
    let cases: &[(&str, &str)] = &[
        (
            "local:\n  data:\n    morphology: data/m#2\n",
            "`#` inside a value",
        ),
        (
            "base: &a data\nlocal:\n  data:\n    morphology: *a\n",
            "`&`",
        ),
        ("local:\n  data:\n    morphology: *a\n", "`*`"),
        (
            "local:\n  data:\n    morphology: !!python/object x\n",
            "`!`",
        ),
        ("local:\n  data:\n    morphology: [a, b]\n", "`[`"),
        ("local:\n  data:\n    morphology: {a: b}\n", "`{`"),
        ("local:\n  data:\n    morphology: |\n      x\n", "`|`"),
        ("---\nlocal: x\n", "documents"),
        ("local:\n  - data\n", "sequence"),
        (
            "local:\n  data:\n    morphology: a\n    morphology: b\n",
            "given twice",
        ),
        (
            "local:\n  data:\n    morpholgy: a\n",
            "unknown key `local.data.morpholgy`",
        ),
        (
            "local:\n  data:\n    morphology: a\u{7}b\n",
            "control character",
        ),
    ];
    for (text, needle) in cases {
        let e = parse(text).expect_err(text);
        assert!(e.contains(needle) && e.contains("line "), "{text:?}: {e}");
    }
    // A comment after a space is YAML's and the reference's alike.
    let t = parse("local:\n  data:\n    morphology: data/m # the tree\n").unwrap();
    let Some(Node::Map(local)) = t.get("local") else {
        panic!("{t:?}")
    };
    assert!(format!("{local:?}").contains("\"data/m\""), "{local:?}");
}

#[test]
fn deep_nesting_and_large_files_are_refused_before_they_cost_memory() {
    let mut deep = String::new();
    for i in 0..10_000 {
        deep.push_str(&" ".repeat(i));
        deep.push_str("k:\n");
    }
    let e = parse(&deep).unwrap_err();
    assert!(e.contains("deeper than 16"), "{e}");
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("paths.yaml");
    std::fs::write(&big, "# x\n".repeat(300_000)).unwrap();
    let e = PathsYaml::read(&big).unwrap_err().to_string();
    assert!(e.contains("bytes") && e.contains("paths.yaml"), "{e}");
}

#[test]
fn paths_that_leave_the_root_or_ask_for_a_shell_are_refused() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir(t.path().join("configs")).unwrap();
    let file = t.path().join("configs/paths.yaml");
    for (value, needle) in [
        ("../../etc", "`..`"),
        ("data/$(rm -rf ~)", "shell syntax"),
        ("data/`id`", "`"),
        ("${HOME}/data", "shell syntax"),
    ] {
        let text = format!("local:\n  data:\n    morphology: \"{value}\"\n");
        std::fs::write(&file, text).unwrap();
        let e = PathsYaml::read(&file)
            .unwrap()
            .path(MORPH_KEY)
            .map(|p| p.display().to_string())
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle) && e.contains(MORPH_KEY), "{value}: {e}");
    }
    // An absolute path is the user's to choose.
    std::fs::write(&file, "local:\n  data:\n    morphology: /data/../m\n").unwrap();
    assert_eq!(
        PathsYaml::read(&file).unwrap().path(MORPH_KEY).unwrap(),
        PathBuf::from("/data/../m")
    );
}
