//! A real gflowd for the tests (PyPI's `runqd`, installed by scripts/test-jobs.sh): its own HOME,
//! port and state, the process executor (each job `bash -c` in its own session, no tmux);
//! stopped by its pid (TERM, then KILL) when dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

pub struct Gflow {
    daemon: Child,
    bin: PathBuf,
    dir: PathBuf,
    env: Vec<(String, String)>,
}

impl Gflow {
    /// A daemon under `dir` whose jobs see `env`; `None` (after a SKIP line) without gflow,
    /// a failure when `TRAINER_REQUIRE_GFLOW=1`.
    pub fn start(dir: &Path, env: &[(&str, String)]) -> Option<Gflow> {
        let Some(bin) = gflow_bin() else {
            assert!(
                std::env::var("TRAINER_REQUIRE_GFLOW").as_deref() != Ok("1"),
                "TRAINER_REQUIRE_GFLOW=1 but no gflowd (pip install runqd)"
            );
            eprintln!(
                "SKIP gflow: no gflowd on PATH or in TRAINER_GFLOW_BIN (scripts/test-jobs.sh installs runqd)"
            );
            return None;
        };
        let home = dir.join("home");
        let conf_dir = home.join(".config/gflow");
        std::fs::create_dir_all(&conf_dir).unwrap();
        let conf = conf_dir.join("gflow.toml");
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut all: Vec<(String, String)> = vec![
            ("HOME".into(), home.display().to_string()),
            (
                "XDG_CONFIG_HOME".into(),
                home.join(".config").display().to_string(),
            ),
            (
                "XDG_DATA_HOME".into(),
                home.join(".local/share").display().to_string(),
            ),
            ("PATH".into(), path),
        ];
        all.extend(env.iter().map(|(k, v)| (k.to_string(), v.clone())));
        let mut g = Gflow {
            daemon: Command::new("true").spawn().unwrap(),
            bin,
            dir: dir.to_path_buf(),
            env: all,
        };
        // A port the kernel hands out free (a fixed or pid-derived one can be held by another
        // process: gflowd then exits "Address already in use", as it did once in CI). Between
        // closing the probe and gflowd's bind another process may still take it, so a daemon
        // that exits is started again on a fresh port, three times at most.
        let t0 = Instant::now();
        let mut log_text = String::new();
        for _attempt in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free local port");
            std::fs::write(
                &conf,
                format!(
                    "[daemon]\nhost = \"localhost\"\nport = {port}\n\n[executor]\ntype = \"process\"\n"
                ),
            )
            .unwrap();
            let log = std::fs::File::create(dir.join("gflowd.out")).unwrap();
            let _ = g.daemon.wait();
            g.daemon = g
                .cmd("gflowd")
                .arg("-c")
                .arg(&conf)
                .stdout(Stdio::from(log.try_clone().unwrap()))
                .stderr(Stdio::from(log))
                .spawn()
                .expect("gflowd");
            loop {
                if g.daemon.try_wait().ok().flatten().is_some() {
                    log_text = std::fs::read_to_string(dir.join("gflowd.out")).unwrap_or_default();
                    eprintln!("gflowd on port {port} exited: {log_text}");
                    break;
                }
                // `timeout`: a gqueue that reached a foreign listener would wait for ever.
                let up = g
                    .cmd("timeout")
                    .arg("10")
                    .arg(g.bin.join("gqueue"))
                    .output()
                    .is_ok_and(|o| o.status.success());
                if up {
                    return Some(g);
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(90),
                    "gflowd (port {port}) did not answer gqueue within 90 s; its log: {}",
                    std::fs::read_to_string(dir.join("gflowd.out")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        panic!("gflowd exited three times on a fresh port; its last log: {log_text}");
    }

    /// `name` (gbatch, gqueue, or any command) with the daemon's environment, in its directory.
    pub fn cmd(&self, name: &str) -> Command {
        let exe = self.bin.join(name);
        let mut c = Command::new(if exe.is_file() {
            exe
        } else {
            PathBuf::from(name)
        });
        c.current_dir(&self.dir);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        for (k, _) in std::env::vars() {
            if k.starts_with("SLURM_") {
                c.env_remove(k);
            }
        }
        c
    }

    /// Every job: (id, state).
    pub fn queue(&self) -> Vec<(u64, String)> {
        let o = self
            .cmd("gqueue")
            .args(["-a", "-o", "json"])
            .output()
            .unwrap();
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
    }

    /// Waits until at least `n` jobs are known and all have ended; returns them.
    pub fn wait_all(&self, n: usize, limit: Duration) -> Vec<(u64, String)> {
        let t0 = Instant::now();
        loop {
            let q = self.queue();
            let done = |s: &str| matches!(s, "Finished" | "Failed" | "Cancelled" | "Timeout");
            if q.len() >= n && q.iter().all(|(_, s)| done(s)) {
                return q;
            }
            assert!(t0.elapsed() < limit, "gflow jobs not done: {q:?}");
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The output of job `id`.
    pub fn log(&self, id: u64) -> String {
        let logs = self.dir.join("home/.local/share/gflow/logs");
        std::fs::read_to_string(logs.join(format!("{id}.log"))).unwrap_or_default()
    }
}

impl Drop for Gflow {
    fn drop(&mut self) {
        let pid = self.daemon.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        for _ in 0..50 {
            if self.daemon.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}
