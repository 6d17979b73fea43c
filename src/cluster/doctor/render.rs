//! The text form of a [`DoctorReport`].

use super::{DoctorReport, Level};
use crate::cluster::gpu::{DriverProbe, GpuInfo};

impl DoctorReport {
    /// Human-readable report.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |k: &str, v: String| out.push_str(&format!("{k:<22} {v}\n"));
        match (&self.cluster, &self.cluster_error) {
            (Some(c), _) => line(
                "scheduler",
                format!(
                    "{} ({}), rank {}/{}, local rank {}/{}, job {}",
                    c.scheduler,
                    c.mode,
                    c.rank,
                    c.world_size,
                    c.local_rank,
                    c.local_world_size,
                    c.job_id.as_deref().unwrap_or("-")
                ),
            ),
            (None, Some(e)) => line("scheduler", format!("unreadable: {e}")),
            (None, None) => {}
        }
        line(
            "container",
            match &self.container {
                Some(c) => format!("{} {}", c.runtime, c.image.as_deref().unwrap_or("")),
                None => "none".into(),
            },
        );
        if !self.gpu_allocation.is_empty() {
            let alloc: Vec<String> = self
                .gpu_allocation
                .iter()
                .map(|a| format!("{}={}", a.var, a.value))
                .collect();
            line("GPU allocation", alloc.join(" "));
        }
        line("CUDA_VISIBLE_DEVICES", self.visible_devices.describe());
        match &self.driver {
            DriverProbe::Absent { reason } => {
                line("NVIDIA driver", format!("not found ({reason})"))
            }
            DriverProbe::Present(d) => {
                line(
                    "NVIDIA driver",
                    format!(
                        "{} (supports CUDA {}) via {}",
                        d.driver_version,
                        d.cuda_driver_version.map_or("?".into(), |v| v.to_string()),
                        d.library
                    ),
                );
                for g in &d.gpus {
                    let visible = self.visible_gpus.iter().any(|v| v.index == g.index);
                    line(&format!("GPU {}", g.index), describe_gpu(g, visible));
                    for m in g.mig.iter().flat_map(|m| &m.instances) {
                        line(
                            &format!("  MIG {}", m.index),
                            format!(
                                "{} {} {}",
                                m.uuid,
                                gib(m.memory_total_bytes),
                                if m.is_free() { "free" } else { "busy" }
                            ),
                        );
                    }
                }
                for e in &d.errors {
                    line("NVML error", e.clone());
                }
            }
        }
        let r = &self.runtime;
        line(
            "CUDA runtime",
            format!(
                "build targets {} ({}); NVRTC {}; driver supports {}",
                r.build_target.version,
                r.build_target.source,
                match &r.nvrtc {
                    Some(n) => n.describe(),
                    None => "not found".into(),
                },
                r.driver_supports.map_or("-".into(), |v| v.to_string())
            ),
        );
        out.push('\n');
        for f in &self.findings {
            let tag = match (f.level, f.code) {
                (Level::Fail, Some(c)) => format!("FAIL [{c}]"),
                (Level::Fail, None) => "FAIL".into(),
                (Level::Warn, _) => "warn".into(),
                (Level::Info, _) => "info".into(),
                (Level::Ok, _) => "ok".into(),
            };
            out.push_str(&format!("{tag:<9} {}\n", f.message));
            if let Some(fix) = &f.fix {
                out.push_str(&format!("{:<9} fix: {fix}\n", ""));
            }
        }
        out.push_str(&format!("exit code {}\n", self.exit_code));
        out
    }
}

fn gib(bytes: Option<u64>) -> String {
    bytes.map_or("? GiB".into(), |b| {
        format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
    })
}

fn describe_gpu(g: &GpuInfo, visible: bool) -> String {
    let mig = match &g.mig {
        None => "MIG n/a".to_string(),
        Some(m) if m.enabled => format!("MIG on, {} instances", m.instances.len()),
        Some(m) if m.pending_enabled => "MIG off (on after reset)".into(),
        Some(_) => "MIG off".into(),
    };
    format!(
        "{} {} cc {} {} {}{}",
        g.name,
        gib(g.memory_total_bytes),
        g.compute_capability.map_or("?".into(), |c| c.to_string()),
        mig,
        g.uuid,
        if visible { " [visible]" } else { " [hidden]" }
    )
}
