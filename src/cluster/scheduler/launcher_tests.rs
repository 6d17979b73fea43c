//! Scheduler environments built from variable maps: torchrun (alone and inside Slurm), LSF,
//! gflow and a local run.

use super::tests::{err, ok};
use super::*;

#[test]
fn torchrun_variables() {
    let e = ok(&[
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("GROUP_RANK", "1"),
        ("MASTER_ADDR", "node7"),
        ("MASTER_PORT", "29400"),
        ("TORCHELASTIC_RESTART_COUNT", "1"),
    ]);
    assert_eq!(e.scheduler, SchedulerKind::Torchrun);
    assert_eq!(
        (
            e.rank,
            e.world_size,
            e.local_rank,
            e.local_world_size,
            e.node_rank,
            e.num_nodes
        ),
        (5, 8, 1, 4, 1, 2)
    );
    assert_eq!((e.main_address.as_str(), e.main_port), ("node7", 29400));
    assert_eq!(e.restart_count, Some(1));
}

#[test]
fn torchrun_inside_slurm_keeps_the_job_ids() {
    let e = ok(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "0"),
        ("LOCAL_WORLD_SIZE", "2"),
        ("MASTER_ADDR", "ai01"),
        ("MASTER_PORT", "29500"),
        ("SLURM_JOB_ID", "99"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_PROCID", "0"),
        ("SLURM_ARRAY_JOB_ID", "98"),
        ("SLURM_ARRAY_TASK_ID", "1"),
    ]);
    assert_eq!(e.scheduler, SchedulerKind::Torchrun);
    assert_eq!(e.world_size, 2);
    assert_eq!(e.job_id.as_deref(), Some("99"));
    assert_eq!(e.array_task_id, Some(1));
}

#[test]
fn torchrun_inside_lsf_or_gflow_keeps_the_job_ids() {
    let torchrun = [("RANK", "0"), ("WORLD_SIZE", "1")];
    let e = ok(&[torchrun[0], torchrun[1], ("LSB_JOBID", "31337")]);
    assert_eq!(e.scheduler, SchedulerKind::Torchrun);
    assert_eq!(e.job_id.as_deref(), Some("31337"));
    let e = ok(&[torchrun[0], torchrun[1], ("GFLOW_ARRAY_TASK_ID", "4")]);
    assert_eq!(e.scheduler, SchedulerKind::Torchrun);
    assert_eq!(e.array_task_id, Some(4));
    // Slurm first when two schedulers' variables are set (the detection order).
    let e = ok(&[
        torchrun[0],
        torchrun[1],
        ("LSB_JOBID", "7"),
        ("SLURM_JOB_ID", "8"),
    ]);
    assert_eq!(e.job_id.as_deref(), Some("8"));
    let e = ok(&[torchrun[0], torchrun[1]]);
    assert_eq!((e.job_id, e.array_task_id), (None, None));
}

#[test]
fn torchrun_missing_or_contradictory() {
    let msg = err(&[("RANK", "0")]);
    assert!(msg.contains("WORLD_SIZE"), "{msg}");
    let msg = err(&[("WORLD_SIZE", "2")]);
    assert!(msg.contains("RANK"), "{msg}");
    let msg = err(&[("RANK", "2"), ("WORLD_SIZE", "2")]);
    assert!(
        msg.contains("RANK=2") && msg.contains("WORLD_SIZE=2"),
        "{msg}"
    );
    let msg = err(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "1"),
        ("MASTER_PORT", "1"),
    ]);
    assert!(msg.contains("MASTER_ADDR"), "{msg}");
    let msg = err(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "1"),
        ("MASTER_ADDR", "h"),
    ]);
    assert!(msg.contains("MASTER_PORT"), "{msg}");
    let msg = err(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "3"),
        ("LOCAL_WORLD_SIZE", "2"),
        ("MASTER_ADDR", "h"),
        ("MASTER_PORT", "1"),
    ]);
    assert!(
        msg.contains("LOCAL_RANK=3") && msg.contains("LOCAL_WORLD_SIZE=2"),
        "{msg}"
    );
    let msg = err(&[("RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_PORT", "70000")]);
    assert!(msg.contains("MASTER_PORT"), "{msg}");
    let msg = err(&[("RANK", "-1"), ("WORLD_SIZE", "1")]);
    assert!(msg.contains("RANK"), "{msg}");
    let msg = err(&[("RANK", "0"), ("WORLD_SIZE", "0")]);
    assert!(msg.contains("WORLD_SIZE=0"), "{msg}");
}

#[test]
fn lsf_job_and_array() {
    let e = ok(&[
        ("LSB_JOBID", "31337"),
        ("LSB_JOBINDEX", "4"),
        ("LSB_QUEUE", "gpu"),
        ("LSB_MCPU_HOSTS", "a100n1 1 a100n2 1"),
        ("CUDA_VISIBLE_DEVICES", "0"),
    ]);
    assert_eq!(e.scheduler, SchedulerKind::Lsf);
    assert_eq!(e.mode, "bsub job");
    assert_eq!(e.hosts, ["a100n1", "a100n2"]);
    assert_eq!(e.main_address, "a100n1");
    assert_eq!(e.main_port, PORT_BASE + 1337);
    assert_eq!(e.array_task_id, Some(4));
    assert_eq!(e.array_job_id.as_deref(), Some("31337"));
    assert_eq!(e.partition.as_deref(), Some("gpu"));
    assert!(
        e.gpu_allocation
            .iter()
            .any(|a| a.var == "CUDA_VISIBLE_DEVICES")
    );
    let e = ok(&[
        ("LSB_JOBID", "1"),
        ("LSB_JOBINDEX", "0"),
        ("LSB_HOSTS", "h1 h1 h2"),
    ]);
    assert_eq!(e.array_task_id, None);
    assert_eq!(e.hosts, ["h1", "h2"]);
    let msg = err(&[("LSB_JOBID", "1"), ("LSB_MCPU_HOSTS", "h1 4 h2")]);
    assert!(msg.contains("LSB_MCPU_HOSTS"), "{msg}");
}

#[test]
fn lsf_jsrun_ranks() {
    let e = ok(&[
        ("LSB_JOBID", "10"),
        ("LSB_MCPU_HOSTS", "n1 2 n2 2"),
        ("JSM_NAMESPACE_RANK", "3"),
        ("JSM_NAMESPACE_SIZE", "4"),
        ("JSM_NAMESPACE_LOCAL_RANK", "1"),
        ("JSM_NAMESPACE_LOCAL_SIZE", "2"),
    ]);
    assert_eq!(
        (e.rank, e.world_size, e.node_rank, e.num_nodes),
        (3, 4, 1, 2)
    );
    let msg = err(&[("LSB_JOBID", "10"), ("JSM_NAMESPACE_SIZE", "4")]);
    assert!(msg.contains("JSM_NAMESPACE_RANK"), "{msg}");
}

#[test]
fn gflow_job() {
    let e = ok(&[("GFLOW_ARRAY_TASK_ID", "0"), ("CUDA_VISIBLE_DEVICES", "1")]);
    assert_eq!(e.scheduler, SchedulerKind::Gflow);
    assert_eq!(e.array_task_id, None);
    assert_eq!(e.main_port, DEFAULT_PORT);
    assert!(
        e.gpu_allocation
            .iter()
            .any(|a| a.var == "CUDA_VISIBLE_DEVICES")
    );
    let e = ok(&[("GFLOW_ARRAY_TASK_ID", "3")]);
    assert_eq!(e.array_task_id, Some(3));
    assert_eq!(e.main_port, DEFAULT_PORT + 3);
    assert!(err(&[("GFLOW_ARRAY_TASK_ID", "x")]).contains("GFLOW_ARRAY_TASK_ID"));
}

#[test]
fn local_run() {
    let e = ok(&[]);
    assert_eq!(e.scheduler, SchedulerKind::Local);
    assert_eq!((e.rank, e.world_size, e.main_port), (0, 1, DEFAULT_PORT));
    assert_eq!(e.main_address, "127.0.0.1");
    assert_eq!(e.device.map(|d| d.cuda_ordinal), Some(0));
    assert!(e.gpu_allocation.is_empty());
    let e = ok(&[("CUDA_VISIBLE_DEVICES", "")]);
    assert!(e.device.is_none());
}

#[test]
fn ports_from_job_ids() {
    assert_eq!(port_from_job_id("123456"), PORT_BASE + 3456);
    assert_eq!(port_from_job_id("7"), PORT_BASE + 7);
    assert_eq!(port_from_job_id("1000"), PORT_BASE + 1000);
    let p = port_from_job_id("abc");
    assert!((PORT_BASE..PORT_BASE + 10_000).contains(&p));
    assert_eq!(port_from_job_id("abc"), p);
    assert_eq!(port_from_job_id(""), port_from_job_id(""));
}

#[test]
fn tasks_per_node_lists() {
    assert_eq!(parse_tasks_per_node("2(x3),1"), Some(vec![2, 2, 2, 1]));
    assert_eq!(parse_tasks_per_node("4"), Some(vec![4]));
    assert_eq!(parse_tasks_per_node("2(x"), None);
    assert_eq!(parse_tasks_per_node(""), None);
    assert_eq!(parse_tasks_per_node("1(x99999999999)"), None);
}
