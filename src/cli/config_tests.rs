use super::*;
use crate::cli::Command as Cmd;

fn argv(args: &[&str]) -> Vec<OsString> {
    std::iter::once("trainer")
        .chain(args.iter().copied())
        .map(OsString::from)
        .collect()
}

fn mnist(args: &[&str]) -> crate::cli::MnistArgs {
    match parse_from(argv(args)).unwrap().command {
        Cmd::TrainMnist(a) => *a,
        other => panic!("{other:?}"),
    }
}

fn write(dir: &Path, text: &str) -> PathBuf {
    let p = dir.join("c.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn file_values_apply_and_flags_override_them() {
    let d = tempfile::tempdir().unwrap();
    let p = write(
        d.path(),
        "data_dir = \"/data\"\nepochs = 3\n[optimisation]\nlr = 0.5\nseed = 9\n\
         [model]\nno_dropout = true\n[cluster]\nrequeue_signal = [\"TERM\"]\n",
    );
    let a = mnist(&[
        "train-mnist",
        "--config",
        p.to_str().unwrap(),
        "--epochs",
        "2",
    ]);
    assert_eq!(a.settings.data_dir, PathBuf::from("/data"));
    assert_eq!(a.settings.epochs, 2, "the command line wins");
    assert_eq!((a.settings.lr, a.settings.seed), (0.5, 9));
    assert!(a.settings.no_dropout);
    assert_eq!(a.run.requeue_signal, ["TERM"]);
}

#[test]
fn resolved_config_round_trips_and_leaves_out_per_process_flags() {
    let a = mnist(&[
        "train-mnist",
        "--data-dir",
        "/d",
        "--lr",
        "5e-5",
        "--limit-train",
        "640",
        "--out",
        "/somewhere",
        "--early-stop-metric",
        "test_accuracy",
    ]);
    let text = a.run.resolved_config.clone().unwrap();
    let t: toml::Table = text.parse().unwrap();
    assert_eq!(t["data"]["limit_train"].as_integer(), Some(640));
    assert_eq!(t["optimisation"]["lr"].as_float(), Some(5e-5));
    assert_eq!(t["optimisation"]["epochs"].as_integer(), Some(1));
    assert_eq!(t["model"]["no_dropout"].as_bool(), Some(false));
    // No --device: chosen at run time (the job's GPU when the scheduler allocated one).
    assert!(
        t.get("cluster").and_then(|c| c.get("device")).is_none(),
        "{text}"
    );
    assert!(
        t.get("run").is_some_and(|r| r.get("out").is_none()),
        "{text}"
    );
    assert!(
        !text.contains("limit_test"),
        "unset options are left out: {text}"
    );

    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), &text);
    let b = mnist(&["train-mnist", "--config", p.to_str().unwrap()]);
    assert_eq!(b.run.resolved_config.as_deref(), Some(text.as_str()));
    assert_eq!((b.settings.lr, b.settings.limit_train), (5e-5, Some(640)));
    assert_eq!(
        b.early_stop.early_stop_metric.as_deref(),
        Some("test_accuracy")
    );
}

#[test]
fn unknown_keys_and_sections_name_the_key_and_the_file() {
    let d = tempfile::tempdir().unwrap();
    for (text, needle) in [
        (
            "data_dir = \"/d\"\nbatchsize = 3\n",
            "unknown key `batchsize`",
        ),
        (
            "data_dir = \"/d\"\n[optim]\nlr = 1.0\n",
            "unknown section [optim]",
        ),
        (
            "data_dir = \"/d\"\n[optimisation]\nlr_typo = 1.0\n",
            "`optimisation.lr_typo`",
        ),
        (
            "data_dir = \"/d\"\nconfig = \"x\"\n",
            "unknown key `config`",
        ),
        ("data_dir = \"/d\"\nepochs = \n", "not valid TOML"),
    ] {
        let p = write(d.path(), text);
        let e = parse_from(argv(&["train-mnist", "--config", p.to_str().unwrap()]))
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{text:?}: {e}");
        assert!(e.contains("c.toml"), "{e}");
    }
    // A value of the wrong type is clap's usual error.
    let p = write(d.path(), "data_dir = \"/d\"\nepochs = \"many\"\n");
    let e = parse_from(argv(&["train-mnist", "--config", p.to_str().unwrap()])).unwrap_err();
    assert!(e.to_string().contains("many"), "{e}");
}

#[test]
fn gnn_defaults_and_negative_numbers_survive_the_round_trip() {
    let cli = parse_from(argv(&[
        "train-gnn",
        "--sc_dir",
        "s",
        "--morph_root",
        "m",
        "--subject_info_csv",
        "t.csv",
        "--results_dir",
        "r",
        "--cv_fold",
        "-1",
    ]))
    .unwrap();
    let Cmd::TrainGnn(a) = cli.command else {
        panic!()
    };
    let text = a.run.resolved_config.unwrap();
    let t: toml::Table = text.parse().unwrap();
    assert_eq!(t["data"]["cv_fold"].as_integer(), Some(-1));
    assert_eq!(t["optimisation"]["patience"].as_integer(), Some(20));
    assert_eq!(
        t["optimisation"]["early_stop_metric"].as_str(),
        Some("val_loss")
    );
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), &text);
    let cli = parse_from(argv(&["train-gnn", "--config", p.to_str().unwrap()])).unwrap();
    let Cmd::TrainGnn(b) = cli.command else {
        panic!()
    };
    assert_eq!(b.settings.cv_fold, -1);
    assert_eq!(b.run.resolved_config.unwrap(), text);
}

fn gnn(extra: &[&str]) -> crate::cli::GnnArgs {
    let mut v = vec![
        "train-gnn",
        "--sc_dir",
        "s",
        "--morph_root",
        "m",
        "--subject_info_csv",
        "t.csv",
        "--results_dir",
        "r",
    ];
    v.extend_from_slice(extra);
    match parse_from(argv(&v)).unwrap().command {
        Cmd::TrainGnn(a) => *a,
        other => panic!("{other:?}"),
    }
}

#[test]
fn presets_sit_under_the_file_and_the_flags() {
    let plain = gnn(&[]);
    assert!(!plain.settings.decoder.fixed_support);
    let p = gnn(&["--preset", "residual"]);
    assert!(p.settings.decoder.fixed_support && p.settings.decoder.residual_skip);
    assert_eq!(p.settings.objective.topology.lambda_topo, 0.0);
    assert_eq!(p.early_stop.early_stop_metric.as_deref(), Some("val_skill"));
    // A flag beside the preset wins.
    let q = gnn(&["--preset", "residual", "--lambda_topo", "0.5"]);
    assert_eq!(
        (
            q.settings.objective.topology.lambda_topo,
            q.settings.decoder.fixed_support
        ),
        (0.5, true)
    );
    // So does the file, and the file can name the preset itself.
    let d = tempfile::tempdir().unwrap();
    let f = write(d.path(), "preset = \"residual\"\n[model]\nlatent_dim = 7\n");
    let r = gnn(&["--config", f.to_str().unwrap()]);
    assert_eq!(
        (
            r.settings.sizes.latent_dim,
            r.settings.decoder.residual_skip
        ),
        (7, true)
    );
    // The resolved configuration repeats it without the preset's help.
    let text = r.run.resolved_config.unwrap();
    assert!(text.contains("preset = \"residual\""), "{text}");
    let e = parse_from(argv(&[
        "train-gnn",
        "--sc_dir",
        "s",
        "--morph_root",
        "m",
        "--subject_info_csv",
        "t",
        "--results_dir",
        "r",
        "--preset",
        "nope",
    ]))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("no such preset") && e.contains("residual"),
        "{e}"
    );
}

/// The reference's defaults of its 74 flags (its own parser, `parse_args([])`).
fn reference_defaults() -> serde_json::Map<String, serde_json::Value> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/clg-ode-extras-golden.json"
    );
    let g: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    g["cli"]["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["dest"].as_str().unwrap().to_string(),
                f["default"].clone(),
            )
        })
        .collect()
}

#[test]
fn settings_defaults_are_the_empty_command_line_and_the_references() {
    use crate::models::clg_ode::objective::ObjectiveConfig;
    use crate::models::clg_ode::{DecoderConfig, ModelSizes};
    // Every settings struct's `Default` is its flags' defaults, as the command parses them.
    let s = gnn(&[]).resolve().unwrap().settings;
    assert_eq!(s.objective, ObjectiveConfig::default());
    assert_eq!(s.decoder, DecoderConfig::default());
    assert_eq!(s.sizes, ModelSizes::default());
    assert_eq!(s.sampling, crate::train::gnn::Sampling::default());
    // And those defaults are the reference's: every flag of the empty command line's resolved
    // configuration that the reference has, with the reference's default value.
    let config: toml::Table = gnn(&[]).run.resolved_config.unwrap().parse().unwrap();
    let ours: std::collections::BTreeMap<String, toml::Value> = config
        .into_iter()
        .flat_map(|(k, v)| match v {
            toml::Value::Table(t) => t.into_iter().collect::<Vec<_>>(),
            v => vec![(k, v)],
        })
        .collect();
    let mut checked = 0;
    for (dest, want) in reference_defaults() {
        let key = if dest == "random_state" {
            "seed"
        } else {
            dest.as_str()
        };
        if want.as_str().is_some_and(|s| s.starts_with('(')) {
            continue; // a path: machine dependent there, given here
        }
        if key == "batch_size" && !ours.contains_key(key) {
            // Settled by the run (src/train/gnn/cv/batch.rs): the reference's 2 on a CPU.
            assert_eq!(want.as_i64(), Some(2));
            assert_eq!(gnn(&[]).resolve().unwrap().settings.batch(), 2);
            checked += 1;
            continue;
        }
        let Some(got) = ours.get(key) else {
            // Paths (machine dependent there, required here) and the empty --resume_from.
            assert!(
                want.as_str()
                    .is_some_and(|s| s.starts_with('(') || s.is_empty()),
                "{dest}: the reference's default {want} is missing from ours"
            );
            continue;
        };
        let same = match (got, &want) {
            (toml::Value::Float(a), w) => w.as_f64() == Some(*a),
            (toml::Value::Integer(a), w) => w.as_i64() == Some(*a),
            (toml::Value::Boolean(a), w) => w.as_bool() == Some(*a),
            (toml::Value::String(a), w) => w.as_str() == Some(a.as_str()),
            _ => false,
        };
        assert!(same, "{dest}: ours {got}, the reference's {want}");
        checked += 1;
    }
    assert!(checked >= 65, "only {checked} defaults compared");
    // The MNIST recipe: PyTorch's examples/mnist defaults.
    let m = mnist(&["train-mnist", "--data-dir", "d"]).settings;
    assert_eq!(
        (
            m.epochs,
            m.batch_size,
            m.lr,
            m.lr_gamma,
            m.seed,
            m.test_batch_size
        ),
        (1, 64, 1e-3, 0.7, 1, 1000)
    );
}
