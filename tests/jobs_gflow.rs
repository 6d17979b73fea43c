//! jobs/gflow_mnist.sh on a real gflowd (PyPI's `runqd`, installed by scripts/test-jobs.sh).
//! The test starts its own daemon (own HOME, port and state, process executor), submits the
//! template as a CPU test with a step budget, so that the first piece stops with exit code 75
//! and resubmits itself through `gbatch`; the second piece resumes and finishes. The daemon is
//! stopped by its pid.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("jobs/gflow_mnist.sh")
}

#[test]
fn gflow_template_parses_and_carries_directives() {
    let o = Command::new("bash")
        .arg("-n")
        .arg(script())
        .output()
        .unwrap();
    assert!(o.status.success(), "bash -n: {}", stderr(&o));
    let text = std::fs::read_to_string(script()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut directives = vec![];
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("# GFLOW") {
            let prev = lines[i - 1];
            assert!(
                prev.starts_with("# ") && !prev.starts_with("# GFLOW"),
                "directive `{l}` has no explaining comment above it"
            );
            // gbatch splits directive lines on whitespace: no trailing comments allowed.
            assert!(!l[1..].contains('#'), "`{l}`: comment on a directive line");
            directives.push(l.trim_start_matches("# GFLOW").trim());
        }
    }
    assert!(directives.contains(&"--gpus 1"), "{directives:?}");
    assert!(
        directives.iter().any(|d| d.starts_with("--time ")),
        "{directives:?}"
    );
    assert!(text.contains("--resume auto") && text.contains("TRAINER_CPU_TEST"));
}

/// Directory holding gflowd/gbatch/gqueue: $TRAINER_GFLOW_BIN, else PATH.
fn gflow_bin() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("TRAINER_GFLOW_BIN") {
        let d = PathBuf::from(d);
        if d.join("gflowd").is_file() {
            return Some(d);
        }
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find(|d| d.join("gflowd").is_file() && d.join("gbatch").is_file())
    })
}

/// The daemon, stopped (SIGTERM by pid, then SIGKILL) when dropped.
struct Daemon(Child);
impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..50 {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn gflow_template_runs_on_a_real_gflowd_and_resubmits_itself_on_75() {
    let Some(bin) = gflow_bin() else {
        assert!(
            std::env::var("TRAINER_REQUIRE_GFLOW").as_deref() != Ok("1"),
            "TRAINER_REQUIRE_GFLOW=1 but no gflowd (pip install runqd)"
        );
        eprintln!(
            "SKIP gflow: no gflowd on PATH or in TRAINER_GFLOW_BIN (scripts/test-jobs.sh installs runqd)"
        );
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("home");
    let conf_dir = home.join(".config/gflow");
    std::fs::create_dir_all(&conf_dir).unwrap();
    let port = 40000 + std::process::id() % 20000;
    let conf = conf_dir.join("gflow.toml");
    // The process executor runs each job as `bash -c` in its own session (no tmux server).
    std::fs::write(
        &conf,
        format!(
            "[daemon]\nhost = \"localhost\"\nport = {port}\n\n[executor]\ntype = \"process\"\n"
        ),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let results = t.path().join("results");
    let env: Vec<(&str, String)> = vec![
        ("HOME", home.display().to_string()),
        (
            "XDG_CONFIG_HOME",
            home.join(".config").display().to_string(),
        ),
        (
            "XDG_DATA_HOME",
            home.join(".local/share").display().to_string(),
        ),
        ("PATH", path),
        ("TRAINER_CPU_TEST", "1".into()),
        ("TRAINER_BIN", env!("CARGO_BIN_EXE_trainer").into()),
        ("DATA_DIR", fashion_dir().display().to_string()),
        ("RESULTS_DIR", results.display().to_string()),
        // 10 steps in all; each piece may take 6, so the job needs two pieces.
        (
            "TRAINER_CPU_TEST_ARGS",
            "--limit-train 640 --limit-test 200 --epochs 1 --stop-after-steps 6".into(),
        ),
    ];
    let gcmd = |name: &str| {
        let mut c = Command::new(bin.join(name));
        c.current_dir(t.path());
        for (k, v) in &env {
            c.env(k, v);
        }
        for (k, _) in std::env::vars() {
            if k.starts_with("SLURM_") {
                c.env_remove(k);
            }
        }
        c
    };
    let log = std::fs::File::create(t.path().join("gflowd.out")).unwrap();
    let daemon = Daemon(
        gcmd("gflowd")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("gflowd"),
    );
    let t0 = Instant::now();
    while !gcmd("gqueue").output().is_ok_and(|o| o.status.success()) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "gflowd did not come up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The template asks for one GPU; this machine has none: the command line overrides it.
    let o = gcmd("gbatch")
        .args(["--gpus", "0"])
        .arg(script())
        .output()
        .unwrap();
    assert!(o.status.success(), "gbatch: {}{}", stdout(&o), stderr(&o));

    let queue = || -> Vec<(u64, String)> {
        let o = gcmd("gqueue").args(["-a", "-o", "json"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        v["jobs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|j| {
                        (
                            j["id"].as_u64().unwrap_or(0),
                            j["state"].as_str().unwrap_or("").to_string(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let logs = home.join(".local/share/gflow/logs");
    let read_log =
        |id: u64| std::fs::read_to_string(logs.join(format!("{id}.log"))).unwrap_or_default();
    let t0 = Instant::now();
    let jobs = loop {
        let q = queue();
        let done = |s: &str| matches!(s, "Finished" | "Failed" | "Cancelled" | "Timeout");
        if q.len() >= 2 && q.iter().all(|(_, s)| done(s)) {
            break q;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "gflow jobs not done: {q:?}\n{}\n{}",
            read_log(1),
            read_log(2)
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    drop(daemon);
    let (first, second) = (read_log(jobs[0].0), read_log(jobs[1].0));
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert!(
        jobs.iter().all(|(_, s)| s == "Finished"),
        "{jobs:?}\n{first}\n{second}"
    );
    assert!(
        first.contains("start 1:") && first.contains("trainer exit code 75"),
        "{first}"
    );
    assert!(
        first.contains("Submitted batch job") && first.contains("resubmitted"),
        "{first}"
    );
    assert!(
        second.contains("start 2:") && second.contains("resuming from"),
        "{second}"
    );
    assert!(second.contains("trainer exit code 0"), "{second}");
    let run = results.join("gflow_mnist");
    assert_eq!(metrics_without_timing(&run).len(), 1);
    assert!(run.join("checkpoints/last.safetensors").is_file());
}
