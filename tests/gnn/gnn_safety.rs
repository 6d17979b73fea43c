//! Re-scores and resumes that never write nonsense (issue 34, items 4 and 5): eval-gnn never
//! writes into a run directory or an unrelated non-empty `--out`, says (and records) when the
//! data is split differently from the run, and names the right command for a train-mnist run;
//! `--resume auto` on a finished run touches nothing; a resume on other data is refused like one
//! with other settings.

use crate::common;

use std::path::Path;

use common::*;

fn train(dir: &Path, cohort: &str, name: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "train-gnn".to_string(),
        "--sc_dir".into(),
        format!("{cohort}/sc"),
        "--morph_root".into(),
        format!("{cohort}/morph"),
        "--subject_info_csv".into(),
        format!("{cohort}/subject_info_sc.csv"),
        "--results_dir".into(),
        "res".into(),
        "--run_name".into(),
        name.into(),
        "--cv_fold".into(),
        "0".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run_in(dir, &refs)
}

/// Every file of `dir` (not its `.lock`, which each process that opens the run rewrites with its
/// pid) with a digest of its bytes.
fn files_of(dir: &Path) -> Vec<(String, u64)> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut out: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .map(|p| {
            let mut h = DefaultHasher::new();
            std::fs::read(&p).unwrap().hash(&mut h);
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                h.finish(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn eval_gnn_writes_only_into_its_own_directory_and_names_a_changed_split() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 10, 5);
    let o = train(t.path(), "cohort", "drift", &["--model", "linear-drift"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = t.path().join("res/runs/drift");
    let run_s = run.to_str().unwrap();
    let before = files_of(&run);

    // --out the run directory itself, or an unrelated non-empty directory: refused.
    std::fs::create_dir_all(t.path().join("mine")).unwrap();
    std::fs::write(t.path().join("mine/metrics.json"), "{}").unwrap();
    std::fs::write(t.path().join("mine/notes.txt"), "mine").unwrap();
    for (out, needle) in [(run_s, "a run directory"), ("mine", "notes.txt")] {
        let o = run_in(
            t.path(),
            &["eval-gnn", run_s, "--split", "val", "--out", out],
        );
        assert!(!o.status.success(), "--out {out}");
        assert!(stderr(&o).contains(needle), "--out {out}: {}", stderr(&o));
    }
    assert_eq!(files_of(&run), before, "the run's own files changed");
    assert_eq!(
        std::fs::read_to_string(t.path().join("mine/notes.txt")).unwrap(),
        "mine"
    );

    // Its own directory: written, and written again (replaced as a whole).
    for _ in 0..2 {
        let o = run_in(t.path(), &["eval-gnn", run_s, "--split", "val"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(run.join("eval-val-best/metrics.json").is_file());
    assert_eq!(files_of(&run), before, "the run's own files changed");

    // The cohort without one subject: another split, said loudly and recorded.
    let smaller = t.path().join("smaller");
    std::fs::create_dir_all(&smaller).unwrap();
    copy_dir(&t.path().join("cohort"), &smaller);
    let victim = std::fs::read_dir(smaller.join("sc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    let subject = victim.file_name().unwrap().to_string_lossy()[..]
        .split("_ses-")
        .next()
        .unwrap()
        .to_string();
    for e in std::fs::read_dir(smaller.join("sc")).unwrap() {
        let p = e.unwrap().path();
        if p.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&subject)
        {
            std::fs::remove_file(p).unwrap();
        }
    }
    let o = run_in(
        t.path(),
        &[
            "eval-gnn",
            run_s,
            "--sc-dir",
            smaller.join("sc").to_str().unwrap(),
            "--out",
            "other-split",
        ],
    );
    // Another cohort: refused by default, naming both fingerprints.
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("trained on cohort") && err.contains("--other-cohort"),
        "{err}"
    );
    assert!(!t.path().join("other-split").exists());
    let o = run_in(
        t.path(),
        &[
            "eval-gnn",
            run_s,
            "--sc-dir",
            smaller.join("sc").to_str().unwrap(),
            "--out",
            "other-split",
            "--other-cohort",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("split differently from the run"),
        "{}",
        stderr(&o)
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(t.path().join("other-split/metrics.json")).unwrap(),
    )
    .unwrap();
    assert!(
        !m["split_changes"].as_array().unwrap().is_empty(),
        "{}",
        m["split_changes"]
    );

    // A train-mnist run: the right command named.
    let data = t.path().join("mnist");
    write_tiny_mnist(&data, 32);
    let o = run_in(
        t.path(),
        &[
            "train-mnist",
            "--data-dir",
            data.to_str().unwrap(),
            "--epochs",
            "1",
            "--out",
            "mnist-run",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run_in(t.path(), &["eval-gnn", "mnist-run"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("a train-mnist run") && stderr(&o).contains("trainer eval"),
        "{}",
        stderr(&o)
    );
}

fn copy_dir(from: &Path, to: &Path) {
    for e in std::fs::read_dir(from).unwrap() {
        let p = e.unwrap().path();
        let dest = to.join(p.file_name().unwrap());
        if p.is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_dir(&p, &dest);
        } else {
            std::fs::copy(&p, &dest).unwrap();
        }
    }
}

#[test]
fn resume_is_exact_or_refused_finished_runs_included() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 10, 6);
    let o = train(t.path(), "cohort", "drift", &["--model", "linear-drift"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = t.path().join("res/runs/drift");
    let before = files_of(&run);
    assert!(run.join("finished.json").is_file());

    // Resumed when finished: nothing to do, nothing touched.
    let o = train(
        t.path(),
        "cohort",
        "drift",
        &["--model", "linear-drift", "--resume", "auto"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("already finished"), "{}", stderr(&o));
    assert_eq!(files_of(&run), before, "a finished run's files changed");

    // Stopped midway, then resumed on other data (one scan's connectome changed): refused.
    let o = train(
        t.path(),
        "cohort",
        "stopped",
        &[
            "--model",
            "clg-ode",
            "--max_epochs",
            "2",
            "--latent_dim",
            "8",
            "--hidden_dim",
            "16",
            "--stop-after-steps",
            "1",
        ],
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let other = t.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    copy_dir(&t.path().join("cohort"), &other);
    let scan = std::fs::read_dir(other.join("sc"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    // Entry (0, 1) of the first matrix (off the diagonal, so the connectome changes).
    let text = std::fs::read_to_string(&scan).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut first: Vec<String> = lines[0].split(',').map(str::to_string).collect();
    let old: f64 = first[1].parse().unwrap();
    first[1] = (old + 1.5).to_string();
    lines[0] = first.join(",");
    std::fs::write(&scan, lines.join("\n") + "\n").unwrap();
    let o = train(
        t.path(),
        "other",
        "stopped",
        &[
            "--model",
            "clg-ode",
            "--max_epochs",
            "2",
            "--latent_dim",
            "8",
            "--hidden_dim",
            "16",
            "--resume",
            "auto",
        ],
    );
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("other settings") && stderr(&o).contains("cohort"),
        "{}",
        stderr(&o)
    );
}

/// `eval-gnn`, `predict` and `plot-sc` given another cohort of the same size (another seed of
/// the generator): each refuses, naming the run's cohort and the one given, unless
/// `--other-cohort` says it is meant.
#[test]
fn another_cohort_of_the_same_size_is_refused_by_every_reader() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 24, 8, 5);
    train_model(t.path(), "eb-drift", "res");
    let other = t.path().join("other");
    std::fs::create_dir(&other).unwrap();
    synth_cohort(&other, 24, 8, 6);
    let c = other.join("cohort");
    let (sc, morph, table) = (c.join("sc"), c.join("morph"), c.join("subject_info_sc.csv"));
    let data = [
        "--sc-dir",
        sc.to_str().unwrap(),
        "--morph-root",
        morph.to_str().unwrap(),
        "--subject-info-csv",
        table.to_str().unwrap(),
    ];
    let run = "res/runs/eb-drift";
    for (cmd, out) in [
        (vec!["eval-gnn", run, "--out", "e"], "e"),
        (vec!["predict", run, "--next-visit", "--out", "p"], "p"),
        (vec!["plot-sc", run, "--out", "f.png"], "f.png"),
    ] {
        let mut args = cmd.clone();
        args.extend(data);
        let o = run_in(t.path(), &args);
        assert!(!o.status.success(), "{cmd:?} scored another cohort");
        let err = stderr(&o);
        assert!(
            err.contains("trained on cohort") && err.contains(sc.to_str().unwrap()),
            "{cmd:?}: {err}"
        );
        assert!(!t.path().join(out).exists(), "{cmd:?} wrote {out}");
    }
    let mut args = vec!["eval-gnn", run, "--out", "e", "--other-cohort"];
    args.extend(data);
    let o = run_in(t.path(), &args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("scoring another cohort"),
        "{}",
        stderr(&o)
    );
}

/// Issue 75: a finished train-gnn run keeps its best and last model files and removes its resume
/// checkpoint (`last.safetensors`, optimiser state and all) unless `--keep-checkpoints resume`;
/// the size line and `finished.json` say what went; the objective's end state it held is kept
/// in `finished.json`, so `eval-gnn` scores the same either way; `--resume auto` calls the run
/// finished; a stopped run keeps its resume state and resumes.
#[test]
fn a_finished_gnn_run_removes_its_resume_state_unless_asked() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 16, 10, 6);
    let small = [
        "--model",
        "clg-ode",
        "--max_epochs",
        "2",
        "--latent_dim",
        "8",
        "--hidden_dim",
        "16",
    ];
    let with = |extra: &[&'static str]| [&small[..], extra].concat();
    let o = train(t.path(), "cohort", "dropped", &small);
    assert!(o.status.success(), "{}", stderr(&o));
    let dropped = t.path().join("res/runs/dropped");
    let ck = dropped.join("checkpoints");
    assert!(!ck.join("last.safetensors").exists());
    for f in [
        "clg_ode_fold0_best.safetensors",
        "clg_ode_fold0_last.safetensors",
    ] {
        assert!(ck.join(f).is_file(), "{f} missing");
    }
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("] checkpoints (best-last): "))
        .unwrap_or_else(|| panic!("no size line:\n{err}"));
    assert!(
        line.contains("best ")
            && line.contains("last ")
            && line.contains("removed the resume state (")
            && line.contains("; --keep-checkpoints resume keeps it)"),
        "{line}"
    );
    let finished: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dropped.join("finished.json")).unwrap())
            .unwrap();
    assert_eq!(finished["resume_state"]["dropped"], "removed", "{finished}");
    assert!(
        finished["job_state"]["objective"]["topo_scale"].is_number(),
        "{finished}"
    );

    // Kept when asked: the same run otherwise.
    let o = train(
        t.path(),
        "cohort",
        "kept",
        &with(&["--keep-checkpoints", "resume"]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let kept = t.path().join("res/runs/kept");
    assert!(kept.join("checkpoints/last.safetensors").is_file());
    assert!(!stderr(&o).contains("resume state"), "{}", stderr(&o));

    // eval-gnn reads the model files and the objective's end state: the same scores.
    let score = |run: &Path| {
        let o = run_in(t.path(), &["eval-gnn", run.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let m: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(run.join("eval-test-best/metrics.json")).unwrap(),
        )
        .unwrap();
        m["model"].clone()
    };
    assert_eq!(score(&dropped), score(&kept));

    // Resumed again: finished, nothing touched.
    let before = files_of(&dropped);
    let o = train(t.path(), "cohort", "dropped", &with(&["--resume", "auto"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("already finished"), "{}", stderr(&o));
    assert_eq!(files_of(&dropped), before);

    // Stopped: the resume state stays, and the run resumes to the same end.
    let o = train(
        t.path(),
        "cohort",
        "parts",
        &with(&["--stop-after-steps", "1"]),
    );
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    let parts = t.path().join("res/runs/parts");
    assert!(parts.join("checkpoints/last.safetensors").is_file());
    let o = train(t.path(), "cohort", "parts", &with(&["--resume", "auto"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("resuming from"), "{}", stderr(&o));
    assert!(!parts.join("checkpoints/last.safetensors").exists());
    assert_eq!(score(&parts), score(&dropped));
}
