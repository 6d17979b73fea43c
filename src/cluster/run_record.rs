//! The cluster record of `run_meta.json`: the [`ClusterEnv`] itself plus what only a run
//! records (number of hosts, container, driver), so nothing of the environment is restated.

use serde::Serialize;

use super::container::{Container, detect_container};
use super::gpu::DriverProbe;
use super::scheduler::ClusterEnv;
use super::vars::Vars;

/// Where and how a run was launched: every field of [`ClusterEnv`] at the top level, then the
/// fields below.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct RunCluster<'a> {
    /// The scheduler environment (serialised flat: `scheduler`, `rank`, `hosts`, ...).
    #[serde(flatten)]
    pub env: &'a ClusterEnv,
    /// Number of hosts (`hosts` may be long; this is what a reader usually wants).
    pub num_hosts: usize,
    /// Container, if any.
    pub container: Option<Container>,
    /// Driver version, when a driver was probed and found.
    pub driver_version: Option<String>,
    /// Names of the GPUs the driver sees.
    pub gpu_names: Vec<String>,
}

impl<'a> RunCluster<'a> {
    /// The record of `env`, the container from `vars`, and optionally a driver probe.
    pub(crate) fn new(env: &'a ClusterEnv, vars: &Vars, driver: Option<&DriverProbe>) -> Self {
        let info = driver.and_then(DriverProbe::info);
        Self {
            env,
            num_hosts: env.hosts.len(),
            container: detect_container(vars),
            driver_version: info.map(|i| i.driver_version.clone()),
            gpu_names: info
                .map(|i| i.gpus.iter().map(|g| g.name.clone()).collect())
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::scheduler::detect;

    #[test]
    fn record_of_an_array_task_serialises_flat() {
        let vars = Vars::from_pairs([
            ("SLURM_JOB_ID", "8"),
            ("SLURM_ARRAY_JOB_ID", "7"),
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_JOB_NODELIST", "ai[01-02]"),
            ("APPTAINER_CONTAINER", "/x/t.sif"),
        ]);
        let env = detect(&vars).expect("valid");
        let json = serde_json::to_value(RunCluster::new(&env, &vars, None)).expect("serialises");
        assert_eq!(json["scheduler"], "slurm");
        assert_eq!(json["array_task_id"], 3);
        assert_eq!(json["num_hosts"], 2);
        assert_eq!(json["hosts"], serde_json::json!(["ai01", "ai02"]));
        assert_eq!(json["main_port"], env.main_port);
        assert_eq!(json["container"]["runtime"], "apptainer");
        // Every field of ClusterEnv is there, once, at the top level.
        let env_json = serde_json::to_value(&env).expect("serialises");
        for (k, v) in env_json.as_object().expect("object") {
            assert_eq!(&json[k], v, "{k}");
        }
    }
}
