//! `trainer eval`: an MNIST checkpoint scored on the test split.

use std::path::PathBuf;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;

use crate::backend::{self, BackendJob, Placement};
use crate::data::mnist::{self, Split};
use crate::toolbox::checkpoint::Checkpoint;
use crate::train::mnist::evaluate::{EvalResult, evaluate, load_model};

/// `trainer eval`.
#[derive(clap::Args, Debug, Clone)]
pub(crate) struct EvalSettings {
    /// A checkpoint written by `train-mnist` (`*.safetensors`).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Directory with the IDX files; the test split is used.
    #[arg(long)]
    pub data_dir: PathBuf,
    #[arg(long)]
    pub limit_test: Option<usize>,
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub device: crate::backend::DeviceSettings,
}

struct EvalJob(EvalSettings);

impl BackendJob for EvalJob {
    type Output = EvalResult;
    fn run<B: AutodiffBackend>(self, device: B::Device, _p: Placement) -> Result<EvalResult> {
        let args = self.0;
        let ck = Checkpoint::load(&args.checkpoint)?;
        let model = load_model::<B::InnerBackend>(&ck, &args.checkpoint, &device)?;
        let mut test = mnist::load_split(&args.data_dir, Split::Test)?;
        if let Some(n) = args.limit_test {
            test.truncate(n);
        }
        Ok(evaluate(&model, &test, args.batch_size, &device))
    }
}

/// `trainer eval`.
pub(crate) fn run(args: EvalSettings) -> Result<()> {
    let placement = args.device.placement()?;
    let json = args.json;
    let r = backend::dispatch_checked(placement, EvalJob(args))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "examples {}  loss {:.4}  accuracy {:.2}%",
            r.examples,
            r.loss,
            100.0 * r.accuracy
        );
        println!("confusion matrix (rows: true class, columns: predicted):");
        for (i, row) in r.confusion.iter().enumerate() {
            let cells: Vec<String> = row.iter().map(|c| format!("{c:5}")).collect();
            println!("{i:>3} {}", cells.join(""));
        }
    }
    Ok(())
}
