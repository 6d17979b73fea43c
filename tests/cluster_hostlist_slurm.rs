//! Our hostlist expansion against the reference, `scontrol show hostnames`, of a real Slurm.
//!
//! Where Slurm comes from, in order:
//! 1. `SLURM_CONF` (or `$TRAINER_SLURM_DIR/slurm.conf`, default /tmp/trainer-slurm) of a
//!    cluster already started with `scripts/slurm-up.sh`;
//! 2. with `TRAINER_REQUIRE_SLURM=1`: this test runs `scripts/slurm-up.sh` (installs Debian's
//!    slurm-wlm if missing, starts munged/slurmctld/slurmd) and uses its `SLURM_CONF`;
//! 3. `scontrol` on PATH but no cluster: a minimal config written for this test (hostname
//!    expansion needs a config file, not the daemons);
//! 4. otherwise the test prints a skip line, or fails when `TRAINER_REQUIRE_SLURM=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use trainer::cluster::hostlist;

/// Lists both sides must expand identically.
const VALID: &[&str] = &[
    "vm",
    "ai[01-02]",
    "gpu1,gpu[3-5,7]",
    "ai[01-02],gpu[10-11]",
    "n[8-10]",
    "n[08-10]",
    "n[001-3]",
    "n[1-003]",
    "n[99-101]",
    "n[00-00]",
    "n[0-3,02]",
    "a[1-2]b[3-4]",
    "n[1-2]-[3-4]",
    "n[1-2][3-4]",
    "rack1-n[1,3]",
    "a,b,,c",
    "x[1-2],x1",
    "[1-2]",
    "node-[0001-0300]",
    "q_ai4-gpu[1-2],q_ai8-gpu[07-09]",
];

/// Lists both sides must reject.
const INVALID: &[&str] = &[
    "n[5-3]",
    "n[]",
    "n[a-b]",
    "n[1,-2]",
    "n[-]",
    "a[1-2]b",
    "rack1-n[1,3]x",
    "n[1-100000000]",
];

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

/// `Ok(hosts)` or `Err(message)` from scontrol.
fn scontrol_hostnames(conf: &Path, list: &str) -> Result<Vec<String>, String> {
    let out = Command::new("scontrol")
        .args(["show", "hostnames", list])
        .env("SLURM_CONF", conf)
        .output()
        .map_err(|e| format!("running scontrol: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    // scontrol 22.05 exits 0 on a bad list and says "Invalid hostlist".
    if !out.status.success()
        || stdout.contains("Invalid hostlist")
        || stderr.contains("Invalid hostlist")
    {
        return Err(format!("{stdout}{stderr}"));
    }
    Ok(stdout.lines().map(str::to_string).collect())
}

#[test]
fn hostlist_expansion_matches_scontrol() {
    let conf = match existing_conf() {
        Some(c) if on_path("scontrol") => c,
        _ if required() => start_slurm(),
        _ if on_path("scontrol") => minimal_conf(),
        _ => {
            println!(
                "SKIP cluster_hostlist_slurm: scontrol not found; run scripts/slurm-up.sh or set \
                 TRAINER_REQUIRE_SLURM=1 to start Slurm and require this test"
            );
            return;
        }
    };
    assert!(
        on_path("scontrol"),
        "scontrol still missing after slurm-up.sh"
    );
    println!(
        "comparing against scontrol with SLURM_CONF={}",
        conf.display()
    );

    // A broken config makes scontrol fail on everything: catch that before blaming the parser.
    let probe = scontrol_hostnames(&conf, "vm");
    assert_eq!(
        probe,
        Ok(vec!["vm".to_string()]),
        "scontrol does not work with {}",
        conf.display()
    );

    let mut mismatches = Vec::new();
    for list in VALID {
        let reference = scontrol_hostnames(&conf, list);
        let ours = hostlist::expand(list).map_err(|e| e.to_string());
        match (&reference, &ours) {
            (Ok(r), Ok(o)) if r == o => {}
            _ => mismatches.push(format!("{list:?}: scontrol {reference:?}, ours {ours:?}")),
        }
    }
    for list in INVALID {
        let reference = scontrol_hostnames(&conf, list);
        let ours = hostlist::expand(list);
        if reference.is_ok() || ours.is_ok() {
            mismatches.push(format!(
                "{list:?} should be rejected: scontrol {reference:?}, ours {ours:?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "hostlist mismatches:\n{}",
        mismatches.join("\n")
    );
    println!(
        "{} valid and {} invalid hostlists agree with scontrol",
        VALID.len(),
        INVALID.len()
    );
}
