//! The CUDA preflight that train commands with `--device cuda` run before loading data, so a
//! job that cannot use its GPU stops at once with a clear message instead of burning its slot.

use std::process::ExitCode;

use super::compat::GpuBackend;
use super::doctor::{DoctorReport, diagnose_for};
use super::gpu::DriverProbe;
use super::nvrtc::NvrtcInfo;
use super::vars::Vars;

/// Why the GPU cannot be used; carries the full report and a documented exit code.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "CUDA preflight failed: {message}\n  fix: {fix}\n  (run `trainer doctor` for the full report; exit code {code})"
)]
pub struct PreflightError {
    /// Exit code from [`super::exit_codes`].
    pub code: u8,
    /// The first failure.
    pub message: String,
    /// Its one-line fix.
    pub fix: String,
    /// Everything doctor found.
    pub report: Box<DoctorReport>,
}

impl PreflightError {
    /// The process exit code to stop with.
    pub fn exit_code(&self) -> ExitCode {
        crate::exit::Exit::from_status(self.code.into()).into()
    }
}

/// Probes this machine and checks that training on CUDA with `backend` can start (a GPU is
/// required; the backend's own compatibility rules decide: `cluster::compat`).
pub(crate) fn preflight_cuda(backend: GpuBackend) -> Result<DoctorReport, PreflightError> {
    check(DoctorReport::collect_for(true, &[backend], true))
}

/// [`preflight_cuda`] from given variables and probes, for tests.
pub fn preflight_cuda_with(
    vars: &Vars,
    driver: DriverProbe,
    nvrtc: Option<NvrtcInfo>,
    backend: GpuBackend,
) -> Result<DoctorReport, PreflightError> {
    check(diagnose_for(
        vars,
        driver,
        nvrtc,
        None,
        true,
        &[backend],
        true,
    ))
}

fn check(report: DoctorReport) -> Result<DoctorReport, PreflightError> {
    if report.exit_code == super::exit_codes::OK {
        return Ok(report);
    }
    let (message, fix) = report
        .failures()
        .next()
        .map(|f| (f.message.clone(), f.fix.clone().unwrap_or_default()))
        .unwrap_or_default();
    Err(PreflightError {
        code: report.exit_code,
        message,
        fix,
        report: Box::new(report),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::exit_codes;

    #[test]
    fn no_driver_stops_the_preflight() {
        let err = preflight_cuda_with(
            &Vars::default(),
            DriverProbe::Absent {
                reason: "no lib".into(),
            },
            None,
            GpuBackend::Tch,
        )
        .expect_err("no driver");
        assert_eq!(err.code, exit_codes::NO_DRIVER);
        let text = err.to_string();
        assert!(
            text.contains("no NVIDIA driver") && text.contains("fix:"),
            "{text}"
        );
    }

    #[test]
    fn missing_nv_stops_the_preflight() {
        let vars = Vars::from_pairs([
            ("SLURM_JOB_ID", "1"),
            ("SLURM_STEP_GPUS", "0"),
            ("SINGULARITY_CONTAINER", "/x.sif"),
        ]);
        let err = preflight_cuda_with(
            &vars,
            DriverProbe::Absent { reason: "x".into() },
            None,
            GpuBackend::Cuda,
        )
        .expect_err("missing --nv");
        assert_eq!(err.code, exit_codes::CONTAINER_MISSING_NV);
        assert!(err.message.contains("--nv"));
    }
}
