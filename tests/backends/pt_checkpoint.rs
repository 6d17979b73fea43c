//! `scripts/pt2safetensors.py` on a checkpoint written by the PyTorch reference's own code
//! (tests/fixtures/reference-clg-ode.pt, from tests/golden/pt_checkpoint.py): every converted
//! tensor equals the reference's (renamed and transposed as `torch_name` and Burn's [in, out]
//! Linear layout say), `trainer train-gnn --resume_from` loads all of them, and inputs that are
//! no CLG-ODE checkpoint fail in one line naming the file, writing nothing.
//!
//! Needs `python3` with torch on PATH (`eval "$(scripts/setup-torch.sh)"`): without it the tests
//! print a skip note, or fail when TRAINER_REQUIRE_TORCH=1 (the CI stage after setup-torch.sh).

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use safetensors::SafeTensors;
use safetensors::tensor::Dtype;
use serde_json::Value;
use trainer::models::clg_ode::torch_name;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether `python3` can import torch; `None` (after the skip note) when not and not required.
fn torch_python(test: &str) -> Option<()> {
    let ok = Command::new("python3")
        .args(["-c", "import torch, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(());
    }
    assert!(
        std::env::var("TRAINER_REQUIRE_TORCH").as_deref() != Ok("1"),
        "TRAINER_REQUIRE_TORCH=1 but `python3 -c 'import torch'` fails: \
         eval \"$(scripts/setup-torch.sh)\""
    );
    eprintln!(
        "SKIP pt_checkpoint::{test}: no python3 with torch (eval \"$(scripts/setup-torch.sh)\")"
    );
    None
}

fn python(cwd: &Path, args: &[&str]) -> Output {
    Command::new("python3")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("cannot start python3")
}

fn convert(cwd: &Path, input: &Path, output: &Path) -> Output {
    let script = repo().join("scripts/pt2safetensors.py");
    python(
        cwd,
        &[
            script.to_str().unwrap(),
            input.to_str().unwrap(),
            output.to_str().unwrap(),
        ],
    )
}

fn fixture() -> Value {
    let path = repo().join("tests/fixtures/reference-clg-ode.json");
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// A tensor of a safetensors file: shape and F32 values.
type Tensors = BTreeMap<String, (Vec<usize>, Vec<f32>)>;

fn read_safetensors(path: &Path) -> (Tensors, BTreeMap<String, String>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let st = SafeTensors::deserialize(&bytes).unwrap();
    let (_, meta) = SafeTensors::read_metadata(&bytes).unwrap();
    let metadata = meta
        .metadata()
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let tensors = st
        .tensors()
        .into_iter()
        .filter(|(k, _)| k.starts_with("model."))
        .map(|(k, v)| {
            assert_eq!(v.dtype(), Dtype::F32, "{k}");
            let data = v
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            (k, (v.shape().to_vec(), data))
        })
        .collect();
    (tensors, metadata)
}

/// The reference's tensor `torch` of the fixture in our layout: 0-d scalars as [1], 2-D Linear
/// weights (not embeddings) transposed to [in, out].
fn expected(fix: &Value, ours: &str) -> (Vec<usize>, Vec<f32>) {
    let tname = torch_name(ours);
    let t = fix["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tname.as_str())
        .unwrap_or_else(|| panic!("{ours}: no `{tname}` in the fixture"));
    let shape: Vec<usize> = t["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f32> = t["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    match shape[..] {
        [] => (vec![1], data),
        [o, i] if ours.ends_with(".weight") && !ours.contains("embed") => {
            let mut tr = vec![0.0; o * i];
            for r in 0..o {
                for c in 0..i {
                    tr[c * o + r] = data[r * i + c];
                }
            }
            (vec![i, o], tr)
        }
        _ => (shape, data),
    }
}

fn synth(dir: &Path, fix: &Value) {
    let c = &fix["cohort"];
    let o = run_in(
        dir,
        &[
            "synth-connectome",
            "--subjects",
            &c["subjects"].to_string(),
            "--nodes",
            &c["nodes"].to_string(),
            "--seed",
            &c["seed"].to_string(),
            "--out",
            "cohort",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn reference_checkpoint_converts_exactly_and_resumes_with_every_tensor() {
    let Some(()) =
        torch_python("reference_checkpoint_converts_exactly_and_resumes_with_every_tensor")
    else {
        return;
    };
    let fix = fixture();
    let t = tempfile::tempdir().unwrap();
    let pt = repo().join("tests/fixtures/reference-clg-ode.pt");
    let out = t.path().join("converted.safetensors");
    let o = convert(t.path(), &pt, &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let n = fix["tensors"].as_array().unwrap().len();
    assert_eq!(n, 36, "CLG-ODE of the reference commit has 36 tensors");
    assert!(
        stdout(&o).contains(&format!("{n} tensors converted")),
        "{}",
        stdout(&o)
    );
    // Nothing else was written next to it (no temporary file left).
    assert_eq!(std::fs::read_dir(t.path()).unwrap().count(), 1);

    // (a) Every tensor, by our name, equals the reference's in our layout, bit for bit.
    let (conv, meta) = read_safetensors(&out);
    assert_eq!(meta["format"], "trainer-checkpoint/1");
    assert_eq!(meta["model"], "clg_ode");
    assert!(meta["source"].ends_with("reference-clg-ode.pt"), "{meta:?}");
    assert_eq!(conv.len(), n);
    let torch_names: Vec<String> = conv
        .keys()
        .map(|k| torch_name(k.strip_prefix("model.").unwrap()))
        .collect();
    for t in fix["tensors"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert!(
            torch_names.iter().any(|k| k == name),
            "`{name}` not converted"
        );
    }
    // Bit-equality across processes (Python wrote the fixture, our converter copied it): a
    // conversion copies and transposes values and never computes one.
    for (k, (shape, data)) in &conv {
        let (want_shape, want) = expected(&fix, k.strip_prefix("model.").unwrap());
        assert_eq!(shape, &want_shape, "{k}");
        let same = data
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{k}: {data:?} != {want:?}");
    }

    // (b) train-gnn with the fixture's sizes loads all of them: the loader reports no missing
    // key, and after one epoch at a learning rate of 1e-30 (updates far below f32 resolution)
    // the best checkpoint holds the reference's values (randomly initialised ones would differ).
    synth(t.path(), &fix);
    let flags: Vec<&str> = fix["flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    let mut args = vec![
        "train-gnn",
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        "results",
        "--run_name",
        "resumed",
        "--cv_fold",
        "0",
        "--max_epochs",
        "1",
        "--learning_rate",
        "1e-30",
        "--resume_from",
        "converted.safetensors",
    ];
    args.extend(flags);
    let o = run_in(t.path(), &args);
    let log = stderr(&o);
    assert!(o.status.success(), "{log}");
    assert!(
        log.contains(
            "weights from --resume-from converted.safetensors (non-strict matching: \
             0 missing keys, 0 unexpected keys)"
        ),
        "{log}"
    );
    let run = t.path().join("results/runs/resumed");
    let (best, _) = read_safetensors(&run.join("checkpoints/clg_ode_fold0_best.safetensors"));
    assert_eq!(
        best.len(),
        n,
        "the model has as many tensors as the reference's"
    );
    for (k, (shape, data)) in &best {
        let (want_shape, want) = &conv[k];
        assert_eq!(shape, want_shape, "{k}");
        // One epoch of Adam at lr 1e-30 moves a weight by ≈ 1e-30, below half an f32 ulp of
        // any weight larger than ≈ 1e-23, so the checkpoint holds the converted values bit for
        // bit in practice (no summation reaches the weights but through that update). 1e-6
        // (floor 1e-3) is a loose bound that still tells the reference's values from a random
        // initialisation (which differs in the first digit); it does not depend on the CPU.
        for (a, b) in data.iter().zip(want) {
            assert!((a - b).abs() <= 1e-6 * b.abs().max(1e-3), "{k}: {a} vs {b}");
        }
    }
    let args_json: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("args.json")).unwrap()).unwrap();
    assert_eq!(
        args_json["resume_from"].as_str(),
        Some("converted.safetensors"),
        "{args_json}"
    );

    // The same state dict inside a dict (`model_state_dict`, as other trainers save it)
    // converts to the same tensors.
    let wrapped = t.path().join("wrapped.pt");
    let o = python(
        t.path(),
        &[
            "-c",
            "import sys, torch\n\
             sd = torch.load(sys.argv[1], map_location='cpu')\n\
             torch.save({'model_state_dict': sd, 'epoch': 7}, sys.argv[2])",
            pt.to_str().unwrap(),
            wrapped.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out2 = t.path().join("wrapped.safetensors");
    let o = convert(t.path(), &wrapped, &out2);
    assert!(o.status.success(), "{}", stderr(&o));
    let (conv2, meta2) = read_safetensors(&out2);
    assert_eq!(conv2, conv);
    assert_eq!(meta2["source_key"], "model_state_dict");
}

#[test]
fn inputs_that_are_no_clg_ode_checkpoint_fail_in_one_line_and_write_nothing() {
    let Some(()) =
        torch_python("inputs_that_are_no_clg_ode_checkpoint_fail_in_one_line_and_write_nothing")
    else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let o = python(
        dir,
        &[
            "-c",
            "import torch\n\
             torch.save({'epoch': 3, 'val_loss': 0.5, 'note': 'no tensors'}, 'no-state-dict.pt')\n\
             torch.save(torch.nn.Linear(2, 3).state_dict(), 'other-model.pt')\n\
             open('not-torch.pt', 'w').write('hello\\n')",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    for (file, why) in [
        ("no-state-dict.pt", "no state dict in it"),
        ("other-model.pt", "not a CLG-ODE state dict"),
        ("not-torch.pt", "not a PyTorch file"),
    ] {
        let out = dir.join(format!("{file}.safetensors"));
        let o = convert(dir, &dir.join(file), &out);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{file}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{file}: {err}");
        assert!(
            err.starts_with("pt2safetensors: error: ") && err.contains(file) && err.contains(why),
            "{file}: {err}"
        );
        if file == "other-model.pt" {
            // It names the keys it expected.
            assert!(
                err.contains("morph_encoder.{fc1,fc_mu,fc_logvar}.{weight,bias}"),
                "{err}"
            );
        }
        assert!(stdout(&o).is_empty(), "{file}: {}", stdout(&o));
        assert!(!out.exists(), "{file}: {} was written", out.display());
    }
    // Nothing but the three inputs: no output, no temporary file.
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 3);
}
