//! A toy `--model identity` (tests only) that shows what a new model is: this one file and its
//! line in `registry.rs`. It forecasts the start scan times one trained scale, through the
//! shared baseline job; the test trains it, re-scores it (`eval-gnn`) and asks it for a
//! forecast it cannot make.

use anyhow::Result;
use burn::module::Param;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;

use super::baseline::{GradBaseline, Inner, pairs};
use super::kind::ModelKind;
use super::protocol::fold_data::FoldData;
use super::settings::GnnSettings;
use crate::data::connectome::{FoldSplit, SymMatrix};

/// `--model identity`.
pub(super) struct IdentityModel;

/// The start scan times `w`.
#[derive(Module, Debug)]
pub(super) struct Scale<B: Backend> {
    pub w: Param<Tensor<B, 1>>,
}

impl<B: Backend> Scale<B> {
    fn forward(&self, a: Tensor<B, 3>) -> Tensor<B, 3> {
        a * self.w.val().reshape([1, 1, 1])
    }
}

/// Matrices as a `[B, N, N]` tensor.
fn stack<B: Backend>(mats: &[&SymMatrix], n: usize, device: &B::Device) -> Tensor<B, 3> {
    let mut v = Vec::with_capacity(mats.len() * n * n);
    for m in mats {
        m.dense_into(&mut v);
    }
    Tensor::from_data(TensorData::new(v, [mats.len(), n, n]), device)
}

/// Σ over the visit pairs of `subjects` and the upper triangle of (w·S_v − S_{v+1})².
fn sq_sum<B: Backend>(
    net: &Scale<B>,
    data: &FoldData,
    subjects: &[usize],
    device: &B::Device,
) -> Tensor<B, 1> {
    let n = data.n_nodes();
    let p = pairs(data, subjects);
    let a_in: Vec<_> = p.iter().map(|&(s, v)| &data.scans(s)[v].a_raw).collect();
    let a_out: Vec<_> = p
        .iter()
        .map(|&(s, v)| &data.scans(s)[v + 1].a_raw)
        .collect();
    let upper = Tensor::<B, 1>::from_data(TensorData::new(data.upper.clone(), [n * n]), device);
    let d = net.forward(stack(&a_in, n, device)) - stack(&a_out, n, device);
    (d.powi_scalar(2) * upper.reshape([1, n, n])).sum()
}

impl GradBaseline for IdentityModel {
    const KIND: ModelKind = ModelKind::Identity;
    const FILE_STEM: &'static str = "identity";
    type Net<B: AutodiffBackend> = Scale<B>;

    fn sizes(_settings: &GnnSettings, _n: usize) -> Vec<(&'static str, usize)> {
        Vec::new()
    }

    fn init<B: AutodiffBackend>(_s: &GnnSettings, _n: usize, device: &B::Device) -> Scale<B> {
        Scale {
            w: Param::from_tensor(Tensor::ones([1], device)),
        }
    }

    fn fold_items(
        _data: &FoldData,
        split: &FoldSplit,
        fold: usize,
        _settings: &GnnSettings,
        _test_subjects: usize,
    ) -> Result<(Vec<usize>, String)> {
        Ok((split.train.clone(), format!("identity fold {fold}")))
    }

    fn loss_sum<B: AutodiffBackend>(
        net: &Scale<B>,
        data: &FoldData,
        subjects: &[usize],
        device: &B::Device,
    ) -> Tensor<B, 1> {
        sq_sum(net, data, subjects, device)
    }

    fn eval_loss<B: AutodiffBackend>(
        net: &Inner<Self, B>,
        data: &FoldData,
        subjects: &[usize],
        _batch: usize,
        device: &B::Device,
    ) -> f64 {
        let n = data.n_nodes();
        let count = pairs(data, subjects).len() * n * (n - 1) / 2;
        let sum: f64 = sq_sum(net, data, subjects, device).into_scalar().elem();
        sum / count as f64
    }

    fn predict<B: AutodiffBackend>(
        net: &Inner<Self, B>,
        data: &FoldData,
        subjects: &[usize],
        _batch: usize,
        _device: &B::Device,
    ) -> Vec<Array2<f32>> {
        let w: f32 = net.w.val().into_scalar().elem();
        subjects
            .iter()
            .map(|&s| data.scans(s)[0].a_raw.dense().mapv(|x| w * x))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::marker::PhantomData;
    use std::path::Path;

    use burn::backend::Autodiff;
    use burn::backend::flex::{Flex, FlexDevice};

    use super::super::cv::{Forecaster, WithModel};
    use super::super::protocol::saved_run::{Horizon, SavedRun};
    use super::super::registry::with_model;
    use super::super::saved::reopen::{DataOverrides, Forecast};
    use super::super::{Factory, GnnRun};
    use crate::cli::Command;
    use crate::cli::config::parse_from;
    use crate::cluster::{Vars, scheduler::detect};
    use crate::data::connectome::{CohortPaths, write_synthetic_cohort};
    use crate::dist::Single;
    use crate::engine::RunContext;
    use crate::outputs::RunDir;
    use crate::outputs::run_files::read_json;

    /// What `launch::run` does, on Flex in this process (the launcher starts MPI, which a
    /// process does once).
    struct InProcess(GnnRun);

    impl WithModel for InProcess {
        type Output = anyhow::Result<()>;
        fn with<M: Forecaster>(self) -> anyhow::Result<()> {
            let run = self.0;
            let ctx = RunContext::<Autodiff<Flex>> {
                device: FlexDevice,
                placement: run.launch.placement,
                comm: Box::new(Single),
                cluster: detect(&Vars::from_pairs(Vec::<(String, String)>::new()))?,
                job_id: None,
                preflight: None,
                run: run.launch.run.clone(),
                run_dir: run.launch.run.out.clone().unwrap(),
                resume: None,
                fused_adam: None,
                step_capture: None,
            };
            let factory = Factory::<M> {
                run,
                model: PhantomData,
            };
            let job = crate::launch::JobFactory::build(factory, &ctx)?;
            crate::engine::train(job, &ctx)?;
            Ok(())
        }
    }

    fn command(argv: &[&str]) -> Command {
        let argv = ["trainer"].iter().chain(argv).map(Into::into).collect();
        parse_from(argv).unwrap().command
    }

    #[test]
    fn a_model_in_one_file_and_one_line_trains_rescores_and_refuses_what_it_cannot() {
        let t = tempfile::tempdir().unwrap();
        let cohort = t.path().join("cohort");
        write_synthetic_cohort(&cohort, 16, 8, 1).unwrap();
        let paths = CohortPaths::under(&cohort);
        let out = t.path().join("run");
        let arg = |p: &Path| p.to_str().unwrap().to_string();
        let (sc, morph, res, o) = (
            arg(&paths.sc_dir),
            arg(&paths.morph_root),
            arg(t.path()),
            arg(&out),
        );
        let Command::TrainGnn(a) = command(&[
            "train-gnn",
            "--model",
            "identity",
            "--sc_dir",
            &sc,
            "--morph_root",
            &morph,
            "--results_dir",
            &res,
            "--out",
            &o,
            "--cv_fold",
            "0",
            "--max_epochs",
            "2",
            "--learning_rate",
            "0.01",
        ]) else {
            unreachable!()
        };
        let run = a.resolve().unwrap();
        let placement = run.launch.placement;
        with_model(run.settings.model_kind, InProcess(run)).unwrap();

        let files = RunDir::new(&out);
        assert!(files.best_model("identity_fold0").is_file());
        let rows = files.read_metrics().unwrap();
        assert_eq!(rows.len(), 2);
        for row in &rows {
            assert_eq!(row["model"], "identity");
            assert!(
                row["val_sc_log_mse"].as_f64().unwrap().is_finite(),
                "{row:?}"
            );
        }
        assert!(files.results_json().is_file());

        let Command::EvalGnn(s) = command(&["eval-gnn", &o]) else {
            unreachable!()
        };
        crate::train::gnn::saved::eval_gnn::run(s).unwrap();
        let m: serde_json::Value =
            read_json(&files.eval_dir("test", "best").eval_metrics_json()).unwrap();
        assert!(
            m["model"]["sc_log_mse"].as_f64().unwrap().is_finite(),
            "{m}"
        );
        assert_eq!(m["fold"], 0);

        let saved = SavedRun::open(&out, "last", &DataOverrides::default()).unwrap();
        let subjects = saved.prep.test.clone();
        let job = Forecast {
            run: &saved,
            subjects: &subjects,
            horizon: Horizon::Years {
                dts: &vec![1.0; subjects.len()],
                targets: &vec![None; subjects.len()],
            },
        };
        let err = crate::backend::dispatch_checked(placement, job).unwrap_err();
        assert!(
            err.to_string()
                .contains("--model identity has no time input"),
            "{err:#}"
        );
    }
}
