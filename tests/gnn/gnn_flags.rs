//! The reference's whole flag surface on our binary: every flag set that the reference's own
//! job scripts build (tests/fixtures/reference_flag_sets.txt), parsed by `trainer train-gnn`,
//! gives the values the reference's own parser gave (tests/fixtures/clg-ode-extras-golden.json,
//! `cli.flag_sets`); the flag set that uses all 74 flags trains and every value reaches the run
//! directory's `config.toml`; the values the reference refuses are refused.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::Value;

const PATHS: [&str; 8] = [
    "--sc_dir",
    "cohort/sc",
    "--morph_root",
    "cohort/morph",
    "--subject_info_csv",
    "cohort/subject_info_sc.csv",
    "--results_dir",
    "results",
];

fn golden() -> Value {
    let p = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/clg-ode-extras-golden.json"
    );
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Our name of a reference flag's value in `config.toml`.
fn our_key(reference: &str) -> &str {
    match reference {
        "random_state" => "seed",
        k => k,
    }
}

/// The value of `key` in any section of a resolved configuration.
fn lookup<'a>(config: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    config.get(key).or_else(|| {
        config
            .values()
            .filter_map(toml::Value::as_table)
            .find_map(|t| t.get(key))
    })
}

/// Every value the reference parsed for a flag set, found with the same value in ours.
fn check_same(parsed: &serde_json::Map<String, Value>, config: &toml::Table, what: &str) -> usize {
    let mut checked = 0;
    for (k, want) in parsed {
        if k == "run_name" {
            continue; // the run directory's name, not part of the configuration
        }
        if k == "resume_from" && want == "" && lookup(config, k).is_none() {
            checked += 1; // the reference's empty default: no checkpoint
            continue;
        }
        if k == "batch_size" && want == 2 && lookup(config, k).is_none() {
            // Left to the run: 2 on a CPU, sized to a CUDA GPU; the run's config.toml says
            // which (gnn_train::the_batch_is_settled_by_the_run_and_written_down).
            checked += 1;
            continue;
        }
        let got = lookup(config, our_key(k))
            .unwrap_or_else(|| panic!("{what}: `{k}` is not in the configuration:\n{config}"));
        let same = match (want, got) {
            (Value::Bool(a), toml::Value::Boolean(b)) => a == b,
            (Value::String(a), toml::Value::String(b)) => a == b,
            (Value::Number(a), toml::Value::Integer(b)) => a.as_f64() == Some(*b as f64),
            // The same decimal literal parsed by Python's float() and by toml (both correctly
            // rounded to f64), or a default both sides write as a literal: equal, or an ulp
            // apart (≈ 2e-16) at worst. No arithmetic on either side, so nothing here can
            // depend on the CPU or the thread count; 1e-12 is that ulp with room to spare.
            (Value::Number(a), toml::Value::Float(b)) => {
                (a.as_f64().unwrap() - b).abs() <= 1e-12 * b.abs().max(1.0)
            }
            _ => false,
        };
        assert!(same, "{what}: `{k}` is {got} here, {want} in the reference");
        checked += 1;
    }
    checked
}

fn print_config(cwd: &Path, argv: &[String]) -> toml::Table {
    let mut args: Vec<&str> = vec!["train-gnn"];
    args.extend(PATHS);
    args.extend(argv.iter().map(String::as_str));
    args.push("--print-config");
    let o = run_in(cwd, &args);
    assert!(o.status.success(), "{argv:?}: {}", stderr(&o));
    stdout(&o).parse().expect("TOML")
}

#[test]
fn every_reference_flag_set_parses_to_the_reference_values() {
    let t = tempfile::tempdir().unwrap();
    let g = golden();
    let sets = g["cli"]["flag_sets"]["sets"].as_array().unwrap();
    assert!(
        sets.len() >= 40,
        "the reference's scripts build about 40 flag sets"
    );
    let mut flags_seen = std::collections::BTreeSet::new();
    for set in sets {
        let name = set["name"].as_str().unwrap();
        let argv: Vec<String> = set["argv"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        flags_seen.extend(argv.iter().filter(|a| a.starts_with("--")).cloned());
        let config = print_config(t.path(), &argv);
        check_same(set["parsed"].as_object().unwrap(), &config, name);
    }
    // With the four paths, the sets use all 74 flags of the reference.
    let all: Vec<String> = g["cli"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["flag"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(all.len(), 74);
    for flag in &all {
        assert!(
            flags_seen.contains(flag) || PATHS.contains(&flag.as_str()),
            "no flag set uses {flag}"
        );
    }
    // Both spellings.
    let config = print_config(
        t.path(),
        &[
            "--lambda-topo".into(),
            "0.25".into(),
            "--cv-folds".into(),
            "3".into(),
        ],
    );
    assert_eq!(
        lookup(&config, "lambda_topo").unwrap().as_float(),
        Some(0.25)
    );
    assert_eq!(lookup(&config, "cv_folds").unwrap().as_integer(), Some(3));
}

#[test]
fn the_reference_refuses_what_we_refuse() {
    let t = tempfile::tempdir().unwrap();
    let g = golden();
    for case in g["cli"]["rejected"]["cases"].as_array().unwrap() {
        let flags: Vec<&str> = case["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        if flags == ["--porcelain"] {
            continue; // not a reference flag; ours prints the reference's console lines
        }
        let mut args = vec!["train-gnn"];
        args.extend(PATHS);
        args.extend(&flags);
        let o = run_in(t.path(), &args);
        assert!(
            !o.status.success(),
            "{flags:?} is accepted; the reference says {}",
            case["error"]
        );
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

#[test]
fn all_74_flags_reach_the_run_directory() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 10, 12, 4);
    let g = golden();
    let set = g["cli"]["flag_sets"]["sets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "all-flags")
        .unwrap()
        .clone();
    let mut argv: Vec<String> = set["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    // Small enough to train here: fewer epochs and a small model (the values checked below are
    // the reference's for everything else). --resume_from needs a checkpoint of this shape: a
    // first run with the same model writes one.
    let mut small = |flag: &str, value: &str| {
        let i = argv.iter().position(|a| a == flag).unwrap();
        argv[i + 1] = value.to_string();
    };
    small("--max_epochs", "2");
    small("--latent_dim", "4");
    small("--hidden_dim", "8");
    small("--solver_steps", "2");
    small("--innovation_topm", "20");
    let i = argv.iter().position(|a| a == "--resume_from").unwrap();
    let (before, after) = (argv[..i].to_vec(), argv[i + 2..].to_vec());
    let mut first: Vec<String> = before.iter().chain(&after).cloned().collect();
    first.extend(["--run_name".into(), "first".into()]);
    let run = |argv: &[String]| {
        let mut args: Vec<&str> = vec!["train-gnn"];
        args.extend(PATHS);
        args.extend(argv.iter().map(String::as_str));
        run_in(t.path(), &args)
    };
    let o = run(&first);
    assert!(o.status.success(), "{}", stderr(&o));
    let ckpt = t
        .path()
        .join("results/runs/first/checkpoints/clg_ode_fold0_best.safetensors");
    assert!(ckpt.is_file());
    argv[i + 1] = ckpt.to_str().unwrap().to_string();
    let o = run(&argv);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = t.path().join("results/runs/clg_all_flags/fold0");
    let config: toml::Table = std::fs::read_to_string(dir.join("config.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let mut parsed = set["parsed"].as_object().unwrap().clone();
    for (k, v) in [
        ("max_epochs", 2),
        ("latent_dim", 4),
        ("hidden_dim", 8),
        ("solver_steps", 2),
        ("innovation_topm", 20),
    ] {
        parsed.insert(k.into(), Value::from(v));
    }
    parsed.insert("resume_from".into(), Value::from(ckpt.to_str().unwrap()));
    let n = check_same(&parsed, &config, "all-flags run");
    // 74 flags less the four paths (their values are ours) and the run name.
    assert_eq!(n, 74 - 4 - 1);
    for k in ["sc_dir", "morph_root", "subject_info_csv", "results_dir"] {
        assert!(lookup(&config, k).is_some(), "{k}");
    }
    // The run trained with those settings: finite metrics, and the innovation module acted.
    let rows: Vec<Value> = std::fs::read_to_string(dir.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert!(rows[1]["train_loss"].as_f64().unwrap().is_finite());
    assert!(rows[1]["val_sc_log_mse"].as_f64().unwrap().is_finite());
    assert_eq!(rows[0]["fixed_support"], 1);
    assert!(
        stderr(&o).contains("non-strict") || stderr(&o).contains("resume"),
        "{}",
        stderr(&o)
    );
}

/// `--scans-on-device` (ours, not the reference's): `on` is refused where no batch is staged on a
/// device (flex builds each subject's batch on the host) and for a model not trained in steps,
/// before any run directory is made; `off` and `auto` train on flex, `config.toml` records the
/// choice and `args.json` leaves the default out (a default run's `args.json` is as before).
#[test]
fn scans_on_device_is_refused_where_it_cannot_apply() {
    let t = tempfile::tempdir().unwrap();
    synth_cohort(t.path(), 10, 12, 4);
    let train = |extra: &[&str]| {
        let mut args: Vec<&str> = vec!["train-gnn"];
        args.extend(PATHS);
        args.extend(["--cv_fold", "0", "--max_epochs", "1", "--latent_dim", "8"]);
        args.extend(["--hidden_dim", "16", "--solver_steps", "2"]);
        args.extend(extra);
        run_in(t.path(), &args)
    };
    let o = train(&["--scans-on-device", "on", "--run_name", "on"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--scans-on-device on applies to --backend tch")
            && stderr(&o).contains("not to --backend flex"),
        "{}",
        stderr(&o)
    );
    assert!(!t.path().join("results/runs/on").exists());
    let o = train(&["--model", "gcn", "--scans-on-device", "off"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--scans-on-device applies to --model clg-ode only"),
        "{}",
        stderr(&o)
    );
    let o = train(&["--scans-on-device", "off", "--run_name", "off"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let config = std::fs::read_to_string(t.path().join("results/runs/off/config.toml")).unwrap();
    assert!(config.contains("scans_on_device = \"off\""), "{config}");
    let o = train(&["--run_name", "auto"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let config = std::fs::read_to_string(t.path().join("results/runs/auto/config.toml")).unwrap();
    assert!(config.contains("scans_on_device = \"auto\""), "{config}");
    // args.json, the reference's record of the flags, leaves ours out at their defaults.
    let args = std::fs::read_to_string(t.path().join("results/runs/auto/args.json")).unwrap();
    assert!(!args.contains("scans_on_device"), "{args}");
}
