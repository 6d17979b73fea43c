use super::*;

fn known(_: &str, key: &str) -> bool {
    [
        "max_epochs",
        "pos_weight",
        "lambda_density",
        "fixed_support",
        "preset",
        "resume_from",
        "cv_folds",
    ]
    .contains(&key)
}

fn parse(text: &str) -> Result<Spec> {
    Spec::parse(Path::new("s.toml"), text, &known, 100_000, &[])
}

#[test]
fn a_grid_times_folds_expands_with_stable_names() {
    let s = parse(
        "command = \"train-gnn\"\nfolds = [0, 1]\n[base]\nmax_epochs = 3\n[grid]\n\
         pos_weight = [1.0, 3.0]\nlambda_density = [0.0, 0.01]\n",
    )
    .unwrap();
    let names: Vec<&str> = s.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), 8);
    assert!(names.contains(&"ld0.01_pw3.0/fold1"), "{names:?}");
    let t = &s.tasks[0];
    assert_eq!(t.flags["max_epochs"].as_integer(), Some(3));
    assert_eq!(t.flags["cv_fold"].as_integer(), Some(0));
    assert_eq!(t.varied["fold"], "0");
}

#[test]
fn zipped_keys_vary_together_and_name_their_tasks() {
    let s = parse(
        "command = \"train-gnn\"\nfolds = [0]\n[grid]\nlambda_density = [0.0, 0.01]\n\
         [[zip]]\nname = [\"a\", \"b\"]\nmax_epochs = [1, 2]\npos_weight = [1.0, 3.0]\n",
    )
    .unwrap();
    let names: Vec<&str> = s.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "a/ld0.0/fold0",
            "a/ld0.01/fold0",
            "b/ld0.0/fold0",
            "b/ld0.01/fold0"
        ]
    );
    let b = &s.tasks[2];
    assert_eq!(b.flags["max_epochs"].as_integer(), Some(2));
    assert_eq!(b.flags["pos_weight"].as_float(), Some(3.0));
    assert_eq!(b.varied["zip"], "b");
    assert_eq!(b.varied["max_epochs"], "2");
    for (zip, needle) in [
        (
            "max_epochs = [1, 2]\npos_weight = [1.0]\n",
            "zipped lists must be as long",
        ),
        ("lambda_density = [1.0, 2.0]\n", "also in [grid]"),
        (
            "name = [\"a\"]\nmax_epochs = [1, 2]\n",
            "1 labels for 2 values",
        ),
        (
            "name = [\"a\", \"a\"]\nmax_epochs = [1, 2]\n",
            "labels must differ",
        ),
        ("max_epochs = 3\n", "expected a non-empty list"),
        ("nope = [1]\n", "not a flag"),
    ] {
        let e = parse(&format!(
            "command = \"train-gnn\"\n[grid]\nlambda_density = [0.0]\n[[zip]]\n{zip}"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains(needle), "{zip}: {e}");
    }
}

#[test]
fn command_line_overrides_replace_the_specs_values() {
    let text = "command = \"train-gnn\"\n[base]\nmax_epochs = 3\n[grid]\n\
                pos_weight = [1.0, 3.0]\n[[variant]]\nname = \"v\"\nmax_epochs = 9\n";
    let over = |args: &[&str]| -> Result<Spec> {
        let o: Vec<(String, toml::Value)> =
            args.iter().map(|a| parse_override(a).unwrap()).collect();
        Spec::parse(Path::new("s.toml"), text, &known, 100_000, &o)
    };
    let s = over(&[
        "max_epochs=5",
        "pos_weight=[2.0]",
        "lambda-density=[0.0, 0.1]",
    ])
    .unwrap();
    let names: Vec<&str> = s.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["v/ld0.0_pw2.0", "v/ld0.1_pw2.0"]);
    assert!(
        s.tasks
            .iter()
            .all(|t| t.flags["max_epochs"].as_integer() == Some(5))
    );
    assert_eq!(
        parse_override("preset=residual").unwrap().1.as_str(),
        Some("residual")
    );
    assert!(parse_override("max_epochs").is_err());
    let e = over(&["nope=1"]).unwrap_err().to_string();
    assert!(
        e.contains("`nope` is not a flag of trainer train-gnn"),
        "{e}"
    );
}

#[test]
fn variants_and_errors_name_the_line() {
    let s = parse(
        "command = \"train-gnn\"\n[[variant]]\nname = \"a\"\nfixed_support = true\n\
         [[variant]]\nname = \"b\"\n",
    )
    .unwrap();
    assert_eq!(s.tasks.len(), 2);
    assert_eq!(s.tasks[0].name, "a");
    let e = parse("command = \"train-gnn\"\n[grid]\nbogus = [1]\n").unwrap_err();
    assert!(
        e.to_string().contains("s.toml:3") && e.to_string().contains("bogus"),
        "{e}"
    );
    let e = parse("command = \"train-gnn\"\n[grid]\npos_weight = []\n").unwrap_err();
    assert!(
        e.to_string()
            .contains("s.toml:3: the grid of `pos_weight` is empty"),
        "{e}"
    );
    let e =
        parse("command = \"train-gnn\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n")
            .unwrap_err();
    assert!(e.to_string().contains("both named `a`"), "{e}");
    let e = parse("command = \"train-gnn\"\n[then]\nmax_epochs = 1\n").unwrap_err();
    assert!(
        e.to_string().contains("s.toml:2") && e.to_string().contains("folds"),
        "{e}"
    );
    let e =
        parse("command = \"train-gnn\"\nfolds = [0]\n[then]\nresume_from = \"x\"\n").unwrap_err();
    assert!(e.to_string().contains("s.toml:4"), "{e}");
}

#[test]
fn a_then_stage_adds_one_resumed_task_per_phase_one_task() {
    let s = parse(
        "command = \"train-gnn\"\nfolds = [0, 1]\n[grid]\npos_weight = [1.0, 3.0]\n\
         [then]\nname = \"fine\"\nlambda_density = 0.1\n",
    )
    .unwrap();
    assert_eq!(s.tasks.len(), 8);
    let p2 = &s.tasks[5];
    assert_eq!(p2.after, Some(1));
    assert_eq!(p2.name, format!("fine/{}", s.tasks[1].name));
    assert_eq!(p2.flags["lambda_density"].as_float(), Some(0.1));
    assert_eq!(p2.flags["cv_fold"], s.tasks[1].flags["cv_fold"]);
    assert_eq!(p2.varied["stage"], "fine");
    assert_eq!(s.tasks[1].varied["stage"], "phase1");
    assert!(s.tasks[..4].iter().all(|t| t.after.is_none()));
}

#[test]
fn a_command_line_override_reaches_phase_two() {
    let text = "command = \"train-gnn\"\nfolds = [0]\n[base]\nmax_epochs = 3\n[then]\n\
                max_epochs = 20\nfixed_support = true\n";
    let o = [parse_override("max_epochs=5").unwrap()];
    let s = Spec::parse(Path::new("s.toml"), text, &known, 100_000, &o).unwrap();
    assert_eq!(s.tasks.len(), 2);
    for t in &s.tasks {
        assert_eq!(t.flags["max_epochs"].as_integer(), Some(5), "{}", t.name);
    }
    // The rest of [then] still applies to phase 2.
    assert_eq!(s.tasks[1].flags["fixed_support"].as_bool(), Some(true));
}

#[test]
fn a_value_another_place_of_the_spec_overrides_is_named() {
    let s = parse(
        "command = \"train-gnn\"\n[base]\nmax_epochs = 20\npos_weight = 2.0\n[grid]\n\
         pos_weight = [1.0, 3.0]\n[[variant]]\nname = \"short\"\nmax_epochs = 10\n\
         [[variant]]\nname = \"long\"\n",
    )
    .unwrap();
    assert_eq!(
        s.shadowed,
        [
            "variant short: max_epochs = 10 replaces [base] max_epochs = 20",
            "[grid] pos_weight replaces [base] pos_weight = 2.0",
        ]
    );
    // And the overriding value is the one the tasks get.
    let short = s
        .tasks
        .iter()
        .find(|t| t.name.starts_with("short"))
        .unwrap();
    assert_eq!(short.flags["max_epochs"].as_integer(), Some(10));
    let healthy =
        parse("command = \"train-gnn\"\n[base]\nmax_epochs = 2\n[grid]\npos_weight = [1.0]\n")
            .unwrap();
    assert!(healthy.shadowed.is_empty(), "{:?}", healthy.shadowed);
}

#[test]
fn nested_task_names_and_folds_beyond_cv_folds_are_refused() {
    let e =
        parse("command = \"train-gnn\"\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a/b\"\n")
            .unwrap_err()
            .to_string();
    assert!(
        e.contains("`a`") && e.contains("`a/b`") && e.contains("hold"),
        "{e}"
    );
    let e = parse("command = \"train-gnn\"\nfolds = [0, 5]\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("fold 5") && e.contains("cv_folds is 5"), "{e}");
    let e = parse("command = \"train-gnn\"\nfolds = [2]\n[base]\ncv_folds = 2\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("fold 2") && e.contains("cv_folds is 2"), "{e}");
    // Siblings are fine: `a/b` and `a/c`, `ab` and `a`.
    parse(
        "command = \"train-gnn\"\n[[variant]]\nname = \"a/b\"\n[[variant]]\nname = \"a/c\"\n\
         [[variant]]\nname = \"ab\"\n",
    )
    .unwrap();
}

#[test]
fn the_specs_shape_is_checked_with_the_line_of_the_key() {
    for (text, needle) in [
        (
            "command = \"train-gnn\"\n[base]\nmax_epochs = 1\n[extra]\na = 1\n",
            "s.toml:4: unknown key `extra`; a spec has command, base, grid, variant, folds, \
             seeds, then, resources, zip",
        ),
        (
            "command = 3\n",
            "s.toml:1: command `3`: expected train-gnn or train-mnist",
        ),
        (
            "command = \"train-gnn\"\nfolds = [\"a\"]\n",
            "s.toml:2: `folds` must be a list of integers",
        ),
        (
            "command = \"train-gnn\"\n[grid]\nmax_epochs = [1]\n[[variant]]\nname = \"a\"\n\
             [[variant]]\nmax_epochs = 2\n",
            "s.toml:4: a [[variant]] needs `name = \"...\"`",
        ),
        (
            "folds = [0]\n",
            "s.toml: no `command = \"train-gnn\"` (or train-mnist)",
        ),
    ] {
        let e = parse(text).unwrap_err().to_string();
        assert_eq!(e, needle, "{text}");
    }
    assert_eq!(
        parse("command = \"train-mnist\"\n").unwrap().command.name(),
        "train-mnist"
    );
}
