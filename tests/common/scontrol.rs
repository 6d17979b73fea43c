//! `scontrol show hostnames`, the reference hostlist expansion, for the hostlist tests.
//!
//! Where Slurm comes from, in order:
//! 1. `SLURM_CONF` (or `$TRAINER_SLURM_DIR/slurm.conf`, default /tmp/trainer-slurm) of a
//!    cluster already started with `scripts/slurm-up.sh`;
//! 2. with `TRAINER_REQUIRE_SLURM=1`: `scripts/slurm-up.sh` (installs Debian's slurm-wlm if
//!    missing, starts munged/slurmctld/slurmd) and its `SLURM_CONF`;
//! 3. `scontrol` on PATH but no cluster: a minimal config written for the test (hostname
//!    expansion needs a config file, not the daemons);
//! 4. otherwise `None`: the caller prints a skip line (`TRAINER_REQUIRE_SLURM=1` makes 2 fail
//!    loudly instead).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `SLURM_CONF` scontrol should use, checked to work, or `None` (skip) as described above.
pub fn hostnames_conf() -> Option<PathBuf> {
    let conf = match existing_conf() {
        Some(c) if on_path("scontrol") => c,
        _ if required() => start_slurm(),
        _ if on_path("scontrol") => minimal_conf(),
        _ => return None,
    };
    assert!(
        on_path("scontrol"),
        "scontrol still missing after slurm-up.sh"
    );
    // A broken config makes scontrol fail on everything: catch that before blaming the parser.
    let probe = scontrol_hostnames(&conf, "vm");
    assert_eq!(
        probe,
        Ok(vec!["vm".to_string()]),
        "scontrol does not work with {}",
        conf.display()
    );
    Some(conf)
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

fn required() -> bool {
    std::env::var("TRAINER_REQUIRE_SLURM").is_ok_and(|v| v == "1")
}

fn existing_conf() -> Option<PathBuf> {
    if let Some(c) = std::env::var_os("SLURM_CONF").map(PathBuf::from)
        && c.is_file()
    {
        return Some(c);
    }
    let dir = std::env::var_os("TRAINER_SLURM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/trainer-slurm"));
    let c = dir.join("slurm.conf");
    c.is_file().then_some(c)
}

/// Runs scripts/slurm-up.sh and returns the SLURM_CONF it exports.
fn start_slurm() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-up.sh");
    let out = Command::new("bash")
        .arg(&script)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed ({}):\n{}\n{}",
        script.display(),
        out.status,
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("export SLURM_CONF="))
        .map(|s| PathBuf::from(s.trim()))
        .unwrap_or_else(|| panic!("slurm-up.sh printed no SLURM_CONF:\n{stdout}"))
}

/// A config just good enough for `scontrol show hostnames` (no daemons needed).
fn minimal_conf() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("trainer-hostlist-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let conf = dir.join("slurm.conf");
    std::fs::write(
        &conf,
        "ClusterName=hostlisttest\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n\
         PartitionName=p Nodes=localhost Default=YES\n",
    )
    .expect("write slurm.conf");
    conf
}

/// What scontrol says when it has not answered in time (see `scontrol_timeout`), or died of a signal
/// (Slurm 22.05 segfaults on `a[18446744073709551614-18446744073709551615]`).
pub const BROKE: &str = "scontrol hung or crashed";
/// How long one `scontrol show hostnames` may take: Slurm 22.05 loops on some lists with
/// numbers near 2^64 (`r[1,18446744073709551615][1-2]`), so those get 5 s; any other list 60 s
/// (131 072 names take 0.6 s on an idle machine, much more on a loaded one).
fn scontrol_timeout(list: &str) -> std::time::Duration {
    let huge = list
        .split(|c: char| !c.is_ascii_digit())
        .any(|d| d.len() >= 20);
    std::time::Duration::from_secs(if huge { 5 } else { 60 })
}

/// `Ok(hosts)` or `Err(message)` from scontrol; `Err(BROKE)` when it had to be killed or died
/// of a signal.
pub fn scontrol_hostnames(conf: &Path, list: &str) -> Result<Vec<String>, String> {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new("scontrol")
        .args(["show", "hostnames", list])
        .env("SLURM_CONF", conf)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("running scontrol: {e}"))?;
    let read = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = read(Box::new(child.stdout.take().expect("piped")));
    let err = read(Box::new(child.stderr.take().expect("piped")));
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child
            .try_wait()
            .map_err(|e| format!("waiting for scontrol: {e}"))?
        {
            break s;
        }
        if t0.elapsed() > scontrol_timeout(list) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BROKE.into());
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let (stdout, stderr) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    if status.code().is_none_or(|c| c >= 128) {
        return Err(BROKE.into());
    }
    // scontrol 22.05 exits 0 on a bad list and says "Invalid hostlist".
    if !status.success()
        || stdout.contains("Invalid hostlist")
        || stderr.contains("Invalid hostlist")
    {
        return Err(format!("{stdout}{stderr}"));
    }
    Ok(stdout.lines().map(str::to_string).collect())
}
