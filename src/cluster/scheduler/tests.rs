//! Scheduler environments built from variable maps, edge cases included: Slurm and MIG here,
//! torchrun, LSF, gflow and a local run in `launcher_tests.rs`.

use super::*;
use crate::cluster::visible_devices::VisibleForm;

fn vars(pairs: &[(&str, &str)]) -> Vars {
    Vars::from_pairs(pairs.iter().copied())
}

pub(super) fn ok(pairs: &[(&str, &str)]) -> ClusterEnv {
    detect(&vars(pairs)).unwrap_or_else(|e| panic!("{e}"))
}

pub(super) fn err(pairs: &[(&str, &str)]) -> String {
    match detect(&vars(pairs)) {
        Ok(env) => panic!("expected an error, got {env:?}"),
        Err(e) => e.to_string(),
    }
}

/// What rank 1 of `srun -N2 -n4 --gres=gpu:2` on `ai[01-02]` sees.
const SRUN_STEP: &[(&str, &str)] = &[
    ("SLURM_JOB_ID", "123456"),
    ("SLURM_STEP_ID", "0"),
    ("SLURM_PROCID", "3"),
    ("SLURM_LOCALID", "1"),
    ("SLURM_NODEID", "1"),
    ("SLURM_NTASKS", "4"),
    ("SLURM_NNODES", "2"),
    ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
    ("SLURM_JOB_NODELIST", "ai[01-02]"),
    ("SLURM_STEP_NODELIST", "ai[01-02]"),
    ("SLURM_JOB_PARTITION", "q_ai4"),
    ("CUDA_VISIBLE_DEVICES", "0,1"),
    ("SLURM_STEP_GPUS", "2,3"),
];

#[test]
fn slurm_srun_step() {
    let e = ok(SRUN_STEP);
    assert_eq!(e.scheduler, SchedulerKind::Slurm);
    assert_eq!(e.mode, "srun step");
    assert_eq!(
        (
            e.rank,
            e.world_size,
            e.local_rank,
            e.local_world_size,
            e.node_rank,
            e.num_nodes
        ),
        (3, 4, 1, 2, 1, 2)
    );
    assert_eq!(e.main_address, "ai01");
    assert_eq!(e.hosts, ["ai01", "ai02"]);
    assert_eq!(e.main_port, PORT_BASE + 3456);
    assert_eq!(e.job_id.as_deref(), Some("123456"));
    assert_eq!(e.partition.as_deref(), Some("q_ai4"));
    let d = e.device.clone().expect("a GPU");
    assert_eq!((d.cuda_ordinal, d.visible_entry.as_deref()), (1, Some("1")));
    assert!(e.gpu_allocation.iter().any(|a| a.var == "SLURM_STEP_GPUS"));
    assert!(!e.is_main_process());
}

#[test]
fn every_rank_derives_the_same_port_and_address() {
    let mut ports = Vec::new();
    for (rank, local, node) in [
        ("0", "0", "0"),
        ("1", "1", "0"),
        ("2", "0", "1"),
        ("3", "1", "1"),
    ] {
        let mut v: Vec<(&str, &str)> = SRUN_STEP.to_vec();
        v.retain(|(k, _)| !matches!(*k, "SLURM_PROCID" | "SLURM_LOCALID" | "SLURM_NODEID"));
        v.extend([
            ("SLURM_PROCID", rank),
            ("SLURM_LOCALID", local),
            ("SLURM_NODEID", node),
        ]);
        let e = ok(&v);
        ports.push((e.main_address, e.main_port));
    }
    assert!(ports.windows(2).all(|w| w[0] == w[1]), "{ports:?}");
}

#[test]
fn slurm_batch_script_is_one_rank() {
    // As seen in a real `sbatch -n 2 --gres=gpu:2` script.
    let e = ok(&[
        ("SLURM_JOB_ID", "5"),
        ("SLURM_JOBID", "5"),
        ("ENVIRONMENT", "BATCH"),
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_JOB_NODELIST", "vm"),
        ("SLURM_JOB_GPUS", "0,1"),
        ("CUDA_VISIBLE_DEVICES", "0,1"),
        ("SLURM_GPUS_ON_NODE", "2"),
    ]);
    assert_eq!(e.mode, "batch script");
    assert_eq!((e.rank, e.world_size), (0, 1));
    assert_eq!(e.main_address, "vm");
    assert!(e.notes.iter().any(|n| n.contains("srun")), "{:?}", e.notes);
}

#[test]
fn slurm_salloc_without_a_step_is_not_multi_rank() {
    // As seen in a real `salloc -n2 --gres=gpu:1` shell: no SLURM_PROCID, no SLURM_STEP_ID.
    let e = ok(&[
        ("SLURM_JOB_ID", "6"),
        ("SLURM_JOB_NODELIST", "vm"),
        ("SLURM_NNODES", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_TASKS_PER_NODE", "2"),
    ]);
    assert_eq!(e.mode, "salloc shell (no srun step)");
    assert_eq!((e.rank, e.world_size, e.local_world_size), (0, 1, 1));
    assert!(e.notes.iter().any(|n| n.contains("srun trainer")));
}

#[test]
fn slurm_missing_procid_in_a_step_is_named() {
    let mut v: Vec<(&str, &str)> = SRUN_STEP.to_vec();
    v.retain(|(k, _)| *k != "SLURM_PROCID");
    let msg = err(&v);
    assert!(msg.contains("SLURM_PROCID"), "{msg}");
}

#[test]
fn slurm_contradictions_are_named() {
    let mut v: Vec<(&str, &str)> = SRUN_STEP.to_vec();
    v.retain(|(k, _)| *k != "SLURM_PROCID");
    v.push(("SLURM_PROCID", "4"));
    let msg = err(&v);
    assert!(
        msg.contains("SLURM_PROCID=4") && msg.contains("SLURM_NTASKS=4"),
        "{msg}"
    );

    let mut v: Vec<(&str, &str)> = SRUN_STEP.to_vec();
    v.retain(|(k, _)| *k != "SLURM_STEP_NODELIST");
    v.push(("SLURM_STEP_NODELIST", "ai[01-03]"));
    let msg = err(&v);
    assert!(
        msg.contains("SLURM_STEP_NODELIST") && msg.contains("SLURM_NNODES"),
        "{msg}"
    );

    let msg = err(&[("SLURM_JOB_ID", "1"), ("SLURM_JOBID", "2")]);
    assert!(
        msg.contains("SLURM_JOB_ID") && msg.contains("SLURM_JOBID"),
        "{msg}"
    );

    let mut v: Vec<(&str, &str)> = SRUN_STEP.to_vec();
    v.retain(|(k, _)| *k != "SLURM_STEP_TASKS_PER_NODE");
    v.push(("SLURM_STEP_TASKS_PER_NODE", "2(x"));
    let msg = err(&v);
    assert!(msg.contains("SLURM_STEP_TASKS_PER_NODE"), "{msg}");

    let msg = err(&[("SLURM_JOB_ID", "1"), ("SLURM_JOB_NODELIST", "n[3-1]")]);
    assert!(msg.contains("SLURM_JOB_NODELIST"), "{msg}");
}

#[test]
fn slurm_multi_range_hostlists() {
    let e = ok(&[
        ("SLURM_JOB_ID", "77"),
        ("SLURM_STEP_ID", "0"),
        ("SLURM_PROCID", "0"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_NODEID", "0"),
        ("SLURM_NTASKS", "5"),
        ("SLURM_NNODES", "5"),
        ("SLURM_STEP_NODELIST", "gpu1,gpu[3-5,7]"),
    ]);
    assert_eq!(e.hosts, ["gpu1", "gpu3", "gpu4", "gpu5", "gpu7"]);
    assert_eq!(e.main_address, "gpu1");
    assert_eq!(e.local_world_size, 1);
    let e = ok(&[
        ("SLURM_JOB_ID", "78"),
        ("SLURM_JOB_NODELIST", "ai[01-02],gpu[10-11]"),
    ]);
    assert_eq!(e.hosts, ["ai01", "ai02", "gpu10", "gpu11"]);
    assert_eq!(e.main_address, "ai01");
}

#[test]
fn slurm_array_task_and_restart() {
    let e = ok(&[
        ("SLURM_JOB_ID", "8"),
        ("SLURM_ARRAY_JOB_ID", "7"),
        ("SLURM_ARRAY_TASK_ID", "3"),
        ("SLURM_RESTART_COUNT", "2"),
        ("SLURM_JOB_NODELIST", "vm"),
    ]);
    assert_eq!(e.job_id.as_deref(), Some("8"));
    assert_eq!(e.array_job_id.as_deref(), Some("7"));
    assert_eq!(e.array_task_id, Some(3));
    assert_eq!(e.restart_count, Some(2));
    assert_eq!(e.main_port, PORT_BASE + 8);
    let msg = err(&[("SLURM_JOB_ID", "8"), ("SLURM_ARRAY_TASK_ID", "3")]);
    assert!(msg.contains("SLURM_ARRAY_JOB_ID"), "{msg}");
    let msg = err(&[("SLURM_JOB_ID", "8"), ("SLURM_RESTART_COUNT", "many")]);
    assert!(msg.contains("SLURM_RESTART_COUNT"), "{msg}");
}

#[test]
fn slurm_gpus_per_task_gives_each_rank_its_single_gpu() {
    let mut v: Vec<(&str, &str)> = SRUN_STEP.to_vec();
    v.retain(|(k, _)| *k != "CUDA_VISIBLE_DEVICES");
    v.push(("CUDA_VISIBLE_DEVICES", "3"));
    let d = ok(&v).device.expect("a GPU");
    assert_eq!((d.cuda_ordinal, d.visible_entry.as_deref()), (0, Some("3")));
}

#[test]
fn mig_and_gpu_uuids_in_cuda_visible_devices() {
    let e = ok(&[
        ("LSB_JOBID", "4242"),
        (
            "CUDA_VISIBLE_DEVICES",
            "MIG-5c3a6f1e-1111-2222-3333-444455556666",
        ),
    ]);
    assert_eq!(e.visible_devices.form, VisibleForm::MigUuids);
    assert_eq!(
        e.device.and_then(|d| d.visible_entry).as_deref(),
        Some("MIG-5c3a6f1e-1111-2222-3333-444455556666")
    );
    let e = ok(&[
        ("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb"),
        ("MASTER_PORT", "1234"),
    ]);
    assert_eq!(e.visible_devices.form, VisibleForm::GpuUuids);
    assert_eq!(e.scheduler, SchedulerKind::Local);
    assert_eq!(e.main_port, 1234);
    let e = ok(&[(
        "CUDA_VISIBLE_DEVICES",
        "MIG-GPU-8f1c2d3e-0000-1111-2222-333344445555/1/0",
    )]);
    assert_eq!(e.visible_devices.form, VisibleForm::MigUuids);
}

/// `--requeue`: a Slurm job (also under torchrun inside it) is requeued with `scontrol requeue`;
/// an LSF job, a gflow job and a run outside any scheduler have no requeue command.
#[test]
fn requeue_comes_from_the_scheduler_that_runs_the_job() {
    let slurm = requeue_for(&vars(SRUN_STEP), "123456_7").expect("Slurm requeues");
    assert_eq!(slurm.scheduler, "Slurm");
    assert_eq!(
        (slurm.program, &slurm.args[..]),
        ("scontrol", &["requeue".to_string(), "123456_7".into()][..])
    );
    assert_eq!(slurm.job, "123456_7");
    let torchrun_in_slurm = [
        ("SLURM_JOB_ID", "77"),
        ("TORCHELASTIC_RUN_ID", "none"),
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("LOCAL_RANK", "0"),
    ];
    assert_eq!(
        requeue_for(&vars(&torchrun_in_slurm), "77").map(|r| (r.program, r.args)),
        Some(("scontrol", vec!["requeue".to_string(), "77".into()]))
    );
    assert_eq!(requeue_for(&vars(&[("LSB_JOBID", "4242")]), "4242"), None);
    assert_eq!(
        requeue_for(&vars(&[("GFLOW_ARRAY_TASK_ID", "1")]), "1"),
        None
    );
    assert_eq!(requeue_for(&vars(&[]), "1"), None);
}

/// One enum for both sides: every kind resolves to its scheduler, detection runs in
/// [`schedulers`] order, and a sweep is written for every kind but torchrun (a launcher
/// without jobs), which `--scheduler` does not offer and `sweep.json` cannot name.
#[test]
fn one_enum_names_every_scheduler_and_a_sweep_refuses_torchrun() {
    use clap::ValueEnum;
    let order: Vec<SchedulerKind> = schedulers().iter().map(|s| s.kind()).collect();
    assert_eq!(
        order,
        [
            SchedulerKind::Torchrun,
            SchedulerKind::Slurm,
            SchedulerKind::Lsf,
            SchedulerKind::Gflow,
            SchedulerKind::Local,
        ]
    );
    for kind in order {
        assert_eq!(kind.get().kind(), kind);
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{kind}\""));
        let back = serde_json::from_str::<SchedulerKind>(&json);
        assert_eq!(back.is_ok(), kind != SchedulerKind::Torchrun, "{json}");
    }
    let offered: Vec<String> = SchedulerKind::value_variants()
        .iter()
        .filter_map(|k| k.to_possible_value().map(|v| v.get_name().to_string()))
        .collect();
    assert_eq!(offered, ["slurm", "lsf", "gflow", "local"]);
    let r = resources::Resources::default();
    let dir = std::path::Path::new("/s");
    let arrays = [array::Array {
        tasks: vec![0],
        offset: 0,
        chained: false,
    }];
    let s = array::Submission {
        dir,
        command: "train-gnn",
        spec: std::path::Path::new("s.toml"),
        throttle: 0,
        resources: &r,
        arrays: &arrays,
        which: "all",
        name: "s",
    };
    assert!(SchedulerKind::Torchrun.get().scripts(&s).is_none());
    for kind in [
        SchedulerKind::Slurm,
        SchedulerKind::Lsf,
        SchedulerKind::Gflow,
        SchedulerKind::Local,
    ] {
        let (files, submit) = kind.get().scripts(&s).expect("a sweep's scheduler");
        assert!(!files.is_empty() && !submit.is_empty(), "{kind}");
    }
}

/// The GPU variables of every scheduler, then `CUDA_VISIBLE_DEVICES` inside a job only.
#[test]
fn gpu_allocation_lists_each_schedulers_variables() {
    let names = |pairs: &[(&str, &str)]| -> Vec<String> {
        gpu_allocation(&vars(pairs))
            .into_iter()
            .map(|a| a.var)
            .collect()
    };
    assert_eq!(
        names(&[
            ("SLURM_JOB_ID", "1"),
            ("SLURM_JOB_GPUS", "0,1"),
            ("SLURM_GPUS_ON_NODE", "2"),
            ("CUDA_VISIBLE_DEVICES", "0,1"),
        ]),
        [
            "SLURM_JOB_GPUS",
            "SLURM_GPUS_ON_NODE",
            "CUDA_VISIBLE_DEVICES"
        ]
    );
    assert_eq!(
        names(&[("SLURM_JOB_ID", "1"), ("SLURM_GPUS_ON_NODE", "0")]),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&[
            ("LSB_JOBID", "7"),
            ("LSB_GPU_ALLOC_INFO", "x"),
            ("CUDA_VISIBLE_DEVICES", "3")
        ]),
        ["LSB_GPU_ALLOC_INFO", "CUDA_VISIBLE_DEVICES"]
    );
    assert_eq!(
        names(&[("CUDA_VISIBLE_DEVICES", "0")]),
        Vec::<String>::new()
    );
}
