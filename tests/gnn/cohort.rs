//! `trainer cohort` through the real binary: its counts against the files themselves, its split
//! against the split a `train-gnn` run records, the reference's `configs/paths.yaml`, and the
//! defects and degenerate splits it names.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::common::*;

const FLAGS: [&str; 6] = [
    "--sc_dir",
    "cohort/sc",
    "--morph_root",
    "cohort/morph",
    "--subject_info_csv",
    "cohort/subject_info_sc.csv",
];

fn cohort_json(dir: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["cohort", "--format", "json"];
    args.extend(extra);
    let o = run_in(dir, &args);
    assert!(o.status.success(), "cohort: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("cohort --format json prints JSON")
}

/// numpy's default (linear) quantile of sorted values.
fn quantile(v: &[f64], p: f64) -> f64 {
    let at = p * (v.len() - 1) as f64;
    let (lo, hi) = (at.floor() as usize, at.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (at - lo as f64)
}

#[test]
fn counts_and_intervals_match_the_files_and_the_split_matches_train_gnns() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 30, 10, 3);
    let s = cohort_json(t.path(), &FLAGS);

    // From the files: scans per subject (SC file names) and ages (the subject table).
    let mut scans: BTreeMap<String, usize> = BTreeMap::new();
    for e in std::fs::read_dir(t.path().join("cohort/sc")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        let subject = name.split("_ses-").next().unwrap().to_string();
        *scans.entry(subject).or_default() += 1;
    }
    let table = std::fs::read_to_string(t.path().join("cohort/subject_info_sc.csv")).unwrap();
    let mut ages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split(',').collect();
        ages.entry(cols[0].to_string())
            .or_default()
            .push(cols[3].parse().unwrap());
    }
    let n_scans: usize = scans.values().sum();
    assert_eq!(s["all"]["subjects"], scans.len());
    assert_eq!(s["all"]["scans"], n_scans);
    let mut per: BTreeMap<String, usize> = BTreeMap::new();
    for n in scans.values() {
        *per.entry(n.to_string()).or_default() += 1;
    }
    assert_eq!(s["scans_per_subject"], serde_json::json!(per));
    let tiers = |k: &str| s["all"][k].as_u64().unwrap() as usize;
    assert_eq!(
        tiers("three_or_more_scans"),
        scans.values().filter(|&&n| n >= 3).count()
    );
    assert_eq!(
        tiers("two_scans"),
        scans.values().filter(|&&n| n == 2).count()
    );
    assert_eq!(
        tiers("one_scan"),
        scans.values().filter(|&&n| n == 1).count()
    );
    assert_eq!(s["ages_from_table"], n_scans);
    let mut dts: Vec<f64> = ages
        .values_mut()
        .flat_map(|a| {
            a.sort_by(f64::total_cmp);
            a.windows(2).map(|w| w[1] - w[0]).collect::<Vec<_>>()
        })
        .collect();
    dts.sort_by(f64::total_cmp);
    let d = &s["dt_consecutive"];
    assert_eq!(d["n"], dts.len());
    // The same f64 subtractions of the same parsed ages: equal to rounding (1e-12 years).
    for (key, p) in [
        ("min", 0.0),
        ("p10", 0.1),
        ("median", 0.5),
        ("p90", 0.9),
        ("max", 1.0),
    ] {
        let got = d[key].as_f64().unwrap();
        assert!(
            (got - quantile(&dts, p)).abs() < 1e-12,
            "{key}: {got} vs {}",
            quantile(&dts, p)
        );
    }

    // The split: test + train/val = all; every fold's train + val = train/val; the validation
    // parts partition train/val; and fold 0 is the split a train-gnn run records.
    let sp = &s["split"];
    let n = |v: &Value| v["subjects"].as_u64().unwrap();
    assert_eq!(n(&sp["test"]) + n(&sp["trainval"]), scans.len() as u64);
    let folds = sp["folds"].as_array().unwrap();
    assert_eq!(folds.len(), 5);
    assert_eq!(
        folds.iter().map(|f| n(&f["val"])).sum::<u64>(),
        n(&sp["trainval"])
    );
    for f in folds {
        assert_eq!(n(&f["train"]) + n(&f["val"]), n(&sp["trainval"]));
    }
    let mut args = vec!["train-gnn", "--model", "linear-drift", "--cv_fold", "0"];
    args.extend(FLAGS);
    args.extend(["--results_dir", "results", "--run-name", "ld"]);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "train-gnn: {}", stderr(&o));
    let meta: Value = serde_json::from_str(
        &std::fs::read_to_string(t.path().join("results/runs/ld/run_meta.json")).unwrap(),
    )
    .unwrap();
    let recorded = &meta["extra"]["split"];
    assert_eq!(
        recorded["test"].as_array().unwrap().len() as u64,
        n(&sp["test"])
    );
    let f0 = &recorded["folds"][0];
    assert_eq!(
        f0["train"].as_array().unwrap().len() as u64,
        n(&folds[0]["train"])
    );
    assert_eq!(
        f0["val"].as_array().unwrap().len() as u64,
        n(&folds[0]["val"])
    );

    // The text view says the same and gives the flags to train on it.
    let o = run_in(
        t.path(),
        &[
            "cohort", FLAGS[0], FLAGS[1], FLAGS[2], FLAGS[3], FLAGS[4], FLAGS[5],
        ],
    );
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "cohort: {} subjects, {n_scans} scans, 10 nodes",
            scans.len()
        )),
        "{text}"
    );
    assert!(
        text.contains("| fold 4 val |") || text.contains("fold 4 val"),
        "{text}"
    );
    assert!(
        text.contains("--sc_dir cohort/sc --morph_root cohort/morph"),
        "{text}"
    );
}

#[test]
fn the_references_paths_yaml_names_the_data_and_a_flag_wins_over_it() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 20, 8, 5);
    let proj = t.path().join("proj");
    std::fs::create_dir_all(proj.join("configs")).unwrap();
    std::fs::create_dir_all(proj.join("data/processed")).unwrap();
    std::fs::rename(t.path().join("cohort"), proj.join("data/processed/c")).unwrap();
    std::fs::write(
        proj.join("configs/paths.yaml"),
        "# as the reference's\nlocal:\n  data:\n    raw: data/raw\n    \
         sc_connectome_schaefer400: data/processed/c/sc\n    \
         morphology: data/processed/c/morph   # comment\n    \
         subject_info_sc: \"data/processed/c/subject_info_sc.csv\"\n  outputs:\n    \
         logs: outputs/logs\n",
    )
    .unwrap();
    // From another directory: relative paths start at the project root, not the cwd.
    let s = cohort_json(t.path(), &["--paths-yaml", "proj/configs/paths.yaml"]);
    assert_eq!(s["all"]["subjects"], 20);
    assert!(
        s["paths"]["sc_dir"]
            .as_str()
            .unwrap()
            .ends_with("proj/data/processed/c/sc"),
        "{}",
        s["paths"]
    );
    assert_eq!(s["ages_from_table"], s["all"]["scans"]);
    // A flag wins: another SC directory (missing) is the one read and named.
    let o = run_in(
        t.path(),
        &[
            "cohort",
            "--paths-yaml",
            "proj/configs/paths.yaml",
            "--sc-dir",
            "nowhere",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--sc-dir nowhere"), "{}", stderr(&o));
    // A file without the key: named with the file.
    std::fs::write(
        proj.join("configs/paths.yaml"),
        "local:\n  data:\n    raw: x\n",
    )
    .unwrap();
    let o = run_in(
        t.path(),
        &["cohort", "--paths-yaml", "proj/configs/paths.yaml"],
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("local.data.sc_connectome_schaefer400") && e.contains("paths.yaml"),
        "{e}"
    );
}

#[test]
fn defects_and_a_split_without_forecasts_are_named() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 20, 8, 7);
    // One morphology file gone: its scans are dropped and named.
    let morph = std::fs::read_dir(t.path().join("cohort/morph/ses-baselineYear1Arm1"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let gone = std::fs::read_dir(&morph)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::remove_file(&gone).unwrap();
    let s = cohort_json(t.path(), &FLAGS);
    assert_eq!(s["defects"]["scans_without_morph"], 1, "{}", s["defects"]);
    assert!(
        s["split_warnings"].as_array().unwrap().is_empty(),
        "{}",
        s["split_warnings"]
    );

    // Only baseline scans left: no subject has two scans; the split says what that costs.
    for e in std::fs::read_dir(t.path().join("cohort/sc")).unwrap() {
        let p = e.unwrap().path();
        if !p.to_string_lossy().contains("baselineYear1Arm1") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let s = cohort_json(t.path(), &FLAGS);
    let warnings = s["split_warnings"].to_string();
    assert!(
        warnings.contains("test subjects have no two scans"),
        "{warnings}"
    );
    assert!(
        warnings.contains("fold 0: no validation subject has two scans"),
        "{warnings}"
    );
    assert_eq!(s["all"]["pairs"], 0);

    // A malformed SC matrix: an error naming the file, nothing printed on stdout.
    let bad = std::fs::read_dir(t.path().join("cohort/sc"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::write(&bad, "1,2\nx,4\n").unwrap();
    let mut args = vec!["cohort"];
    args.extend(FLAGS);
    let o = run_in(t.path(), &args);
    assert!(!o.status.success());
    let name = bad.file_name().unwrap().to_string_lossy().to_string();
    assert!(stderr(&o).contains(&name), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

/// Defects the readers find are named, with their file, in every format of `trainer cohort`
/// (not "none" while the JSON counts them): NA morphology cells, a morphology file with two data
/// rows, an SC scan without morphology. CLG-ODE, which reads morphology, refuses the NA cells at
/// load naming the file; eb-drift, which does not, trains with the warning.
#[test]
fn every_defect_is_named_in_every_format_and_nan_morphology_stops_clg_ode_by_name() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 20, 6, 9);
    let mut morphs: Vec<std::path::PathBuf> = Vec::new();
    let mut stack = vec![t.path().join("cohort/morph")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                morphs.push(p);
            }
        }
    }
    morphs.sort();
    // An NA cell in the first file, a second data row in the second, the third removed.
    let (nan, two_rows, gone) = (&morphs[0], &morphs[1], &morphs[2]);
    let text = std::fs::read_to_string(nan).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut cells: Vec<&str> = lines[1].split(',').collect();
    cells[1] = "NA";
    lines[1] = cells.join(",");
    std::fs::write(nan, lines.join("\n") + "\n").unwrap();
    let text = std::fs::read_to_string(two_rows).unwrap();
    let row = text.lines().nth(1).unwrap().to_string();
    std::fs::write(two_rows, format!("{}{row}\n", text)).unwrap();
    std::fs::remove_file(gone).unwrap();
    let name = |p: &std::path::Path| p.file_name().unwrap().to_string_lossy().into_owned();

    let s = cohort_json(t.path(), &FLAGS);
    assert_eq!(s["defects"]["morph_files_with_nan"], 1, "{}", s["defects"]);
    assert_eq!(s["defects"]["morph_files_with_extra_rows"], 1);
    assert!(s["defects"]["scans_without_morph"].as_u64().unwrap() >= 1);
    for format in ["table", "md"] {
        let mut args = vec!["cohort", "--format", format];
        args.extend(FLAGS);
        let o = run_in(t.path(), &args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        let defects = out.split("Defects").nth(1).unwrap_or("");
        assert!(
            !defects
                .trim_start_matches([' ', '#', '\n'])
                .starts_with("none"),
            "{out}"
        );
        for needle in [name(nan), name(two_rows), "no morphology file".to_string()] {
            assert!(
                defects.contains(&needle),
                "{format}: {needle} not named:\n{out}"
            );
        }
    }

    let train = |model: &str| {
        let mut args = vec!["train-gnn", "--model", model, "--cv_fold", "0"];
        args.extend(FLAGS);
        args.extend([
            "--results_dir",
            "res",
            "--run_name",
            model,
            "--max_epochs",
            "1",
        ]);
        run_in(t.path(), &args)
    };
    let o = train("clg-ode");
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains(&name(nan)) && err.contains("NA cells"),
        "{err}"
    );
    assert!(!t.path().join("res/runs/clg-ode").exists());
    let o = train("eb-drift");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&name(nan)), "{}", stderr(&o));
}

/// A baseline run the reference's way (no subject table): one line says the ages are visit
/// indices, not one line per scan.
#[test]
fn no_subject_table_is_one_line_not_one_per_scan() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 20, 6, 4);
    let o = run_in(
        t.path(),
        &[
            "train-gnn",
            "--model",
            "linear-drift",
            "--sc_dir",
            "cohort/sc",
            "--morph_root",
            "cohort/morph",
            "--results_dir",
            "res",
            "--cv_fold",
            "0",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(
        err.matches("no subject table (--subject-info-csv)").count(),
        1,
        "{err}"
    );
    assert!(!err.contains("not in the subject table"), "{err}");
}
