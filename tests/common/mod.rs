//! Helpers shared by the integration tests: run the real binary, make IDX fixtures.
#![allow(dead_code)]

pub mod numerics;
pub mod step_counts;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The Fashion-MNIST copy of Debian's `dataset-fashion-mnist` (installed by scripts/setup.sh).
pub fn fashion_dir() -> PathBuf {
    let dir = PathBuf::from(
        std::env::var("TRAINER_FASHION_DIR").unwrap_or("/usr/share/datasets/fashion-mnist".into()),
    );
    assert!(
        dir.join("train-images-idx3-ubyte.gz").is_file(),
        "Fashion-MNIST not found in {}: run scripts/setup.sh (installs dataset-fashion-mnist)",
        dir.display()
    );
    dir
}

pub fn trainer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_trainer"))
}

/// `mpirun -n 2 trainer` (as root, two ranks on any number of cores), with Open MPI's session
/// directory under `session` instead of the `/tmp/ompi.<host>.<uid>` that every MPI job of the
/// user on the machine shares: two jobs starting at once race to create that one
/// (`mkdir … File exists`, open-mpi/ompi#8510), and the tests run theirs side by side.
pub fn mpirun_two(session: &Path) -> Command {
    let mut c = Command::new("mpirun");
    c.env("OMPI_MCA_orte_tmpdir_base", session).args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        "2",
        env!("CARGO_BIN_EXE_trainer"),
    ]);
    c
}

/// Runs `trainer args…` in `cwd` and returns its output.
pub fn run_in(cwd: &Path, args: &[&str]) -> Output {
    trainer()
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("cannot start the trainer binary")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Encodes an IDX array of bytes.
pub fn idx(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        out.extend_from_slice(&(*d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

/// Writes a valid tiny MNIST-format data set (`n` train and test images) into `dir`.
pub fn write_tiny_mnist(dir: &Path, n: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let images: Vec<u8> = (0..n * 784).map(|i| (i * 7 % 251) as u8).collect();
    let labels: Vec<u8> = (0..n).map(|i| (i % 10) as u8).collect();
    for split in ["train", "t10k"] {
        std::fs::write(
            dir.join(format!("{split}-images-idx3-ubyte")),
            idx(&[n, 28, 28], &images),
        )
        .unwrap();
        std::fs::write(
            dir.join(format!("{split}-labels-idx1-ubyte")),
            idx(&[n], &labels),
        )
        .unwrap();
    }
}

/// Metrics rows of a run directory, without the wall-clock columns.
pub fn metrics_without_timing(run: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(run.join("metrics.jsonl")).expect("metrics.jsonl");
    text.lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).unwrap();
            let m = v.as_object_mut().unwrap();
            m.remove("img_per_s");
            m.remove("seconds");
            m.remove("allreduce_seconds");
            v
        })
        .collect()
}

/// Every `model.*` and `optim.*` tensor of a checkpoint, as raw bytes by name.
pub fn checkpoint_tensors(path: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    st.tensors()
        .into_iter()
        .map(|(k, v)| (k, v.data().to_vec()))
        .collect()
}

/// `trainer synth-connectome --subjects S --nodes N --out <dir>/cohort --seed SEED`, which must
/// succeed: a cohort in the reference's on-disk formats under `dir/cohort`.
pub fn synth_cohort(dir: &Path, subjects: usize, nodes: usize, seed: u64) {
    let (s, n, seed) = (subjects.to_string(), nodes.to_string(), seed.to_string());
    let o = run_in(
        dir,
        &[
            "synth-connectome",
            "--subjects",
            &s,
            "--nodes",
            &n,
            "--out",
            "cohort",
            "--seed",
            &seed,
        ],
    );
    assert!(o.status.success(), "synth-connectome: {}", stderr(&o));
}

/// `scripts/synth_noisy_cohort.py ARGS… --out cohort` in `dir`, which must succeed (python3 with
/// numpy: scripts/setup.sh installs it): a cohort with visit noise and edges that appear.
pub fn noisy_cohort(dir: &Path, args: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/synth_noisy_cohort.py");
    let o = Command::new("python3")
        .arg(&script)
        .args(args)
        .args(["--out", "cohort"])
        .current_dir(dir)
        .output()
        .expect("python3 runs (scripts/setup.sh installs numpy)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `train-gnn` on `dir/cohort` (its scans, morphology and subject table) as run
/// `<results>/runs/<run>`, with `flags` (the model, the fold, …) after them.
pub fn train_gnn_in(dir: &Path, results: &str, run: &str, flags: &[&str]) -> Output {
    let mut args = vec![
        "train-gnn",
        "--sc_dir",
        "cohort/sc",
        "--morph_root",
        "cohort/morph",
        "--subject_info_csv",
        "cohort/subject_info_sc.csv",
        "--results_dir",
        results,
        "--run_name",
        run,
    ];
    args.extend_from_slice(flags);
    run_in(dir, &args)
}

/// `train-gnn --model MODEL` on fold 0 of `dir/cohort`, as run `<results>/runs/<model>`, which
/// must succeed.
pub fn train_model(dir: &Path, model: &str, results: &str) {
    let o = train_gnn_in(dir, results, model, &["--model", model, "--cv_fold", "0"]);
    assert!(o.status.success(), "{model}: {}", stderr(&o));
}

/// `per_subject.csv` of the run directory `run`: per row, column → value.
pub fn per_subject_csv(run: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let mut csv = csv::Reader::from_path(run.join("per_subject.csv")).unwrap();
    let header: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    csv.records()
        .map(|r| {
            let r = r.unwrap();
            header
                .iter()
                .cloned()
                .zip(r.iter().map(String::from))
                .collect()
        })
        .collect()
}
