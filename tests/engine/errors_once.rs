//! Every documented failure through the real binary: the exit code of the table in
//! docs/reference/exit-codes.md, and the error printed once, as `error: …` then one
//! `caused by: …` line per cause, no text said twice (a message that repeats its source used to
//! print `invalid hostlist …` twice).

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{stderr, trainer, write_tiny_mnist};

/// Runs `trainer args…` without scheduler variables from the test's own environment, plus `env`.
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd: Command = trainer();
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_")
            || k.starts_with("LSB_")
            || k.starts_with("GFLOW_")
            || [
                "RANK",
                "WORLD_SIZE",
                "LOCAL_RANK",
                "MASTER_ADDR",
                "MASTER_PORT",
            ]
            .contains(&k.as_str())
        {
            cmd.env_remove(k);
        }
    }
    cmd.args(args).envs(env.iter().copied());
    let o = cmd.output().expect("trainer runs");
    (o.status.code(), stderr(&o))
}

/// The `error:`/`caused by:` texts of `err`, each of which must appear exactly once in it.
fn assert_said_once(what: &str, err: &str) {
    assert!(!err.contains("panicked"), "{what}: panicked:\n{err}");
    let tops: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("error: "))
        .collect();
    assert_eq!(tops.len(), 1, "{what}: one `error:` line expected:\n{err}");
    let causes = err.lines().filter_map(|l| l.strip_prefix("caused by: "));
    for text in tops.into_iter().chain(causes) {
        assert!(!text.trim().is_empty(), "{what}: empty message:\n{err}");
        let n = err.matches(text).count();
        assert_eq!(n, 1, "{what}: {text:?} appears {n} times:\n{err}");
    }
}

struct Failure<'a> {
    what: &'a str,
    args: Vec<String>,
    env: Vec<(&'a str, &'a str)>,
    codes: &'a [i32],
    needle: &'a str,
}

fn check(f: &Failure<'_>) {
    let args: Vec<&str> = f.args.iter().map(String::as_str).collect();
    let (code, err) = run(&args, &f.env);
    assert!(
        code.is_some_and(|c| f.codes.contains(&c)),
        "{}: exit {code:?}, expected one of {:?}:\n{err}",
        f.what,
        f.codes
    );
    assert!(
        err.contains(f.needle),
        "{}: no {:?} in:\n{err}",
        f.what,
        f.needle
    );
    assert_eq!(
        err.matches(f.needle).count(),
        1,
        "{}: {:?} twice:\n{err}",
        f.what,
        f.needle
    );
    if f.codes != [2] {
        assert_said_once(f.what, &err);
    }
}

fn s(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| p.to_string()).collect()
}

fn p(path: &Path) -> String {
    path.display().to_string()
}

#[test]
fn every_documented_failure_is_said_once_with_its_code() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("mnist");
    write_tiny_mnist(&data, 8);
    let bad = t.path().join("bad-mnist");
    write_tiny_mnist(&bad, 8);
    std::fs::write(bad.join("train-images-idx3-ubyte"), [7u8, 7, 7, 7, 0, 0]).unwrap();
    let cohort = t.path().join("cohort");
    let o = trainer()
        .args([
            "synth-connectome",
            "--subjects",
            "4",
            "--nodes",
            "8",
            "--seed",
            "1",
        ])
        .arg("--out")
        .arg(&cohort)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let sc = std::fs::read_dir(cohort.join("sc"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let text = std::fs::read_to_string(&sc).unwrap();
    std::fs::write(&sc, text.replacen('0', "zero", 1)).unwrap();
    let checkpoint = t.path().join("last.safetensors");
    std::fs::write(&checkpoint, b"not a checkpoint").unwrap();
    let out = t.path().join("out");
    let mnist = |extra: &[&str]| {
        let mut a = s(&[
            "train-mnist",
            "--epochs",
            "1",
            "--limit-train",
            "8",
            "--limit-test",
            "8",
        ]);
        a.extend(s(&["--data-dir", &p(&data), "--out", &p(&out)]));
        a.extend(s(extra));
        a
    };
    let gnn = |info: &Path| {
        s(&[
            "train-gnn",
            "--max-epochs",
            "1",
            "--sc-dir",
            &p(&cohort.join("sc")),
            "--morph-root",
            &p(&cohort.join("morph")),
            "--subject-info-csv",
            &p(info),
            "--results-dir",
            &p(&t.path().join("results")),
        ])
    };
    let nodelist = [("SLURM_JOB_ID", "1"), ("SLURM_JOB_NODELIST", "node[1-")];
    let contradictory = [("RANK", "5"), ("WORLD_SIZE", "2")];
    let failures = [
        Failure {
            what: "usage error",
            args: s(&["train-mnist", "--epochs", "many"]),
            env: vec![],
            codes: &[2],
            needle: "invalid value 'many'",
        },
        Failure {
            what: "bad IDX magic",
            args: {
                let mut a = mnist(&[]);
                a[8] = p(&bad);
                a
            },
            env: vec![],
            codes: &[1],
            needle: "wrong magic number",
        },
        Failure {
            what: "missing data directory",
            args: {
                let mut a = mnist(&[]);
                a[8] = p(&t.path().join("nowhere"));
                a
            },
            env: vec![],
            codes: &[1],
            needle: "does not exist",
        },
        Failure {
            what: "bad SC CSV",
            args: gnn(&cohort.join("subject_info_sc.csv")),
            env: vec![],
            codes: &[1],
            needle: "is not a number",
        },
        Failure {
            what: "missing subject table",
            args: gnn(&t.path().join("no-table.csv")),
            env: vec![],
            codes: &[1],
            needle: "no-table.csv",
        },
        Failure {
            what: "bad hostlist in SLURM_JOB_NODELIST (env)",
            args: s(&["env"]),
            env: nodelist.to_vec(),
            codes: &[16],
            needle: "'[' is never closed",
        },
        Failure {
            what: "bad hostlist in SLURM_JOB_NODELIST (train-mnist)",
            args: mnist(&[]),
            env: nodelist.to_vec(),
            codes: &[16],
            needle: "'[' is never closed",
        },
        Failure {
            what: "contradictory scheduler variables",
            args: mnist(&[]),
            env: contradictory.to_vec(),
            codes: &[16],
            needle: "RANK=5 is not below WORLD_SIZE=2",
        },
        Failure {
            what: "flex asked for a GPU",
            args: mnist(&["--backend", "flex", "--device", "cuda"]),
            env: vec![],
            codes: &[3],
            needle: "CPU only",
        },
        Failure {
            what: "--device cuda without a driver (or without the cuda backend)",
            args: mnist(&["--backend", "cuda", "--device", "cuda"]),
            env: vec![],
            codes: &[3, 10],
            needle: if cfg!(feature = "cuda") {
                "no NVIDIA driver"
            } else {
                "was not compiled into this binary"
            },
        },
        Failure {
            what: "bad checkpoint file",
            args: s(&[
                "eval",
                "--checkpoint",
                &p(&checkpoint),
                "--data-dir",
                &p(&data),
            ]),
            env: vec![],
            codes: &[1],
            needle: "not a valid safetensors file",
        },
    ];
    for f in &failures {
        check(f);
    }
    if !cfg!(feature = "tch") {
        check(&Failure {
            what: "backend not compiled in",
            args: mnist(&["--backend", "tch"]),
            env: vec![],
            codes: &[3],
            needle: "was not compiled into this binary",
        });
    }
    assert!(!out.exists(), "a failed run left {}", out.display());
    assert!(
        !t.path().join("results").exists(),
        "a failed run left results/"
    );
}
