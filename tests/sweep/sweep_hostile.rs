//! No input can subvert a sweep (issue 55): hostile values rendered into every scheduler's
//! scripts run nothing of theirs (a property test that runs the scripts with stub `module`,
//! `trainer`, `scontrol`, `sbatch`, `bsub`, `gbatch` and `singularity`), a hand-edited
//! `sweep.json` is refused on every read, task names stay inside the sweep, logs are not
//! written through symlinks, a reused pid is not a running task.
//!
//! The case budget of the property: `TRAINER_INJECTION_CASES` (default 300) generated cases of
//! four schedulers each, after the fixed corpus of the injections the hostile-input campaign
//! found. The seed: `TRAINER_INJECTION_SEED` (default 55).

use crate::common;
use crate::sweep_helpers as sweep;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainer::cluster::scheduler::SchedulerKind;
use trainer::cluster::scheduler::resources::{KEYS, Resources};
use trainer::sweep::spec::Task;
use trainer::sweep::{Manifest, scripts};

use common::*;

/// The marker every payload tries to create (relative: the scripts run in the case's folder).
const MARK: &str = "pwned";

/// Injections into shell text, directive lines and comments; `@` stands for the marker.
const PAYLOADS: &[&str] = &[
    "x|{touch,@}",
    "$(touch @)",
    "`touch @`",
    ";touch @",
    "|touch @",
    "&touch @",
    "&&touch @",
    "||touch @",
    "\ntouch @\n",
    "\rtouch @",
    "'$(touch @)'",
    "\"$(touch @)\"",
    "';touch @;'",
    "\";touch @;\"",
    "}; touch @; {",
    "$'\\x0a'touch @",
    ">@",
    "<(touch @)",
    "${IFS}touch${IFS}@",
    "#\ntouch @",
    "\u{0}touch @",
    "x]rusage[mem=1]",
    "%J%I",
    "\\",
    " -o @",
    "-x",
    "\u{1b}[2J",
];

const ALPHABET: &[char] = &[
    'a', 'b', '0', '.', '-', '_', '/', ' ', '$', '(', ')', '{', '}', '|', '&', ';', '<', '>', '`',
    '\'', '"', '\\', '\n', '\r', '\t', '#', '%', '*', '?', '[', ']', '~', '!', ',', '=', '@', ':',
    '+', '\u{0}', 'é',
];

fn hostile(rng: &mut ChaCha8Rng) -> String {
    let mut s = String::new();
    for _ in 0..rng.random_range(1..4) {
        if rng.random_bool(0.6) {
            s.push_str(PAYLOADS[rng.random_range(0..PAYLOADS.len())]);
        } else {
            for _ in 0..rng.random_range(1..6) {
                s.push(ALPHABET[rng.random_range(0..ALPHABET.len())]);
            }
        }
    }
    if rng.random_bool(0.01) {
        s.push_str(&"a".repeat(200_000));
    }
    s.replace('@', MARK)
}

/// Stub commands in `bin/`: each appends its name and arguments (NUL-separated) to `calls`.
fn stubs(bin: &Path, calls: &Path) {
    std::fs::create_dir_all(bin).unwrap();
    for (name, body) in [
        ("module", ""),
        ("scontrol", ""),
        ("trainer", ""),
        ("singularity", ""),
        ("sbatch", "echo 4242"),
        ("bsub", "cat >/dev/null; echo 'Job <7> is submitted'"),
        ("gbatch", "echo \"Submitted batch job 9 (x-t${*: -1})\""),
    ] {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/bash\n{{ printf '%s\\0' {name} \"$@\"; printf '\\n'; }} >> {}\n{body}\n",
                calls.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Runs `bash script args` in `cwd` with the stubs first on PATH; returns whether bash parsed
/// it (`bash -n`) and ran it.
fn run_script(cwd: &Path, bin: &Path, script: &Path, args: &[&str], env: &[(&str, &str)]) {
    let check = Command::new("bash").arg("-n").arg(script).output().unwrap();
    assert!(
        check.status.success(),
        "bash -n {}: {}\n{}",
        script.display(),
        String::from_utf8_lossy(&check.stderr),
        std::fs::read_to_string(script).unwrap_or_default()
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut c = Command::new("bash");
    c.arg(script)
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", path)
        .env("HOME", cwd)
        .envs(env.iter().copied());
    let _ = c.output().unwrap();
}

fn manifest(scheduler: SchedulerKind, spec: &str, resources: Resources) -> Manifest {
    let task = |index: usize, after: Option<usize>| Task {
        index,
        name: format!("t{index}"),
        varied: Default::default(),
        flags: Default::default(),
        after,
    };
    Manifest {
        command: "train-gnn".into(),
        spec: PathBuf::from(spec),
        scheduler,
        throttle: 2,
        resources,
        tasks: vec![task(0, None), task(1, Some(0))],
    }
}

/// What one case did.
#[derive(Default, Debug)]
struct Counts {
    values: usize,
    refused_values: usize,
    scripts_run: usize,
    refused_plans: usize,
}

/// Renders `resources`, a sweep directory named `dir_name` and a spec path `spec` for every
/// scheduler into `case`, runs every script it wrote, and checks that no marker appeared and
/// that the trainer was handed the sweep directory as one argument.
fn render_and_run(case: &Path, dir_name: &str, spec: &str, r: &Resources, counts: &mut Counts) {
    let bin = case.join("bin");
    let calls = case.join("calls");
    stubs(&bin, &calls);
    for scheduler in [
        SchedulerKind::Slurm,
        SchedulerKind::Lsf,
        SchedulerKind::Gflow,
        SchedulerKind::Local,
    ] {
        let work = case.join(format!("{scheduler:?}"));
        std::fs::create_dir_all(&work).unwrap();
        let dir = work.join(dir_name);
        if std::fs::create_dir_all(&dir).is_err() {
            counts.refused_plans += 1;
            continue;
        }
        let m = manifest(scheduler, spec, r.clone());
        let submit = match scripts::write(&dir, &m, &[0, 1], "all") {
            Ok(s) => s,
            Err(e) => {
                let e = e.to_string();
                assert!(!e.is_empty() && e.len() < 1000, "{e}");
                counts.refused_plans += 1;
                continue;
            }
        };
        let trainer_stub = bin.join("trainer").display().to_string();
        for env in [
            vec![("TRAINER", trainer_stub.as_str())],
            vec![("IMAGE", "/img/t.sif")],
        ] {
            let mut env = env;
            env.extend([
                ("SLURM_ARRAY_TASK_ID", "0"),
                ("SLURM_ARRAY_JOB_ID", "1"),
                ("LSB_JOBINDEX", "1"),
            ]);
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let file = entry.path();
                let ext = file.extension().map(|e| e.to_string_lossy().into_owned());
                if !matches!(ext.as_deref(), Some("slurm" | "lsf" | "gflow" | "sh")) {
                    continue;
                }
                run_script(&work, &bin, &file, &["0"], &env);
                counts.scripts_run += 1;
            }
        }
        // The submit command as `sweep plan --submit` would run it.
        if submit[0] == "bash" {
            let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
            let _ = Command::new(&submit[0])
                .args(&submit[1..])
                .current_dir(&work)
                .env("PATH", path)
                .output()
                .unwrap();
        }
        for w in [&work, case] {
            assert!(
                !w.join(MARK).is_file(),
                "{scheduler:?}: a payload ran: dir {dir_name:?}, spec {spec:?}, {r:?}"
            );
        }
        // Every trainer call names this sweep directory as one argument.
        let text = std::fs::read(&calls).unwrap_or_default();
        for call in text.split(|&b| b == b'\n').filter(|c| !c.is_empty()) {
            let args: Vec<String> = call
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if let Some(at) = args.iter().position(|a| a == "task") {
                let abs = std::path::absolute(&dir).unwrap();
                assert_eq!(
                    args[at + 1],
                    abs.display().to_string(),
                    "{scheduler:?}: {args:?}"
                );
            }
        }
        let _ = std::fs::remove_file(&calls);
    }
}

/// A directory name, a spec path, and `[resources]` values by key.
type Case = (String, String, Vec<(&'static str, String)>);

#[test]
fn hostile_values_never_run_in_any_schedulers_scripts() {
    let cases: usize = std::env::var("TRAINER_INJECTION_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let seed: u64 = std::env::var("TRAINER_INJECTION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(55);
    let t = tempfile::tempdir().unwrap();
    let mut counts = Counts::default();
    // The corpus: each payload alone in every string field, the directory name and the spec.
    let mut fixed: Vec<Case> = Vec::new();
    for p in PAYLOADS {
        let p = p.replace('@', MARK);
        let fields = [
            "partition",
            "gpu_type",
            "mig",
            "account",
            "qos",
            "constraint",
            "image",
        ]
        .into_iter()
        .chain(["binds", "modules", "extra", "mem", "time"])
        .map(|k| (k, p.clone()))
        .collect();
        let name = p.replace(['/', '\u{0}'], "_");
        fixed.push((format!("s {name}"), format!("/specs/{p}.toml"), fields));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for i in 0..fixed.len() + cases {
        let (dir_name, spec, fields) = match fixed.get(i) {
            Some(f) => f.clone(),
            None => {
                let mut fields: Vec<(&'static str, String)> = Vec::new();
                for k in KEYS {
                    if rng.random_bool(0.5) {
                        fields.push((k, hostile(&mut rng)));
                    }
                }
                let name = hostile(&mut rng).replace(['/', '\u{0}'], "_");
                // Never the marker's own name: the directory would look like a payload's file.
                let name: String = name.chars().take(200).collect();
                let mut spec = hostile(&mut rng);
                let mut name = format!("s {name}");
                // Half the paths without what the plan refuses in them, so that shell syntax
                // in paths reaches the scripts (the others test the refusals).
                if rng.random_bool(0.5) {
                    let plain = |s: &str| -> String {
                        s.chars()
                            .filter(|c| !c.is_control() && !"%\"\\".contains(*c))
                            .collect()
                    };
                    (name, spec) = (plain(&name), plain(&spec));
                }
                (name, spec, fields)
            }
        };
        let mut r = Resources::default();
        for (key, value) in &fields {
            counts.values += 1;
            let v = if *key == "gpus" {
                toml::Value::String(value.clone())
            } else if rng.random_bool(0.2) {
                toml::Value::Array(vec![toml::Value::String(value.clone())])
            } else {
                toml::Value::String(value.clone())
            };
            match r.set(key, &v) {
                Ok(()) => {}
                Err(e) => {
                    let e = e.to_string();
                    assert!(e.contains(&format!("`{key}`")), "{key}: {e}");
                    counts.refused_values += 1;
                }
            }
        }
        // A benign GPU request sometimes, so the preflight lines are rendered too.
        if rng.random_bool(0.3) {
            r.set("gpus", &toml::Value::Integer(1)).unwrap();
        }
        counts.values += 2;
        let case = t.path().join(format!("c{i}"));
        render_and_run(&case, &dir_name, &spec, &r, &mut counts);
        let _ = std::fs::remove_dir_all(&case);
    }
    eprintln!("hostile values: {counts:?} (seed {seed})");
    assert!(
        counts.scripts_run > 0 && counts.refused_values > 0,
        "{counts:?}"
    );
}

#[test]
fn paths_with_spaces_quotes_and_dollars_work() {
    let t = tempfile::tempdir().unwrap();
    let mut r = Resources::default();
    r.set(
        "image",
        &toml::Value::String("/my images/it's $HOME.sif".into()),
    )
    .unwrap();
    r.set("modules", &toml::Value::String("cuda/12.1".into()))
        .unwrap();
    let mut counts = Counts::default();
    render_and_run(
        t.path(),
        "my sweep $(x) 'q'",
        "/my specs/a b.toml",
        &r,
        &mut counts,
    );
    assert_eq!(counts.refused_plans, 0, "{counts:?}");
    // 2 Slurm arrays + submit.sh, 2 LSF arrays, task.gflow + submit, run-local.sh; twice.
    assert!(counts.scripts_run >= 14, "{counts:?}");
}

/// A planned local sweep of train-gnn over a tiny cohort, as `S` in `dir`.
fn planned(dir: &Path) -> PathBuf {
    sweep::setup_with(
        dir,
        "",
        "[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\n",
    );
    sweep::plan(dir, "local", None);
    dir.join("S")
}

fn edit_manifest(sweep_dir: &Path, edit: impl Fn(&mut serde_json::Value)) {
    let path = sweep_dir.join("sweep.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

#[test]
fn a_tampered_manifest_is_refused_on_every_read() {
    let t = tempfile::tempdir().unwrap();
    let s = planned(t.path());
    let original = std::fs::read_to_string(s.join("sweep.json")).unwrap();
    type Edit = fn(&mut serde_json::Value);
    let edits: [(Edit, &str); 5] = [
        (
            |v| v["resources"]["modules"] = serde_json::json!(["x|{touch,pwned}"]),
            "`modules`",
        ),
        (
            |v| v["tasks"][0]["name"] = "../../escaped".into(),
            "`tasks[0]`",
        ),
        (|v| v["tasks"][1]["after"] = 5.into(), "`after` = 5"),
        (|v| v["resources"]["time_secs"] = 0.into(), "`time`"),
        (|v| v["command"] = "sh".into(), "`command`"),
    ];
    for (edit, needle) in edits {
        std::fs::write(s.join("sweep.json"), &original).unwrap();
        edit_manifest(&s, edit);
        for args in [
            vec!["sweep", "plan", "--missing", "S", "--scheduler", "slurm"],
            vec!["sweep", "status", "S"],
            vec!["sweep", "run", "S"],
            vec!["sweep", "task", "S", "0"],
        ] {
            let o = run_in(t.path(), &args);
            let e = stderr(&o);
            assert!(!o.status.success(), "{args:?} accepted {needle}: {e}");
            assert!(
                e.contains(needle) && e.contains("sweep.json"),
                "{args:?}: {e}"
            );
        }
        assert!(!t.path().join(MARK).exists() && !t.path().join("escaped").exists());
        assert!(
            !s.join("submit-missing.slurm").exists(),
            "a script was written"
        );
    }
}

#[test]
fn names_that_leave_the_sweep_are_refused_at_plan_time() {
    let t = tempfile::tempdir().unwrap();
    for name in ["../../x", "..", ".", ".hidden", "a//b"] {
        sweep::setup_with(
            t.path(),
            "",
            &format!("[[variant]]\nname = \"{name}\"\n[[variant]]\nname = \"ok\"\n"),
        );
        let o = run_in(t.path(), &["sweep", "plan", "spec.toml", "--out", "S"]);
        let e = stderr(&o);
        assert!(!o.status.success(), "{name}: planned");
        assert!(
            e.contains("task name") && e.contains("spec.toml"),
            "{name}: {e}"
        );
        assert!(!t.path().join("S").exists() && !t.path().join("x").exists());
        std::fs::remove_dir_all(t.path().join("cohort")).unwrap();
    }
}

#[test]
fn a_symlink_at_a_tasks_log_is_not_written_through() {
    let t = tempfile::tempdir().unwrap();
    let s = planned(t.path());
    let target = t.path().join("victim.txt");
    std::fs::write(&target, "precious\n").unwrap();
    std::fs::create_dir_all(s.join("logs")).unwrap();
    std::os::unix::fs::symlink(&target, s.join("logs").join("0.log")).unwrap();
    let o = run_in(t.path(), &["sweep", "task", "S", "0"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("0.log"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
}

#[test]
fn a_running_status_whose_pid_was_reused_is_not_running() {
    let t = tempfile::tempdir().unwrap();
    let s = planned(t.path());
    let rows = sweep::status(t.path(), "S");
    assert_eq!(sweep::states(&rows), ["pending", "pending"]);
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    // This test's process is alive, but it did not start at tick 1 after boot.
    std::fs::create_dir_all(s.join("status")).unwrap();
    std::fs::write(
        s.join("status").join("0.json"),
        serde_json::json!({"state": "running", "pid": std::process::id(), "host": hostname.trim(),
            "ticks": [1, null]})
        .to_string(),
    )
    .unwrap();
    let rows = sweep::status(t.path(), "S");
    assert_eq!(sweep::states(&rows), ["failed", "pending"]);
}

#[test]
fn watch_intervals_that_would_panic_or_spin_are_refused() {
    let t = tempfile::tempdir().unwrap();
    planned(t.path());
    for bad in ["inf", "1e300", "nan", "0", "-1"] {
        let o = run_in(
            t.path(),
            &["sweep", "status", "S", &format!("--watch={bad}")],
        );
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{bad}: {e}");
        assert!(
            e.contains("--watch") && !e.contains("panicked"),
            "{bad}: {e}"
        );
    }
}

/// Runs `cmd`, killing it after `secs`: `None` when it had to be killed (it hung).
fn within(cmd: &mut Command, secs: u64) -> Option<std::process::Output> {
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Some(child.wait_with_output().unwrap())
}

#[test]
fn a_plot_whose_range_overflows_is_refused_naming_the_chart() {
    let t = tempfile::tempdir().unwrap();
    let run = t.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("metrics.jsonl"),
        "{\"epoch\": 1, \"train_loss\": 1e308}\n{\"epoch\": 2, \"train_loss\": -1e308}\n",
    )
    .unwrap();
    let out = t.path().join("p.svg");
    let o = within(
        trainer()
            .args(["plot", "--metric", "train_loss", "--out"])
            .arg(&out)
            .arg(&run),
        120,
    )
    .expect("trainer plot hung on a range that overflows f64");
    let e = stderr(&o);
    assert!(!o.status.success(), "{e}");
    assert!(
        e.contains("train_loss") && e.contains("too large to plot"),
        "{e}"
    );
    assert!(!out.exists());
}

#[test]
fn a_closed_pipe_ends_a_report_quietly() {
    let t = tempfile::tempdir().unwrap();
    // 6000 tasks: `sweep status` prints ~180 KB, more than a pipe (64 KiB) and `head`'s buffer
    // hold, so it still writes after `head` has gone.
    let grid: Vec<String> = (1..=6000).map(|i| format!("{}e-6", i)).collect();
    sweep::setup_with(
        t.path(),
        "",
        &format!("[grid]\nlearning_rate = [{}]\n", grid.join(", ")),
    );
    sweep::plan(t.path(), "local", None);
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; {} sweep status S | head -n 1",
            env!("CARGO_BIN_EXE_trainer")
        ))
        .current_dir(t.path())
        .output()
        .unwrap();
    let e = stderr(&o);
    assert!(!e.contains("panicked") && !e.contains("Broken pipe"), "{e}");
    // Killed by SIGPIPE, as `cat` would be: 128 + 13 through bash's pipefail.
    assert_eq!(o.status.code(), Some(141), "{e}");
}

#[test]
fn a_large_plan_finishes_and_a_signal_leaves_no_staging() {
    let t = tempfile::tempdir().unwrap();
    // 20,000 tasks (5x under the default cap), every one with its own flags.
    let grid: Vec<String> = (1..=20_000).map(|i| format!("{}e-7", i)).collect();
    sweep::setup_with(
        t.path(),
        "",
        &format!("[grid]\nlearning_rate = [{}]\n", grid.join(", ")),
    );
    // Stopped while planning: the staging directory is removed, no sweep appears.
    let child = trainer()
        .args([
            "sweep",
            "plan",
            "spec.toml",
            "--out",
            "S",
            "--scheduler",
            "local",
        ])
        .current_dir(t.path())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let staged = |dir: &Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".S.planning-"))
    };
    let t0 = std::time::Instant::now();
    while !staged(t.path()) && t0.elapsed().as_secs() < 60 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: a signal to the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let o = child.wait_with_output().unwrap();
    assert!(
        !o.status.success(),
        "the plan ended before the signal: {}",
        stderr(&o)
    );
    assert!(!staged(t.path()), "staging left behind: {}", stderr(&o));
    assert!(!t.path().join("S").exists());
    // Planned whole, within a hang guard (the campaign's plan was not done after 120 s).
    let o = within(
        trainer()
            .args([
                "sweep",
                "plan",
                "spec.toml",
                "--out",
                "S",
                "--scheduler",
                "local",
            ])
            .current_dir(t.path()),
        300,
    )
    .expect("a 20,000-task plan did not finish in 300 s");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        std::fs::read_dir(t.path().join("S/tasks")).unwrap().count(),
        20_000
    );
}

#[test]
fn out_never_takes_over_a_directory_that_is_not_a_run() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("mnist");
    write_tiny_mnist(&data, 64);
    // One epoch of train-mnist on the tiny data into `out`, with `extra` flags.
    let train_into = |out: &Path, extra: &[&str]| {
        trainer()
            .args([
                "train-mnist",
                "--epochs",
                "1",
                "--batch-size",
                "16",
                "--data-dir",
            ])
            .arg(&data)
            .arg("--out")
            .arg(out)
            .args(extra)
            .output()
            .unwrap()
    };
    let mine = t.path().join("my-project");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("config.toml"), "precious = true\n").unwrap();
    let o = train_into(&mine, &[]);
    let e = stderr(&o);
    assert!(!o.status.success(), "{e}");
    assert!(
        e.contains("config.toml") && e.contains("not a trainer run"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_to_string(mine.join("config.toml")).unwrap(),
        "precious = true\n"
    );
    assert_eq!(std::fs::read_dir(&mine).unwrap().count(), 1);
    // A directory with files no run writes (a job script's log) is taken, and they are kept;
    // the same one again with --resume auto is ours.
    let run = t.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(run.join("job.log"), "started\n").unwrap();
    for extra in [&[][..], &["--resume", "auto"][..]] {
        let o = train_into(&run, extra);
        assert!(o.status.success(), "{extra:?}: {}", stderr(&o));
    }
    assert_eq!(
        std::fs::read_to_string(run.join("job.log")).unwrap(),
        "started\n"
    );
}
