//! PyTorch's own examples/mnist CNN as a contender of `trainer bench mnist --pytorch PYTHON`:
//! `benches/pytorch_mnist.py`, embedded in the binary, run by that interpreter on the same data,
//! batch, steps and threads.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::backend::fast_cpu;

use super::BenchSettings as BenchArgs;
use super::report::{Measure, Rate};

const SCRIPT: &str = include_str!("../../benches/pytorch_mnist.py");

/// Where PyTorch's training batches come from (the script's `--feed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Feed {
    /// Data on the device, each batch a slice of it: the reference (eager, as ours).
    Device,
    /// Normalised on the host and copied to the device per step (a loader without pinned
    /// memory): reported, never the reference.
    Host,
    /// The whole step captured once as a CUDA graph (`torch.cuda.graphs`, Adam with
    /// `capturable=True`) and replayed per step on static inputs: the ceiling of launch-free
    /// training on a GPU, reported, never the reference.
    Graph,
}

impl Feed {
    fn arg(self) -> &'static str {
        match self {
            Feed::Device => "device",
            Feed::Host => "host",
            Feed::Graph => "graph",
        }
    }
}

/// One PyTorch round on `device` (`cpu` or `cuda:N`), its training batches fed as `feed` says:
/// the figures and the `pytorch <version>` label.
pub(crate) fn run(
    python: &Path,
    args: &BenchArgs,
    batch_size: usize,
    threads: usize,
    device: &str,
    feed: Feed,
) -> Result<(Measure, String)> {
    let mut cmd = Command::new(python);
    cmd.arg("-");
    match &args.data_dir {
        Some(d) => cmd.arg(d),
        None => cmd.arg("--synthetic"),
    };
    cmd.args(["--steps", &args.steps.to_string()])
        .args(["--warmup", &args.warmup.to_string()])
        .args(["--batch-size", &batch_size.to_string()])
        .args(["--threads", &threads.to_string(), "--json"])
        .args(["--device", device])
        .args(["--feed", feed.arg()])
        // TRAINER_CPU_AVX512=0 stands for a CPU without AVX-512: PyTorch too.
        .envs(fast_cpu::isa::pytorch_env().iter().copied())
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
        .write_all(SCRIPT.as_bytes())?;
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
    let measure = Measure {
        train: Rate {
            img_per_s: num("train_img_per_s"),
            threads: num("train_threads_used"),
            counts: None,
        },
        infer: Rate {
            img_per_s: num("infer_img_per_s"),
            threads: num("infer_threads_used"),
            counts: None,
        },
        conv_implicit_gemm: None,
    };
    // The SIMD level ATen's kernels run at (`AVX512`, `AVX2`, ...): it names what was measured.
    let label = match (device, v["cpu_capability"].as_str()) {
        ("cpu", Some(isa)) => format!("pytorch {} {isa}", v["torch"].as_str().unwrap_or("?")),
        _ => format!("pytorch {}", v["torch"].as_str().unwrap_or("?")),
    };
    let label = match feed {
        Feed::Device => label,
        Feed::Host => format!("{label} host-fed"),
        Feed::Graph => format!("{label} cuda-graph"),
    };
    Ok((measure, label))
}
