//! Tests of `retention.rs`: what a run removes, keeps and says of its checkpoints.

use super::*;

fn put(p: &Path, bytes: usize) {
    std::fs::write(p, vec![0u8; bytes]).unwrap();
}

#[test]
fn prune_removes_only_recorded_files_but_the_resume_source_and_best_last() {
    let t = tempfile::tempdir().unwrap();
    let r = RunDir::new(t.path());
    std::fs::create_dir(r.checkpoints()).unwrap();
    for p in [r.last_checkpoint(), r.best_checkpoint(), r.best_model("m")] {
        put(&p, 1_000);
    }
    put(&r.last_model("m"), 1_000);
    for e in 1..=3 {
        put(&r.epoch_checkpoint(e), 2_000_000);
        record(&r, &r.epoch_checkpoint(e), "[t]").unwrap();
    }
    put(&r.epoch_model("m", 1), 500_000);
    record(&r, &r.epoch_model("m", 1), "[t]").unwrap();
    // Not this run's: a user's backup, another fold's file, one changed since written.
    let foreign = [
        r.checkpoints().join("backup_epoch_001.safetensors"),
        r.epoch_model("other_fold3", 2),
    ];
    for p in &foreign {
        put(p, 3_000);
    }
    put(&r.epoch_checkpoint(3), 7);
    let mut removed = Removed::default();
    prune(&r, Some(&r.epoch_checkpoint(2)), &mut removed, "[t]");
    assert_eq!(
        removed,
        Removed {
            files: 2,
            bytes: 2_500_000,
            told: true,
            resume: None
        }
    );
    let mut left = vec![r.epoch_checkpoint(2), r.epoch_checkpoint(3)];
    left.extend(foreign.iter().cloned());
    left.sort();
    assert_eq!(r.epoch_files(), left);
    for p in [
        r.last_checkpoint(),
        r.best_checkpoint(),
        r.best_model("m"),
        r.last_model("m"),
    ] {
        assert!(p.is_file(), "{} removed", p.display());
    }
    // The record keeps the resume source only; the changed file left it.
    let w = Written::read(&r).unwrap();
    assert_eq!(
        w.files.keys().collect::<Vec<_>>(),
        ["epoch_002.safetensors"]
    );
    let line = summary(&r, KeepCheckpoints::BestLast, removed).unwrap();
    assert!(
        line.starts_with(
            "checkpoints (best-last): best 2.0 kB (2 files), last 1.0 kB, resume 1.0 kB, \
             1 epoch file 2.0 MB, 3 unrecorded files 6.0 kB (kept), removed 2 older \
             (2.5 MB); 2.0 MB in "
        ),
        "{line}"
    );
}

#[test]
fn without_a_record_nothing_is_removed_and_an_edited_record_removes_nothing_outside() {
    let t = tempfile::tempdir().unwrap();
    let r = RunDir::new(t.path().join("run"));
    std::fs::create_dir_all(r.checkpoints()).unwrap();
    put(&r.epoch_checkpoint(1), 10);
    let mut removed = Removed::default();
    prune(&r, None, &mut removed, "[t]");
    assert_eq!((removed.files, removed.told), (0, true));
    assert!(r.epoch_checkpoint(1).is_file());
    // Names outside `checkpoints/` in an edited record are never followed.
    let outside = t.path().join("epoch_001.safetensors");
    put(&outside, 10);
    let stamp = Stamp::of(&outside).unwrap();
    let mut w = Written::default();
    w.files.insert("../epoch_001.safetensors".into(), stamp);
    w.files.insert("notes.txt".into(), stamp);
    w.write(&r).unwrap();
    prune(&r, None, &mut Removed::default(), "[t]");
    assert!(outside.is_file());
    // An unreadable record: nothing removed.
    std::fs::write(r.written_checkpoints_json(), "{").unwrap();
    record(&r, &r.epoch_checkpoint(1), "[t]").unwrap();
    std::fs::write(r.written_checkpoints_json(), "{").unwrap();
    prune(&r, None, &mut Removed::default(), "[t]");
    assert!(r.epoch_checkpoint(1).is_file());
}

/// A resume checkpoint at `path` with the fingerprint `fp` at stage `stage` (of 1).
fn resume_file(path: &Path, fp: &serde_json::Value, stage: usize) {
    use crate::engine::state::Position;
    use crate::toolbox::params::HostTensor;
    let mut ck = Checkpoint::default();
    let t = |x: f32| HostTensor {
        shape: vec![2],
        data: vec![x, x],
    };
    ck.put_model([("w".to_string(), t(1.0))]);
    ck.floats.insert(
        crate::toolbox::optim::keys::StateKey::AdamMoment1.of("w"),
        t(2.0),
    );
    ck.floats.insert("best.w".into(), t(3.0));
    ck.counters.insert("train.epoch".into(), 1);
    ck.set_model_name("m");
    let pos = Position {
        stage,
        ..Position::default()
    };
    let meta = [
        ("run_state", serde_json::to_string(&pos).unwrap()),
        ("fingerprint", fp.to_string()),
        ("job_state", r#"{"objective":{"topo_scale":2.5}}"#.into()),
        ("optimizer", "adam".into()),
    ];
    for (k, v) in meta {
        ck.metadata.insert(k.into(), v);
    }
    ck.save(path).unwrap();
}

fn spec(fp: &serde_json::Value) -> JobSpec {
    let mut spec = JobSpec {
        fingerprint: fp.clone(),
        ..JobSpec::default()
    };
    spec.plan.stages = 1;
    spec
}

#[test]
fn a_finished_runs_own_resume_state_is_removed_or_reduced_and_anything_else_kept() {
    let t = tempfile::tempdir().unwrap();
    let r = RunDir::new(t.path());
    std::fs::create_dir(r.checkpoints()).unwrap();
    let fp = serde_json::json!({"lr": 0.1});
    let last = r.last_checkpoint();

    // Removed where the last weights have their own files; the job state kept for
    // finished.json; the size line says what went.
    resume_file(&last, &fp, 1);
    let bytes = size(&last);
    let f = finished_resume(&r, &spec(&fp), true, "[t]").unwrap();
    assert_eq!(f.job_state["objective"]["topo_scale"], 2.5);
    assert_eq!(f.record()["dropped"], "removed");
    let dropped = f.drop_it("[t]");
    assert_eq!(dropped, Some(Dropped::Removed(bytes)));
    assert!(!last.exists());
    put(&r.last_model("m"), 2_000_000);
    let removed = Removed {
        resume: dropped,
        ..Removed::default()
    };
    let line = summary(&r, KeepCheckpoints::BestLast, removed).unwrap();
    assert!(
        line.starts_with(&format!(
            "checkpoints (best-last): last 2.0 MB, removed the resume state ({}; \
             --keep-checkpoints resume keeps it); 2.0 MB in ",
            human(bytes)
        )),
        "{line}"
    );

    // Reduced to the weights where it is their only file: model.* and its metadata, nothing
    // a resume reads.
    resume_file(&last, &fp, 1);
    let f = finished_resume(&r, &spec(&fp), false, "[t]").unwrap();
    assert_eq!(f.record()["dropped"], "reduced to the last weights");
    let Some(Dropped::Reduced { from, to }) = f.drop_it("[t]") else {
        panic!("not reduced");
    };
    assert!(to < from, "{to} {from}");
    let ck = Checkpoint::load(&last).unwrap();
    assert_eq!(ck.floats.keys().collect::<Vec<_>>(), ["model.w"]);
    assert!(ck.counters.is_empty());
    assert_eq!(ck.model_name(), Some("m"));
    for k in ["run_state", "fingerprint", "optimizer"] {
        assert!(!ck.metadata.contains_key(k), "{k} kept");
    }
    let removed = Removed {
        resume: Some(Dropped::Reduced { from, to }),
        ..Removed::default()
    };
    let line = summary(&r, KeepCheckpoints::BestLast, removed).unwrap();
    assert!(
        line.contains("last ") && line.contains("reduced the resume state to the last weights"),
        "{line}"
    );
    assert!(!line.contains("resume 1"), "{line}");

    // Not this run's: other settings, written before the end, a link, not a checkpoint.
    resume_file(&last, &serde_json::json!({"lr": 0.2}), 1);
    assert!(finished_resume(&r, &spec(&fp), true, "[t]").is_none());
    resume_file(&last, &fp, 0);
    assert!(finished_resume(&r, &spec(&fp), true, "[t]").is_none());
    assert!(last.is_file());
    let elsewhere = t.path().join("theirs.safetensors");
    resume_file(&elsewhere, &fp, 1);
    std::fs::remove_file(&last).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &last).unwrap();
    assert!(finished_resume(&r, &spec(&fp), true, "[t]").is_none());
    std::fs::remove_file(&last).unwrap();
    put(&last, 100);
    assert!(finished_resume(&r, &spec(&fp), true, "[t]").is_none());
    assert!(last.is_file() && elsewhere.is_file());
    // None at all: nothing to say.
    std::fs::remove_file(&last).unwrap();
    assert!(finished_resume(&r, &spec(&fp), true, "[t]").is_none());
}

#[test]
fn no_checkpoints_no_line() {
    let t = tempfile::tempdir().unwrap();
    let r = RunDir::new(t.path());
    assert_eq!(summary(&r, KeepCheckpoints::All, Removed::default()), None);
    assert_eq!(human(12_345_678), "12.3 MB");
    assert_eq!(human(1_900_000_000), "1.9 GB");
}
