//! `compare --against`: partners by fold and seed, subjects paired only where both have a
//! finite value, the table and its fold spread.

use super::*;

fn line(configuration: &str, against: Option<f64>, identity: f64) -> AgainstLine {
    let p = |mean: f64| Paired {
        n: 5,
        mean,
        ci_low: mean - 1.0,
        ci_high: mean + 1.0,
        below: 0,
        above: 5,
        p_wilcoxon: 0.0625,
        p_holm: None,
        rounding_only: false,
    };
    AgainstLine {
        run: format!("{configuration}/fold"),
        configuration: configuration.into(),
        model: "clg-ode".into(),
        fold: "0".into(),
        seed: "1".into(),
        against: against.map(|_| "lin".into()),
        is_against: false,
        unpaired: against.is_none().then(|| "no lin run".into()),
        metric: "sc_log_mse".into(),
        vs_against: against.map(p),
        dropped_vs_against: 0,
        vs_identity: p(identity),
        dropped_vs_identity: 0,
    }
}

#[test]
fn the_fold_spread_is_over_folds_of_one_configuration() {
    let lines = [
        line("a", Some(1.0), -2.0),
        line("b", None, 0.5),
        line("a", Some(3.0), -4.0),
    ];
    let spread = fold_spread(&lines);
    assert_eq!(spread.len(), 2);
    let a = &spread[0];
    assert_eq!((a.n_folds, a.n_subjects), (2, 5));
    let vs = a.vs_against.as_ref().unwrap();
    assert_eq!(
        (vs.mean, vs.sd, vs.min, vs.max),
        (2.0, Some(2f64.sqrt()), 1.0, 3.0)
    );
    assert_eq!(a.vs_identity.unwrap().mean, -3.0);
    assert!(spread[1].vs_against.is_none() && spread[1].vs_identity.unwrap().sd.is_none());
    let table = render(&lines, "lin");
    assert!(table.contains("| n subjects |"), "{table}");
    assert!(table.contains("| partner |"), "{table}");
    assert!(
        table.contains("| a | sc_log_mse | 2 | 5 | 2.00e0 ± 1.41e0 |"),
        "{table}"
    );
    assert!(table.contains("unpaired: no lin run"), "{table}");
    assert!(
        !table.contains("| b | sc_log_mse | 1 |"),
        "one fold: no spread row"
    );
}

fn refs(r: &[(String, String, String)]) -> Vec<(&str, &str, &str)> {
    r.iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect()
}

/// A run directory with `model` in its results and `per_subject.csv` rows `(subject, model
/// cell, identity cell)`.
fn run(root: &Path, name: &str, model: &str, rows: &[(&str, &str, &str)]) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let d = RunDir::new(&dir);
    let none = crate::metrics::ScMetrics::undefined();
    let skill = crate::outputs::result_files::examples::no_skill();
    let results =
        crate::outputs::result_files::examples::results(model, &[], 0, (none, none, skill));
    crate::files::write_json(&d.results_json(), &results).unwrap();
    let mut csv = String::from("subject,forecast,model_sc_log_mse,identity_sc_log_mse\n");
    for (s, m, id) in rows {
        csv.push_str(&format!("{s},1,{m},{id}\n"));
    }
    csv.push_str("nofollowup,0,,\n");
    std::fs::write(d.per_subject_csv(), csv).unwrap();
    dir
}

fn compared<'a>(dir: &'a Path, fold: &str, seed: &str) -> Compared<'a> {
    Compared {
        name: dir.display().to_string(),
        dir,
        configuration: String::new(),
        fold: fold.into(),
        seed: seed.into(),
    }
}

#[test]
fn each_run_pairs_with_the_partner_of_its_fold_and_seed() {
    let t = tempfile::tempdir().unwrap();
    let rows = |v: f64| -> Vec<(String, String, String)> {
        (0..6)
            .map(|i| (format!("s{i}"), (v + i as f64).to_string(), "10".into()))
            .collect()
    };
    let (a, b, c) = (rows(1.0), rows(2.0), rows(5.0));
    let eb0 = run(t.path(), "eb0", "eb-drift", &refs(&a));
    let eb1 = run(t.path(), "eb1", "eb-drift", &refs(&b));
    let ours = run(t.path(), "ours", "clg-ode", &refs(&c));
    let other_seed = run(t.path(), "seed9", "clg-ode", &refs(&c));
    let runs = [
        compared(&eb0, "0", "1"),
        compared(&eb1, "1", "1"),
        compared(&ours, "1", "1"),
        compared(&other_seed, "1", "9"),
    ];
    let lines = against_lines(&runs, "eb-drift", &[]).unwrap();
    let l = &lines[2];
    assert_eq!(l.against.as_deref(), Some(runs[1].name.as_str()), "{l:?}");
    assert_eq!(l.vs_against.unwrap().mean, 3.0, "5 − 2, not 5 − 1");
    assert!(lines[0].is_against && lines[0].against.is_none());
    let unpaired = &lines[3];
    assert!(unpaired.vs_against.is_none() && unpaired.against.is_none());
    let why = unpaired.unpaired.as_deref().unwrap();
    assert!(why.contains("fold 1 and seed 9"), "{why}");
    let table = render(&lines, "eb-drift");
    let row = table
        .lines()
        .find(|r| r.starts_with(&format!("| {} |", runs[2].name)))
        .unwrap();
    assert!(row.contains(&format!("| {} |", runs[1].name)), "{table}");

    // Two candidates for one run: an error naming both.
    let twin = run(t.path(), "eb1b", "eb-drift", &refs(&b));
    let mut two: Vec<Compared> = runs
        .iter()
        .map(|c| compared(c.dir, &c.fold, &c.seed))
        .collect();
    two.push(compared(&twin, "1", "1"));
    let e = against_lines(&two, "eb-drift", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&runs[1].name) && e.contains(&two[4].name) && e.contains(&runs[2].name),
        "{e}"
    );
}

/// An eb-drift run with an empty cell (a negative weight's NaN) and a run with a non-finite
/// value: no panic, only the subjects finite in both are paired, the others counted.
#[test]
fn subjects_missing_or_not_finite_on_either_side_are_dropped_and_counted() {
    let t = tempfile::tempdir().unwrap();
    let eb = run(
        t.path(),
        "eb",
        "eb-drift",
        &[
            ("a", "1", "2"),
            ("b", "", "2"),
            ("c", "1", "2"),
            ("d", "1", "2"),
        ],
    );
    let ours = run(
        t.path(),
        "ours",
        "clg-ode",
        &[
            ("a", "3", "2"),
            ("b", "3", "2"),
            ("c", "inf", "2"),
            ("d", "5", "NaN"),
        ],
    );
    let runs = [compared(&eb, "0", "1"), compared(&ours, "0", "1")];
    let lines = against_lines(&runs, "eb-drift", &[]).unwrap();
    let l = &lines[1];
    let vs = l.vs_against.unwrap();
    assert_eq!((vs.n, l.dropped_vs_against), (2, 2), "{l:?}");
    assert_eq!(vs.mean, 3.0, "a: 3 − 1, d: 5 − 1");
    assert_eq!((l.vs_identity.n, l.dropped_vs_identity), (2, 2));
    assert!(render(&lines, "eb-drift").contains("2 (2 dropped)"));

    // Nothing left to pair: not computable, said so, never a number.
    let none = run(
        t.path(),
        "none",
        "clg-ode",
        &[("a", "", ""), ("b", "nan", "1")],
    );
    let runs = [compared(&eb, "0", "1"), compared(&none, "0", "1")];
    let lines = against_lines(&runs, "eb-drift", &[]).unwrap();
    assert!(!lines[1].vs_against.unwrap().computable());
    let table = render(&lines, "eb-drift");
    assert!(table.contains("not computable (no subject)"), "{table}");
    assert!(!table.contains("NaN"), "{table}");
    let json = serde_json::to_value(&lines[1]).unwrap();
    assert!(json["vs_against"]["p_wilcoxon"].is_null(), "{json}");

    // A metric the file has no column for is an error naming the file.
    let e = against_lines(&runs, "eb-drift", &["nope".into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("per_subject.csv") && e.contains("model_nope"),
        "{e}"
    );
}

/// `--against NAME` where NAME is no run's model names one run: a name that two runs have
/// (`fold0` of two sweeps), or a model's runs and another run, is refused with every candidate;
/// the run's directory picks one.
#[test]
fn a_run_name_matching_several_runs_is_refused_with_the_candidates() {
    let t = tempfile::tempdir().unwrap();
    let rows: Vec<(String, String, String)> = (0..6)
        .map(|i| (format!("s{i}"), (1 + i).to_string(), "10".into()))
        .collect();
    let a = run(t.path(), "a/fold0", "clg-ode", &refs(&rows));
    let b = run(t.path(), "b/fold0", "clg-ode", &refs(&rows));
    let ours = run(t.path(), "ours", "clg-ode", &refs(&rows));
    // Different seeds: each run would get a partner of its own, silently.
    let runs = [
        compared(&a, "0", "1"),
        compared(&b, "0", "2"),
        compared(&ours, "0", "1"),
    ];
    let e = against_lines(&runs, "fold0", &[]).unwrap_err().to_string();
    for what in [
        &*runs[0].name,
        &runs[1].name,
        "names 2 runs",
        "--against DIR",
    ] {
        assert!(e.contains(what), "no `{what}` in: {e}");
    }
    assert!(e.contains("--against clg-ode"), "their one model: {e}");
    assert!(!e.contains(&format!("{} (", runs[2].name)), "{e}");

    // The path picks one; it pairs with the run of its fold and seed only.
    let lines = against_lines(&runs, &runs[0].name, &[]).unwrap();
    assert!(lines[0].is_against && !lines[1].is_against, "{lines:?}");
    assert_eq!(lines[2].against.as_deref(), Some(runs[0].name.as_str()));
    assert!(lines[1].unpaired.is_some(), "{lines:?}");

    // A model's name and another run's name at once: refused too, naming both kinds.
    let eb = run(t.path(), "eb", "eb-drift", &refs(&rows));
    let named_eb = run(t.path(), "x/eb-drift", "clg-ode", &refs(&rows));
    let runs = [
        compared(&eb, "0", "1"),
        compared(&named_eb, "0", "1"),
        compared(&ours, "0", "1"),
    ];
    let e = against_lines(&runs, "eb-drift", &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("is the model of some runs and the name of others")
            && e.contains(&runs[0].name)
            && e.contains(&runs[1].name),
        "{e}"
    );
    // One run by its name alone is still a partner.
    let solo = [compared(&a, "0", "1"), compared(&ours, "0", "1")];
    let lines = against_lines(&solo, "fold0", &[]).unwrap();
    assert_eq!(lines[1].against.as_deref(), Some(solo[0].name.as_str()));
}
