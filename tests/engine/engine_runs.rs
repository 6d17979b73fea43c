//! The engine's user-facing surface, through the binary on real Fashion-MNIST: a run's
//! `config.toml` repeats it, `curves.svg` has one point per epoch in each series, `trainer plot`
//! overlays runs, early stopping keeps the best epoch, completions and grouped `--help`.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::*;

fn train(cwd: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let data = fashion_dir();
    let mut args = vec![
        "train-mnist",
        "--data-dir",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run_in(cwd, &args)
}

fn ok(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "trainer failed ({:?}):\n{}",
        o.status.code(),
        stderr(o)
    );
}

const SMALL: [&str; 6] = ["--limit-train", "384", "--limit-test", "200", "--seed", "3"];

/// The number of points of every data line of an SVG (the curves are the polylines drawn
/// 2 pixels wide; axes and ticks are 1 pixel wide).
fn polylines(svg: &str) -> Vec<usize> {
    let doc = roxmltree::Document::parse(svg).expect("curves.svg is XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .filter_map(|n| n.attribute("points"))
        .map(|p| p.split_whitespace().count())
        .collect()
}

/// The trimmed contents of every `<text>` element of an SVG.
fn svg_texts(svg: &str) -> Vec<String> {
    let doc = roxmltree::Document::parse(svg).expect("XML");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn config_toml_repeats_the_run() {
    let t = tempfile::tempdir().unwrap();
    let first = t.path().join("first");
    let mut args = SMALL.to_vec();
    args.extend(["--epochs", "2", "--lr", "2e-3", "--batch-size", "32"]);
    ok(&train(t.path(), &first, &args));
    let config = first.join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("lr = 0.002"), "{text}");
    assert!(text.contains("[optimisation]"), "{text}");
    let table: toml::Table = text.parse().unwrap();
    for (section, values) in &table {
        let values = values.as_table().unwrap();
        for key in ["out", "run_name", "resume", "stop_after_steps", "config"] {
            assert!(
                !values.contains_key(key),
                "[{section}] {key}: per-process flags stay out"
            );
        }
    }

    let second = t.path().join("second");
    let o = run_in(
        t.path(),
        &[
            "train-mnist",
            "--config",
            config.to_str().unwrap(),
            "--out",
            second.to_str().unwrap(),
        ],
    );
    ok(&o);
    let rows = metrics_without_timing(&first);
    assert_eq!(rows.len(), 2);
    // Exact: the same binary, machine, seed and thread count (and the kernels do not depend
    // on the thread count anyway).
    assert_eq!(rows, metrics_without_timing(&second));
    assert_eq!(
        text,
        std::fs::read_to_string(second.join("config.toml")).unwrap()
    );

    // A flag beside the file wins; --print-config shows the result without training.
    let o = run_in(
        t.path(),
        &[
            "train-mnist",
            "--config",
            config.to_str().unwrap(),
            "--epochs",
            "5",
            "--print-config",
        ],
    );
    ok(&o);
    assert!(stdout(&o).contains("epochs = 5"), "{}", stdout(&o));
    assert!(stdout(&o).contains("lr = 0.002"), "{}", stdout(&o));

    // An unknown key is a usage error naming the key and the file.
    let bad = t.path().join("bad.toml");
    std::fs::write(&bad, format!("{text}\nlearning_rate = 1.0\n")).unwrap();
    let o = run_in(
        t.path(),
        &["train-mnist", "--config", bad.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("learning_rate"), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.toml"), "{}", stderr(&o));
}

#[test]
fn curves_have_a_point_per_epoch_and_plot_overlays_runs() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (t.path().join("a"), t.path().join("b"));
    let mut args = SMALL.to_vec();
    args.extend(["--epochs", "3"]);
    ok(&train(t.path(), &a, &args));
    args.extend(["--lr", "3e-3"]);
    ok(&train(t.path(), &b, &args));

    // train_loss, test_loss, test_accuracy: three series of three epochs.
    let svg = std::fs::read_to_string(a.join("curves.svg")).unwrap();
    assert_eq!(polylines(&svg), [3, 3, 3], "{svg}");
    let texts = svg_texts(&svg);
    for label in ["train_loss", "test_loss", "test_accuracy"] {
        assert!(
            texts.iter().any(|t| t == label),
            "legend lacks {label}: {texts:?}"
        );
    }

    let out = t.path().join("both.svg");
    let o = run_in(
        t.path(),
        &[
            "plot",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--metric",
            "test_accuracy",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    ok(&o);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert_eq!(polylines(&svg), [3, 3], "one line per run");
    let texts = svg_texts(&svg);
    assert!(
        texts.iter().any(|t| t == "a") && texts.iter().any(|t| t == "b"),
        "legend names both runs: {texts:?}"
    );

    let png = t.path().join("both.png");
    let o = run_in(
        t.path(),
        &[
            "plot",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--out",
            png.to_str().unwrap(),
        ],
    );
    ok(&o);
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");

    let o = run_in(
        t.path(),
        &[
            "plot",
            a.to_str().unwrap(),
            "--metric",
            "nope",
            "--out",
            "x.svg",
        ],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("nope"), "{}", stderr(&o));
}

#[test]
fn early_stopping_keeps_the_best_epoch() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("run");
    let mut args = SMALL.to_vec();
    // A learning rate this high makes later epochs no better: patience 1 then stops the run.
    args.extend([
        "--epochs",
        "6",
        "--lr",
        "0.05",
        "--lr-gamma",
        "1.0",
        "--early-stop-metric",
        "test_accuracy",
        "--patience",
        "1",
        // Every epoch's checkpoint, to compare the best one with its epoch's.
        "--keep-checkpoints",
        "all",
    ]);
    ok(&train(t.path(), &out, &args));
    let rows = metrics_without_timing(&out);
    let acc: Vec<f64> = rows
        .iter()
        .map(|r| r["test_accuracy"].as_f64().unwrap())
        .collect();
    assert_eq!(rows[0]["monitor_metric"], "test_accuracy");
    // Stopped exactly when an epoch failed to improve on the best.
    let best_before_last = acc[..acc.len() - 1]
        .iter()
        .cloned()
        .fold(f64::MIN, f64::max);
    if rows.len() < 6 {
        assert!(acc[acc.len() - 1] <= best_before_last, "{acc:?}");
    }
    let best = acc.iter().cloned().fold(f64::MIN, f64::max);
    let best_epoch = acc.iter().position(|&a| a == best).unwrap() + 1;
    assert_eq!(rows.last().unwrap()["best_test_accuracy"], best);
    let ck = checkpoint_tensors(&out.join("checkpoints/best.safetensors"));
    let epoch_ck =
        checkpoint_tensors(&out.join(format!("checkpoints/epoch_{best_epoch:03}.safetensors")));
    assert_eq!(ck["model.fc2.weight"], epoch_ck["model.fc2.weight"]);

    // A metric the job does not evaluate is refused before training.
    let o = train(
        t.path(),
        &t.path().join("x"),
        &["--early-stop-metric", "val_loss"],
    );
    assert!(!o.status.success());
    assert!(stderr(&o).contains("test_accuracy"), "{}", stderr(&o));
}

#[test]
fn completions_load_in_bash_and_help_is_grouped() {
    let bin = env!("CARGO_BIN_EXE_trainer");
    let o = Command::new("bash")
        .args([
            "-c",
            &format!("source <('{bin}' completions bash) && complete -p trainer"),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("trainer"), "{}", stdout(&o));
    for shell in ["zsh", "fish"] {
        let o = trainer().args(["completions", shell]).output().unwrap();
        assert!(o.status.success());
        assert!(stdout(&o).contains("train-mnist"));
    }
    for cmd in ["train-mnist", "train-gnn"] {
        let o = trainer().args([cmd, "--help"]).output().unwrap();
        let help = stdout(&o);
        for heading in ["Data:", "Model:", "Optimisation:", "Run:", "Cluster:"] {
            assert!(
                help.contains(heading),
                "{cmd} --help lacks {heading}:\n{help}"
            );
        }
    }
}
