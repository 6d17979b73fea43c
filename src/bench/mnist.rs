//! `trainer bench mnist`: training and inference throughput of the MNIST CNN on every compiled
//! backend and usable device, in one run, warm-up excluded.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLoss;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;

use crate::backend::fast_cpu::profile as op_profile;
use crate::backend::{self, BackendJob, Placement};
use crate::cli::BenchArgs;
use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::models::cnn::MnistCnn;

use crate::engine::optim::{Adam, Grads};
use crate::files::write_json;

#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub backend: String,
    pub device: String,
    pub batch_size: usize,
    pub steps: usize,
    /// Rounds the figures are the median of.
    pub rounds: usize,
    pub train_img_per_s: f64,
    pub infer_img_per_s: f64,
    pub error: Option<String>,
}

struct BenchJob<'a> {
    data: &'a MnistSplit,
    args: &'a BenchArgs,
}

fn batch<B: Backend>(
    data: &MnistSplit,
    step: usize,
    bs: usize,
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let n = data.len();
    let idx: Vec<usize> = (0..bs).map(|i| (step * bs + i) % n).collect();
    let (x, y) = data.batch(&idx);
    (
        Tensor::from_data(TensorData::new(x, [bs, 1, 28, 28]), device),
        Tensor::from_data(TensorData::new(y, [bs]), device),
    )
}

impl BackendJob for BenchJob<'_> {
    type Output = (f64, f64);
    fn run<B: AutodiffBackend>(self, device: B::Device, p: Placement) -> Result<(f64, f64)> {
        let (bs, steps, warmup) = (self.args.batch_size, self.args.steps, self.args.warmup);
        op_profile::enable(op_profile::requested());
        B::seed(&device, 1);
        let mut model = MnistCnn::<B>::new(&device, true);
        crate::engine::params::materialize(&model);
        let mut adam = Adam::<B::InnerBackend>::default();
        let loss_fn = CrossEntropyLoss::new(None, &device);
        let mut timed = None;
        for step in 0..warmup + steps {
            if step == warmup {
                timed = Some(Instant::now());
                op_profile::reset();
            }
            op_profile::phase("data");
            let (x, y) = batch::<B>(self.data, step, bs, &device);
            op_profile::phase("forward");
            let loss = loss_fn.forward(model.forward(x), y);
            op_profile::phase("backward");
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            op_profile::phase("optimizer");
            model = adam.step(1e-3, model, Grads::Params(grads));
        }
        // Reading a value waits for queued device work.
        let _ = crate::engine::params::collect(&model);
        let label = format!("{} training step, batch {bs}", p.backend.name());
        super::profile::print(&label, &op_profile::take(), steps);
        op_profile::enable(false);
        let train =
            (bs * steps) as f64 / timed.map(|t| t.elapsed().as_secs_f64()).unwrap_or(f64::NAN);

        let eval = model.valid();
        let mut timed = None;
        for step in 0..warmup + steps {
            if step == warmup {
                timed = Some(Instant::now());
            }
            let (x, _) = batch::<B::InnerBackend>(self.data, step, bs, &device);
            let _ = eval.forward(x).argmax(1).into_data();
        }
        let infer =
            (bs * steps) as f64 / timed.map(|t| t.elapsed().as_secs_f64()).unwrap_or(f64::NAN);
        Ok((train, infer))
    }
}

/// Deterministic synthetic digits when no data directory is given.
fn synthetic(n: usize) -> MnistSplit {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let images = (0..n * PIXELS)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect();
    MnistSplit {
        images,
        labels: (0..n).map(|i| (i % 10) as u8).collect(),
    }
}

/// PyTorch's examples/mnist CNN timed the same way (`benches/pytorch_mnist.py`).
const PYTORCH_SCRIPT: &str = include_str!("../../benches/pytorch_mnist.py");

/// Runs the PyTorch script with `python`; returns (train, infer) img/s and the torch version.
fn pytorch(python: &Path, args: &BenchArgs) -> Result<(f64, f64, String)> {
    use std::io::Write;
    let threads = cpu_threads();
    let mut cmd = Command::new(python);
    cmd.arg("-");
    match &args.data_dir {
        Some(d) => cmd.arg(d),
        None => cmd.arg("--synthetic"),
    };
    cmd.args(["--steps", &args.steps.to_string()])
        .args(["--warmup", &args.warmup.to_string()])
        .args(["--batch-size", &args.batch_size.to_string()])
        .args(["--threads", &threads.to_string(), "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("--pytorch {}: cannot start it", python.display()))?;
    child
        .stdin
        .take()
        .context("no stdin")?
        .write_all(PYTORCH_SCRIPT.as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "--pytorch {}: the PyTorch benchmark failed ({}): {}",
            python.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .with_context(|| format!("--pytorch {}: no JSON result in {text:?}", python.display()))?;
    let num = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    Ok((
        num("train_img_per_s"),
        num("infer_img_per_s"),
        v["torch"].as_str().unwrap_or("?").to_string(),
    ))
}

/// Threads the CPU backends use: `RAYON_NUM_THREADS` if set, else every available core.
fn cpu_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// One contender of the benchmark and its figures over the rounds.
struct Contender {
    backend: String,
    device: String,
    placement: Option<Placement>,
    train: Vec<f64>,
    infer: Vec<f64>,
    error: Option<String>,
}

pub fn run(args: BenchArgs) -> Result<()> {
    if args.target == crate::cli::BenchTarget::Gnn {
        return super::gnn::run(&args);
    }
    if args.rounds == 0 || args.steps == 0 || args.batch_size == 0 {
        bail!("--rounds, --steps and --batch-size must be at least 1");
    }
    let data = match &args.data_dir {
        Some(d) => mnist::load_split(d, Split::Train)?,
        None => synthetic(4096),
    };
    let mut all: Vec<Contender> = backend::available_placements()
        .into_iter()
        .map(|p| Contender {
            backend: p.backend.name().into(),
            device: p.device.to_string(),
            placement: Some(p),
            train: vec![],
            infer: vec![],
            error: None,
        })
        .collect();
    if args.pytorch.is_some() {
        all.push(Contender {
            backend: "pytorch".into(),
            device: "cpu".into(),
            placement: None,
            train: vec![],
            infer: vec![],
            error: None,
        });
    }
    for round in 0..args.rounds {
        for c in all.iter_mut().filter(|c| c.error.is_none()) {
            eprintln!(
                "[bench] round {}/{}: {} on {} ...",
                round + 1,
                args.rounds,
                c.backend,
                c.device
            );
            let result = match (c.placement, &args.pytorch) {
                (Some(p), _) => backend::dispatch(
                    p,
                    BenchJob {
                        data: &data,
                        args: &args,
                    },
                ),
                (None, Some(python)) => pytorch(python, &args).map(|(t, i, version)| {
                    c.backend = format!("pytorch {version}");
                    (t, i)
                }),
                (None, None) => continue,
            };
            match result {
                Ok((t, i)) => {
                    c.train.push(t);
                    c.infer.push(i);
                }
                Err(e) => c.error = Some(format!("{e:#}")),
            }
        }
    }
    let rows: Vec<BenchRow> = all
        .into_iter()
        .map(|c| BenchRow {
            backend: c.backend,
            device: c.device,
            batch_size: args.batch_size,
            steps: args.steps,
            rounds: c.train.len(),
            train_img_per_s: median(c.train),
            infer_img_per_s: median(c.infer),
            error: c.error,
        })
        .collect();
    println!(
        "{:<20} {:<8} {:>6} {:>14} {:>14}",
        "backend", "device", "batch", "train img/s", "infer img/s"
    );
    for r in &rows {
        println!(
            "{:<20} {:<8} {:>6} {:>14.1} {:>14.1}{}",
            r.backend,
            r.device,
            r.batch_size,
            r.train_img_per_s,
            r.infer_img_per_s,
            r.error
                .as_deref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
    }
    let json = serde_json::json!({
        "target": "mnist", "rounds": args.rounds,
        "threads": cpu_threads(), "rows": rows,
    });
    println!("{}", serde_json::to_string(&json)?);
    if let Some(path) = &args.json {
        write_json(path, &json)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_rounds() {
        assert_eq!(super::median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(vec![4.0, 1.0, f64::NAN, 2.0]), 2.0);
        assert!(super::median(vec![]).is_nan());
    }
}
