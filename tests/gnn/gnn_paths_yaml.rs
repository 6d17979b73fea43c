//! The reference's `configs/paths.yaml` wherever data paths are named: a `train-gnn` run and a
//! sweep that read only the file score the same `per_subject.csv` as the run with explicit paths;
//! the run records the resolved paths and repeats without the file; `eval-gnn` reads a moved
//! cohort through it; flags given win, said once; hostile files are refused by name and line.

use std::path::{Path, PathBuf};

use crate::common::*;

/// A project laid out as the reference's: `proj/configs/paths.yaml` naming `proj/data/cohort`
/// (relative to the project root, the folder above `configs/`) and `proj/outputs/results`.
fn project(t: &Path) -> PathBuf {
    let proj = t.join("proj");
    std::fs::create_dir_all(proj.join("configs")).unwrap();
    std::fs::create_dir_all(proj.join("data")).unwrap();
    synth_cohort(&proj.join("data"), 30, 10, 5);
    std::fs::write(
        proj.join("configs/paths.yaml"),
        "# Path registry\nlocal:\n  data:\n    raw: data/raw\n    \
         sc_connectome_schaefer400: data/cohort/sc\n    morphology: data/cohort/morph  # tree\n    \
         subject_info_sc: \"data/cohort/subject_info_sc.csv\"\n  outputs:\n    \
         results: outputs/results\n    clg_ode: outputs/results/clg_ode\nhpc:\n  x:\n    y: /GPFS/z\n",
    )
    .unwrap();
    proj
}

const EB: [&str; 6] = ["--model", "eb-drift", "--cv_fold", "0", "--run_name", "eb"];

fn train(cwd: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["train-gnn"];
    args.extend(EB);
    args.extend(extra);
    run_in(cwd, &args)
}

fn per_subject(run: &Path) -> String {
    std::fs::read_to_string(run.join("per_subject.csv"))
        .unwrap_or_else(|e| panic!("{}: {e}", run.join("per_subject.csv").display()))
}

#[test]
fn a_run_reading_only_paths_yaml_scores_as_the_run_with_explicit_paths() {
    let t = tempfile::tempdir().unwrap();
    let proj = project(t.path());
    let data = proj.join("data/cohort");
    let (sc, morph, table) = (
        data.join("sc"),
        data.join("morph"),
        data.join("subject_info_sc.csv"),
    );
    let o = train(
        t.path(),
        &[
            "--sc_dir",
            sc.to_str().unwrap(),
            "--morph_root",
            morph.to_str().unwrap(),
            "--subject_info_csv",
            table.to_str().unwrap(),
            "--results_dir",
            "explicit",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let explicit = per_subject(&t.path().join("explicit/runs/eb"));

    // From another folder, with the file alone: results under local.outputs.results.
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let o = train(&elsewhere, &["--paths-yaml", "../proj/configs/paths.yaml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = proj.join("outputs/results/runs/eb");
    assert_eq!(per_subject(&run), explicit);
    // The run holds the resolved paths: args.json (with the file named) and config.toml.
    let args: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("args.json")).unwrap()).unwrap();
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap().display().to_string();
    assert_eq!(args["sc_dir"].as_str(), Some(abs(&sc).as_str()), "{args}");
    assert_eq!(
        args["subject_info_csv"].as_str(),
        Some(abs(&table).as_str())
    );
    assert!(args["paths_yaml"].as_str().is_some(), "{args}");
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        config.contains(&abs(&morph)) && !config.contains("paths_yaml"),
        "{config}"
    );

    // A sweep whose [base] names the file: its tasks get the resolved paths at plan time.
    std::fs::write(
        t.path().join("spec.toml"),
        "command = \"train-gnn\"\nfolds = [0]\n[base]\nmodel = \"eb-drift\"\n\
         paths_yaml = \"proj/configs/paths.yaml\"\n",
    )
    .unwrap();
    // `sweep plan spec.toml --out S --scheduler local`, which must succeed.
    crate::sweep_helpers::plan(t.path(), "local", None);
    let task = std::fs::read_to_string(t.path().join("S/tasks/0.toml")).unwrap();
    assert!(
        task.contains(&abs(&sc)) && !task.contains("paths_yaml"),
        "{task}"
    );
    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(per_subject(&t.path().join("S/runs/fold0")), explicit);

    // The reference's baseline scripts' spelling, `--config configs/paths.yaml`, the same.
    let o = train(
        &proj,
        &["--config", "configs/paths.yaml", "--run_name", "eb2"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        per_subject(&proj.join("outputs/results/runs/eb2")),
        explicit
    );

    // Without the file, the run repeats from its config.toml.
    std::fs::remove_file(proj.join("configs/paths.yaml")).unwrap();
    let cfg = run.join("config.toml");
    let o = train(
        t.path(),
        &["--config", cfg.to_str().unwrap(), "--run_name", "again"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        per_subject(&proj.join("outputs/results/runs/again")),
        explicit
    );
}

#[test]
fn flags_win_over_the_file_said_once_and_saved_runs_read_it_too() {
    let t = tempfile::tempdir().unwrap();
    let proj = project(t.path());
    let yaml = proj.join("configs/paths.yaml");
    let y = yaml.to_str().unwrap();
    let o = train(t.path(), &["--paths-yaml", y, "--results_dir", "mine"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("the flags given win").count(), 1, "{err}");
    assert!(
        err.contains("--results-dir over its local.outputs.results"),
        "{err}"
    );
    let run = t.path().join("mine/runs/eb");
    assert!(run.join("per_subject.csv").exists());

    // The cohort moves: eval-gnn finds it through the file, not through the run's own paths.
    let moved = proj.join("data/moved");
    std::fs::rename(proj.join("data/cohort"), &moved).unwrap();
    let text = std::fs::read_to_string(&yaml)
        .unwrap()
        .replace("data/cohort", "data/moved");
    std::fs::write(&yaml, text).unwrap();
    let r = run.to_str().unwrap();
    let o = run_in(t.path(), &["eval-gnn", r, "--out", "e1"]);
    assert!(!o.status.success(), "the run's own paths are gone");
    let o = run_in(t.path(), &["eval-gnn", r, "--out", "e2", "--paths-yaml", y]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t.path().join("e2").is_dir());
}

#[test]
fn hostile_paths_files_are_refused_by_name_and_line() {
    let t = tempfile::tempdir().unwrap();
    let proj = project(t.path());
    let yaml = proj.join("configs/paths.yaml");
    for (text, needle) in [
        (
            "local:\n  data:\n    sc_connectome_schaefer400: data/sc#2\n",
            "line 3: `#` inside a value",
        ),
        (
            "local:\n  data:\n    sc_connectome_schaefer400: *anchor\n",
            "line 3: `*`",
        ),
        (
            "local:\n  data:\n    sc_connectome_schaefer400: \"$(touch pwned)\"\n",
            "shell syntax",
        ),
        (
            "local:\n  data:\n    sc_connectome_schaefer400: ../../../etc\n",
            "`..`",
        ),
        (
            "local:\n  data:\n    sc_dir: data\n",
            "unknown key `local.data.sc_dir`",
        ),
    ] {
        std::fs::write(&yaml, text).unwrap();
        let o = train(t.path(), &["--paths-yaml", yaml.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{text}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains("paths.yaml") && err.contains(needle),
            "{text}: {err}"
        );
    }
    assert!(!t.path().join("pwned").exists() && !proj.join("pwned").exists());
    // A file that names no SC directory, with no --sc_dir: the key and the flag are named.
    std::fs::write(&yaml, "local:\n  data:\n    morphology: m\n").unwrap();
    let o = train(t.path(), &["--paths-yaml", yaml.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("local.data.sc_connectome_schaefer400") && err.contains("--sc-dir"),
        "{err}"
    );
}
