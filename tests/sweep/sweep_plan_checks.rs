//! Plans checked before they queue (issue 33, item 4): every task's flags through the command's
//! own parser, a task cap counted before the spec is expanded, a sweep directory that appears
//! whole or not at all, `plan --missing` for the sweep's own scheduler, and `status` that checks
//! a done task's results (a run deleted or torn is *missing* and runs again).

use crate::common;
use crate::sweep_helpers as sweep;

use std::path::Path;

use common::*;
use sweep::{plan, setup_with, states, status};

fn refused(dir: &Path, args: &[&str]) -> String {
    let o = run_in(dir, args);
    assert!(!o.status.success(), "{args:?} succeeded");
    stderr(&o)
}

/// Nothing of a sweep named S, staged or not, in `dir`.
fn nothing_planned(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".S.") || n == "S")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

const PLAN: [&str; 5] = ["sweep", "plan", "spec.toml", "--out", "S"];

#[test]
fn a_bad_value_fails_the_plan_naming_the_task_and_the_flag() {
    let t = tempfile::tempdir().unwrap();
    for (grid, task, needle) in [
        (
            "learning_rate = [1e-3, \"abc\"]\n",
            "task 1 (",
            "invalid value 'abc' for '--learning-rate",
        ),
        (
            "learning_rate = [-1.0]\n",
            "task 0 (",
            "expected a number greater than 0",
        ),
        ("max_epochs = [2, 0.5]\n", "task 1 (", "'--max-epochs"),
    ] {
        setup_with(t.path(), "", &format!("[grid]\n{grid}"));
        let e = refused(t.path(), &PLAN);
        assert!(e.contains(task) && e.contains(needle), "{grid}: {e}");
        nothing_planned(t.path());
        std::fs::remove_dir_all(t.path().join("cohort")).unwrap();
    }
}

#[test]
fn a_huge_grid_is_refused_before_it_is_expanded() {
    let t = tempfile::tempdir().unwrap();
    // 10^12 tasks: expanding them would take terabytes, so refusing them at all shows the count
    // comes first.
    let axes: String = [
        "learning_rate",
        "lambda_vel",
        "latent_dim",
        "hidden_dim",
        "solver_steps",
        "max_epochs",
        "batch_size",
        "patience",
        "lambda_density",
        "edge_pos_weight",
        "lambda_kl",
        "lambda_acc",
    ]
    .iter()
    .map(|k| {
        let v: Vec<String> = (1..=10).map(|i| format!("{i}.0")).collect();
        format!("{k} = [{}]\n", v.join(", "))
    })
    .collect();
    setup_with(t.path(), "", &format!("[grid]\n{axes}"));
    let e = refused(t.path(), &PLAN);
    assert!(
        e.contains("expands to 1000000000000 tasks") && e.contains("more than --max-tasks 100000"),
        "{e}"
    );
    nothing_planned(t.path());

    // 2 × 3 × 2 folds = 12: refused under 12, planned at 12.
    std::fs::remove_dir_all(t.path().join("cohort")).unwrap();
    setup_with(
        t.path(),
        "folds = [0, 1]\n",
        "[grid]\nlearning_rate = [1e-3, 1e-2]\nlatent_dim = [4, 8, 16]\n",
    );
    let e = refused(t.path(), &[&PLAN[..], &["--max-tasks", "11"]].concat());
    assert!(
        e.contains("12 tasks (1 variant(s) × 3 latent_dim × 2 learning_rate × 2 folds)"),
        "{e}"
    );
    let o = run_in(t.path(), &[&PLAN[..], &["--max-tasks", "12"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(status(t.path(), "S").len(), 12);
}

#[test]
fn a_sweep_directory_appears_whole_and_stale_staging_is_removed() {
    let t = tempfile::tempdir().unwrap();
    setup_with(t.path(), "folds = [0, 1]\n", "");
    // What a plan killed mid-way left (its process is gone), and an unrelated non-empty --out.
    let stale = t.path().join(".S.planning-999999999");
    std::fs::create_dir_all(stale.join("tasks")).unwrap();
    std::fs::write(stale.join("tasks/0.toml"), "junk").unwrap();
    std::fs::create_dir_all(t.path().join("X")).unwrap();
    std::fs::write(t.path().join("X/notes.txt"), "mine").unwrap();
    let e = refused(t.path(), &["sweep", "plan", "spec.toml", "--out", "X"]);
    assert!(e.contains("exists and is not a sweep"), "{e}");
    assert_eq!(std::fs::read_dir(t.path().join("X")).unwrap().count(), 1);
    // An empty --out made beforehand is fine.
    std::fs::create_dir_all(t.path().join("S")).unwrap();
    plan(t.path(), "local", None);
    assert!(!stale.exists(), "stale staging left");
    for f in [
        "S/sweep.json",
        "S/tasks/0.toml",
        "S/tasks/1.toml",
        "S/run-local.sh",
    ] {
        assert!(t.path().join(f).is_file(), "{f}");
    }
    nothing_staged(t.path());
}

fn nothing_staged(dir: &Path) {
    let staged: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".planning-")
        })
        .collect();
    assert!(staged.is_empty(), "{staged:?}");
}

#[test]
fn a_done_task_whose_run_is_gone_or_torn_is_missing_and_runs_again() {
    let t = tempfile::tempdir().unwrap();
    setup_with(t.path(), "folds = [0, 1, 2]\n", "");
    plan(t.path(), "local", Some(1));
    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = status(t.path(), "S");
    assert_eq!(states(&rows), ["done", "done", "done"]);
    let run = |i: usize| t.path().join(rows[i]["run_dir"].as_str().unwrap());
    // A user's clean-up of one run; a torn results file in another.
    std::fs::remove_dir_all(run(0)).unwrap();
    std::fs::write(run(1).join("test_metrics.json"), "{\"model\": {\"sc_lo").unwrap();
    let rows = status(t.path(), "S");
    assert_eq!(states(&rows), ["missing", "missing", "done"]);
    let text = stdout(&run_in(t.path(), &["sweep", "status", "S"]));
    assert!(text.contains("done before, but"), "{text}");
    assert!(text.contains("3 tasks: 1 done, 2 missing"), "{text}");

    // `plan --missing` keeps the sweep's own scheduler (local): no Slurm script.
    let o = run_in(t.path(), &["sweep", "plan", "--missing", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("2 of 3 tasks to run again"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("run-local.sh"), "{}", stdout(&o));
    assert!(!t.path().join("S/submit-missing.slurm").exists());

    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("2 of 3 tasks to run"), "{}", stderr(&o));
    assert_eq!(states(&status(t.path(), "S")), ["done", "done", "done"]);
    // The torn run was moved aside, not deleted, and said so in the task's log.
    let parent = run(1).parent().unwrap().to_path_buf();
    let aside = std::fs::read_dir(&parent)
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| e.file_name().to_string_lossy().contains(".torn-"));
    assert!(aside, "no torn run set aside in {}", parent.display());
    let log = std::fs::read_to_string(t.path().join("S/logs/1.log")).unwrap();
    assert!(
        log.contains("moved to") && log.contains("run again"),
        "{log}"
    );
}

#[test]
fn a_zip_sweeps_two_cohorts_and_command_line_overrides_win() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("A"), t.path().join("B"));
    for (dir, seed) in [(&a, 1), (&b, 2)] {
        std::fs::create_dir_all(dir).unwrap();
        common::synth_cohort(dir, 16, 12, seed);
    }
    let paths = |key: &str| -> String {
        let one = |d: &Path| match key {
            "sc_dir" => d.join("cohort/sc"),
            "morph_root" => d.join("cohort/morph"),
            _ => d.join("cohort/subject_info_sc.csv"),
        };
        format!(
            "{key} = [\"{}\", \"{}\"]\n",
            one(&a).display(),
            one(&b).display()
        )
    };
    let spec = format!(
        "command = \"train-gnn\"\n[base]\nmax_epochs = 40\nlatent_dim = 8\nhidden_dim = 16\n\
         solver_steps = 2\n[[zip]]\nname = [\"cohortA\", \"cohortB\"]\n{}{}{}",
        paths("sc_dir"),
        paths("morph_root"),
        paths("subject_info_csv")
    );
    std::fs::write(t.path().join("spec.toml"), spec).unwrap();
    let o = run_in(
        t.path(),
        &[
            &PLAN[..],
            &[
                "--scheduler",
                "local",
                "max_epochs=1",
                "learning_rate=[1e-3]",
            ],
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let rows = status(t.path(), "S");
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["cohortA/lr0.001", "cohortB/lr0.001"]);
    let o = run_in(t.path(), &["sweep", "run", "S"]);
    assert!(o.status.success(), "{}", stderr(&o));
    for (r, cohort) in status(t.path(), "S").iter().zip([&a, &b]) {
        assert_eq!(r["state"], "done", "{r}");
        let run = t.path().join(r["run_dir"].as_str().unwrap());
        let args = std::fs::read_to_string(run.join("args.json")).unwrap();
        let want = cohort.join("cohort/sc").display().to_string();
        assert!(args.contains(&want), "{want} not in {args}");
        let rows = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        let last_epoch = rows
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|r| r["epoch"].as_u64())
            .max();
        assert_eq!(
            last_epoch,
            Some(1),
            "max_epochs=1 on the command line wins:\n{rows}"
        );
    }
    let o = run_in(
        t.path(),
        &["compare", "S", "--group-by", "zip", "--format", "csv"],
    );
    let table = stdout(&o);
    assert!(
        table.contains("cohortA,1,") && table.contains("cohortB,1,"),
        "{table}"
    );
}

/// A value of the spec that another place of it, or the task's preset, would have set is said
/// when planning (the spec's flags win over a preset; a variant over `[base]`).
#[test]
fn shadowed_values_and_preset_values_the_spec_replaces_are_said() {
    let t = tempfile::tempdir().unwrap();
    setup_with(
        t.path(),
        "",
        "preset = \"residual\"\nlambda_topo = 0.01\n[[variant]]\nname = \"long\"\nmax_epochs = 2\n",
    );
    let o = run_in(t.path(), &[&PLAN[..], &["--scheduler", "local"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("variant long: max_epochs = 2 replaces [base] max_epochs = 1"),
        "{e}"
    );
    assert!(
        e.contains("the spec's lambda_topo = 0.01 replaces preset residual's lambda_topo = 0.0"),
        "{e}"
    );
    // The preset's other values, which nothing replaces, are not named.
    assert!(!e.contains("residual_tau"), "{e}");
}
