//! Fuzz properties of the cluster-side readers of user input: hostlists, scheduler variables
//! (Slurm, torchrun-style, LSF, gflow, `CUDA_VISIBLE_DEVICES`) and safetensors checkpoints.
//! For every input, generated or from `tests/corpus/<parser>/`: no panic, bounded allocation,
//! and an error that names what it read (the list, a variable, the file). Case budget:
//! `TRAINER_FUZZ_CASES` (see tests/common/fuzz.rs).

#[path = "common/fuzz.rs"]
mod fuzz;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use trainer::cluster::gpu::DriverProbe;
use trainer::cluster::{Vars, diagnose, hostlist, render_env, scheduler};
use trainer::toolbox::checkpoint::Checkpoint;
use trainer::toolbox::params::HostTensor;

#[global_allocator]
static ALLOC: fuzz::Tracking = fuzz::Tracking;

type Case = Result<(), TestCaseError>;

fn runner() -> TestRunner {
    TestRunner::new(fuzz::config())
}

fn check_hostlist(list: &str) -> Case {
    let (r, largest) = fuzz::measure(|| (hostlist::expand(list), hostlist::first_host(list)));
    // Up to MAX_HOSTS names may be legitimate: 64 MiB for the name vector and its strings.
    prop_assert!(largest <= (64 << 20) + 64 * list.len(), "{largest} bytes");
    match r {
        (Ok(hosts), first) => prop_assert_eq!(first.ok().flatten(), hosts.first().cloned()),
        (Err(e), _) => prop_assert!(e.to_string().contains(&format!("{list:?}")), "{e}"),
    }
    Ok(())
}

#[test]
fn fuzz_hostlist() {
    let _serial = fuzz::serial();
    let t0 = Instant::now();
    let lists: Vec<String> = fuzz::corpus("hostlist")
        .into_iter()
        .filter(|(p, _)| p.extension().is_some_and(|x| x == "txt"))
        .flat_map(|(_, b)| {
            String::from_utf8_lossy(&b)
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    for l in &lists {
        check_hostlist(l).unwrap_or_else(|e| panic!("corpus {l:?}: {e}"));
    }
    let strategy = prop_oneof![
        "([a-z]{0,2}(\\[[0-9,\\- ]{0,7}\\]?)?[a-z0-9]{0,2}[,\\] \t]?){0,4}",
        "[\\[\\]\\-,0-9ab é\t]{0,20}",
        "[a-z]\\[0-[0-9]{5,7}\\](\\[0-[0-9]{3,5}\\])?",
    ];
    if let Err(e) = runner().run(&strategy, |l| check_hostlist(&l)) {
        panic!("{e}\n(add the minimal list to tests/corpus/hostlist/)");
    }
    fuzz::report("hostlist", lists.len(), fuzz::cases(), t0);
}

/// Every variable the schedulers read, with values good and bad.
fn vars_input() -> impl Strategy<Value = BTreeMap<String, String>> {
    let name = prop::sample::select(vec![
        "SLURM_JOB_ID",
        "SLURM_STEP_ID",
        "SLURM_PROCID",
        "SLURM_LOCALID",
        "SLURM_NODEID",
        "SLURM_NTASKS",
        "SLURM_NNODES",
        "SLURM_JOB_NUM_NODES",
        "SLURM_TASKS_PER_NODE",
        "SLURM_STEP_TASKS_PER_NODE",
        "SLURM_JOB_NODELIST",
        "SLURM_STEP_NODELIST",
        "SLURM_ARRAY_JOB_ID",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_RESTART_COUNT",
        "SLURM_JOB_GPUS",
        "SLURM_STEP_GPUS",
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "MASTER_ADDR",
        "MASTER_PORT",
        "LSB_JOBID",
        "LSB_JOBINDEX",
        "LSB_HOSTS",
        "LSB_MCPU_HOSTS",
        "LSB_DJOB_NUMPROC",
        "GFLOW_ARRAY_TASK_ID",
        "CUDA_VISIBLE_DEVICES",
        "APPTAINER_CONTAINER",
    ]);
    let value = prop::sample::select(vec![
        "0",
        "1",
        "2",
        "3",
        "-1",
        "x",
        "",
        " ",
        "4294967296",
        "65536",
        "ai[01-02]",
        "node[1-",
        "n[1-3]",
        "2(x3)",
        "2(x3",
        "1,2",
        "h1 h1 h2",
        "h1 2 h2 x",
        "GPU-abc",
        "MIG-GPU-a/1/0",
        "0,,1",
        "12345",
    ]);
    prop::collection::btree_map(name, value, 0..10).prop_map(|m| {
        m.into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    })
}

fn check_vars(map: &BTreeMap<String, String>) -> Case {
    let vars = Vars::from_pairs(map.clone());
    let (r, largest) = fuzz::measure(|| scheduler::detect(&vars));
    prop_assert!(largest <= 1 << 20, "{largest} bytes");
    match r {
        Ok(e) => {
            prop_assert!(e.rank < e.world_size && e.local_rank < e.local_world_size);
            prop_assert!(e.node_rank < e.num_nodes);
            let _ = render_env(&e);
        }
        Err(e) => {
            let text = trainer::error::chain_text(&e);
            // A variable that is set, or the one that is missing.
            let names_var = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| {
                    map.contains_key(w)
                        || (w.len() >= 4
                            && w.contains('_')
                            && w.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
                });
            prop_assert!(names_var, "error names no variable: {text}");
        }
    }
    let report = diagnose(
        &vars,
        DriverProbe::Absent { reason: "x".into() },
        None,
        false,
    );
    let _ = report.render();
    Ok(())
}

#[test]
fn fuzz_scheduler_vars() {
    let _serial = fuzz::serial();
    let t0 = Instant::now();
    let corpus = fuzz::corpus("vars");
    for (path, bytes) in &corpus {
        let map = String::from_utf8_lossy(bytes)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        check_vars(&map).unwrap_or_else(|e| panic!("corpus {}: {e}", path.display()));
    }
    if let Err(e) = runner().run(&vars_input(), |m| check_vars(&m)) {
        panic!("{e}\n(add the minimal variables to tests/corpus/vars/)");
    }
    fuzz::report("vars", corpus.len(), fuzz::cases(), t0);
}

/// A valid checkpoint, then cut, flipped, or given a header length of its choosing.
fn checkpoint_input() -> impl Strategy<Value = Vec<u8>> {
    let valid = (prop::collection::vec(0usize..5, 0..3), any::<i64>()).prop_map(|(shape, n)| {
        let mut ck = Checkpoint::default();
        let len = shape.iter().product();
        ck.floats.insert(
            "model.w".into(),
            HostTensor {
                shape,
                data: vec![0.5; len],
            },
        );
        ck.counters.insert("train.epoch".into(), n);
        ck.to_bytes().expect("serialises")
    });
    let mutation = prop_oneof![
        Just(None),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Some((0, i, b as u64))),
        any::<usize>().prop_map(|i| Some((1, i, 0))),
        prop_oneof![Just(1u64 << 40), Just(u64::MAX), 0u64..4096].prop_map(|n| Some((2, 0, n))),
    ];
    prop_oneof![
        5 => (valid, mutation).prop_map(|(mut b, m)| {
            match m {
                Some((0, i, v)) if !b.is_empty() => {
                    let i = i % b.len();
                    b[i] = v as u8;
                }
                Some((1, i, _)) => b.truncate(i % (b.len() + 1)),
                Some((2, _, n)) if b.len() >= 8 => b[..8].copy_from_slice(&n.to_le_bytes()),
                _ => {}
            }
            b
        }),
        1 => prop::collection::vec(any::<u8>(), 0..100),
    ]
}

fn check_checkpoint(bytes: &[u8]) -> Case {
    let path = Path::new("checkpoints/last.safetensors");
    let (r, largest) = fuzz::measure(|| Checkpoint::from_bytes(bytes, path));
    prop_assert!(largest <= fuzz::alloc_bound(bytes.len()), "{largest} bytes");
    if let Err(e) = r {
        prop_assert!(format!("{e:#}").contains("last.safetensors"), "{e:#}");
    }
    Ok(())
}

#[test]
fn fuzz_checkpoint() {
    let _serial = fuzz::serial();
    let t0 = Instant::now();
    let corpus = fuzz::corpus("checkpoint");
    for (path, bytes) in &corpus {
        check_checkpoint(bytes).unwrap_or_else(|e| panic!("corpus {}: {e}", path.display()));
    }
    if let Err(e) = runner().run(&checkpoint_input(), |b| check_checkpoint(&b)) {
        panic!("{e}\n(add the minimal file to tests/corpus/checkpoint/)");
    }
    fuzz::report("checkpoint", corpus.len(), fuzz::cases(), t0);
}
