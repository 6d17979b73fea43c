//! Access to the real one-node Slurm of `scripts/slurm-up.sh`, for the tests that submit jobs.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// `SLURM_CONF` of a running test cluster. Starts one with scripts/slurm-up.sh when
/// `TRAINER_REQUIRE_SLURM=1`; otherwise returns `None` (the caller prints a skip line).
pub fn slurm_conf() -> Option<PathBuf> {
    let required = std::env::var("TRAINER_REQUIRE_SLURM").is_ok_and(|v| v == "1");
    let conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var("TRAINER_SLURM_DIR").unwrap_or("/tmp/trainer-slurm".into()))
                .join("slurm.conf")
        });
    let up = |c: &PathBuf| {
        c.is_file()
            && Command::new("sinfo")
                .env("SLURM_CONF", c)
                .arg("-h")
                .output()
                .is_ok_and(|o| o.status.success())
    };
    if up(&conf) {
        return Some(conf);
    }
    if !required {
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/slurm-up.sh");
    let o = Command::new("bash")
        .arg(script)
        .output()
        .expect("bash scripts/slurm-up.sh");
    assert!(
        o.status.success(),
        "slurm-up.sh failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    let conf = text
        .lines()
        .find_map(|l| l.strip_prefix("export SLURM_CONF="))
        .map(|v| PathBuf::from(v.trim_matches(|c| c == '"' || c == '\'')))
        .expect("slurm-up.sh printed no SLURM_CONF");
    assert!(up(&conf), "Slurm did not come up with {}", conf.display());
    Some(conf)
}

/// Runs a Slurm client command against `conf` and returns its stdout.
pub fn slurm(conf: &PathBuf, cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd)
        .env("SLURM_CONF", conf)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `Field=value` of `scontrol show job ID`.
pub fn job_field(conf: &PathBuf, job: &str, field: &str) -> Option<String> {
    let text = slurm(conf, "scontrol", &["show", "job", job]);
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{field}=")).map(str::to_string))
}

/// Waits until the job has ended and returns its final state. Requeued jobs wait about two
/// minutes before they may start again (Slurm's requeue delay); the test harness moves that
/// start to a few seconds after the requeue (`scontrol update StartTime=now+5`), once per
/// restart.
///
/// Not `StartTime=now`: on requeue slurmctld revokes the job's launch credential on the node,
/// and slurmd refuses every credential created in or before the second of the revocation
/// ("Killing non-startable batch JobId=N: Job credential revoked", the job ends FAILED). A
/// start 43 ms after the requeue did exactly that in CI; five seconds is far past the
/// one-second granularity.
pub fn wait_for_job(conf: &PathBuf, job: &str, limit: Duration) -> String {
    let t0 = Instant::now();
    let mut released_restart: Option<String> = None;
    loop {
        let state = job_field(conf, job, "JobState").unwrap_or_default();
        match state.as_str() {
            "COMPLETED" | "FAILED" | "CANCELLED" | "TIMEOUT" | "NODE_FAIL" | "OUT_OF_MEMORY" => {
                return state;
            }
            "PENDING" if job_field(conf, job, "Reason").as_deref() == Some("BeginTime") => {
                let restart = job_field(conf, job, "Restarts");
                if restart != released_restart {
                    let _ = Command::new("scontrol")
                        .env("SLURM_CONF", conf)
                        .args(["update", &format!("JobId={job}"), "StartTime=now+5"])
                        .status();
                    released_restart = restart;
                }
            }
            _ => {}
        }
        assert!(
            t0.elapsed() < limit,
            "job {job} still {state} after {limit:?}"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}
