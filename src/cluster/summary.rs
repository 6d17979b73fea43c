//! A compact, serialisable record of where a run happened, for `run_meta.json`.

use serde::Serialize;

use super::container::{Container, detect_container};
use super::env::{ClusterEnv, SchedulerKind};
use super::gpu::DriverProbe;
use super::vars::Vars;

/// Where and how a run was launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterSummary {
    /// Scheduler or launcher.
    pub scheduler: SchedulerKind,
    /// Launch mode, e.g. "srun step".
    pub mode: String,
    /// Global rank of the process that wrote this.
    pub rank: u32,
    /// Number of ranks.
    pub world_size: u32,
    /// Rank on the node.
    pub local_rank: u32,
    /// Ranks on the node.
    pub local_world_size: u32,
    /// Node index.
    pub node_rank: u32,
    /// Number of nodes.
    pub num_nodes: u32,
    /// Rendezvous address.
    pub main_address: String,
    /// Rendezvous port.
    pub main_port: u16,
    /// Job id.
    pub job_id: Option<String>,
    /// Array job id.
    pub array_job_id: Option<String>,
    /// Array task id.
    pub array_task_id: Option<u32>,
    /// Requeue/restart count.
    pub restart_count: Option<u32>,
    /// Partition or queue.
    pub partition: Option<String>,
    /// Number of hosts.
    pub num_hosts: usize,
    /// `CUDA_VISIBLE_DEVICES` as set.
    pub cuda_visible_devices: Option<String>,
    /// CUDA ordinal this rank uses.
    pub cuda_ordinal: Option<u32>,
    /// Container, if any.
    pub container: Option<Container>,
    /// Driver version, when a driver was probed and found.
    pub driver_version: Option<String>,
    /// Names of the GPUs the driver sees.
    pub gpu_names: Vec<String>,
}

impl ClusterSummary {
    /// Summarises an environment, the container from `vars`, and optionally a driver probe.
    pub fn new(env: &ClusterEnv, vars: &Vars, driver: Option<&DriverProbe>) -> Self {
        let info = driver.and_then(DriverProbe::info);
        Self {
            scheduler: env.scheduler,
            mode: env.mode.clone(),
            rank: env.rank,
            world_size: env.world_size,
            local_rank: env.local_rank,
            local_world_size: env.local_world_size,
            node_rank: env.node_rank,
            num_nodes: env.num_nodes,
            main_address: env.main_address.clone(),
            main_port: env.main_port,
            job_id: env.job_id.clone(),
            array_job_id: env.array_job_id.clone(),
            array_task_id: env.array_task_id,
            restart_count: env.restart_count,
            partition: env.partition.clone(),
            num_hosts: env.hosts.len(),
            cuda_visible_devices: env.visible_devices.raw.clone(),
            cuda_ordinal: env.device.as_ref().map(|d| d.cuda_ordinal),
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
    use crate::cluster::env::detect;

    #[test]
    fn summary_of_an_array_task_serialises() {
        let vars = Vars::from_pairs([
            ("SLURM_JOB_ID", "8"),
            ("SLURM_ARRAY_JOB_ID", "7"),
            ("SLURM_ARRAY_TASK_ID", "3"),
            ("SLURM_JOB_NODELIST", "ai[01-02]"),
        ]);
        let env = detect(&vars).expect("valid");
        let s = ClusterSummary::new(&env, &vars, None);
        let json = serde_json::to_value(&s).expect("serialises");
        assert_eq!(json["scheduler"], "slurm");
        assert_eq!(json["array_task_id"], 3);
        assert_eq!(json["num_hosts"], 2);
    }
}
