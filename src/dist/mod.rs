//! Data-parallel communication between ranks: one small [`Collective`] interface, a
//! single-process implementation, and MPI (cargo feature `mpi`) for several processes launched
//! by `srun --mpi=pmix` or `mpirun`. Gradients travel through host memory, which works for every
//! backend; `nccl` (features `cuda` + `mpi`) is the GPU-side implementation of the same
//! interface. A [`watchdog`] makes every rank exit when a peer dies instead of hanging.

use anyhow::Result;

#[cfg(feature = "mpi")]
mod mpi_comm;
#[cfg(all(feature = "mpi", feature = "cuda"))]
pub(crate) mod nccl;
pub(crate) mod watchdog;

/// Collective operations over all ranks of the job.
pub(crate) trait Collective {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Short name for logs and run metadata (`single`, `mpi`, `nccl`).
    fn name(&self) -> &'static str;
    /// Element-wise sum over ranks, in place.
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<()>;
    /// Element-wise sum over ranks, in place.
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<()>;
    /// Copies `root`'s buffer into every rank's buffer (same length everywhere).
    fn broadcast_f32(&self, buf: &mut [f32], root: usize) -> Result<()>;
    /// Copies `root`'s bytes to every rank (lengths may differ before the call).
    fn broadcast_bytes(&self, buf: &mut Vec<u8>, root: usize) -> Result<()>;
}

/// A world of one process: every collective is the identity.
pub(crate) struct Single;

impl Collective for Single {
    fn rank(&self) -> usize {
        0
    }
    fn size(&self) -> usize {
        1
    }
    fn name(&self) -> &'static str {
        "single"
    }
    fn all_reduce_sum_f32(&self, _buf: &mut [f32]) -> Result<()> {
        Ok(())
    }
    fn all_reduce_sum_f64(&self, _buf: &mut [f64]) -> Result<()> {
        Ok(())
    }
    fn broadcast_f32(&self, _buf: &mut [f32], _root: usize) -> Result<()> {
        Ok(())
    }
    fn broadcast_bytes(&self, _buf: &mut Vec<u8>, _root: usize) -> Result<()> {
        Ok(())
    }
}

/// One rank's NCCL all-reduce on CUDA device `ordinal` ([`nccl::self_test`]).
#[cfg(all(feature = "mpi", feature = "cuda"))]
pub(crate) fn nccl_self_test(ordinal: usize) -> Result<String> {
    nccl::self_test(ordinal)
}

/// One rank's NCCL all-reduce: an error in builds without the `cuda` and `mpi` features.
#[cfg(not(all(feature = "mpi", feature = "cuda")))]
pub(crate) fn nccl_self_test(_ordinal: usize) -> Result<String> {
    anyhow::bail!("this binary has no NCCL all-reduce: build it with --features cuda,mpi")
}

/// Whether this binary can run several ranks.
pub(crate) const MPI_BUILT: bool = cfg!(feature = "mpi");

/// The world of this process: MPI when built with it and started by an MPI launcher (or by a
/// scheduler that says it started several ranks), else [`Single`]. Cross-checks the scheduler's
/// view of ranks: a multi-rank launch (an `srun -n 2` step, torchrun-style variables) needs a
/// matching MPI world.
///
/// A process started without a launcher does not initialise MPI: it would be a world of one
/// (an MPI "singleton"), and Open MPI 4 starts a daemon for it and creates a session directory
/// under `/tmp` shared by every job of the user on the node, which two processes starting at once
/// race to create (`mkdir … File exists`, `orte_init failed`; open-mpi/ompi#8510): a job array's
/// or a test suite's single runs would fail at random.
pub(crate) fn init(env: &crate::cluster::ClusterEnv) -> Result<Box<dyn Collective>> {
    let launcher = launcher_var();
    #[cfg(feature = "mpi")]
    let comm: Box<dyn Collective> = if launcher.is_some() || env.world_size > 1 {
        mpi_comm::MpiWorld::init()?
    } else {
        Box::new(Single)
    };
    #[cfg(not(feature = "mpi"))]
    let comm: Box<dyn Collective> = {
        // Without MPI every process would train alone and all of them would write the same run
        // directory.
        if let Some((var, ranks)) = launcher.filter(|(_, ranks)| ranks.is_some_and(|n| n > 1)) {
            anyhow::bail!(
                "launched as one of {} MPI ranks ({var} is set) but this binary was built \
                 without MPI: rebuild with `cargo build --release --features mpi`",
                ranks.unwrap_or_default()
            );
        }
        Box::new(Single)
    };
    check_world(
        comm.rank(),
        comm.size(),
        env.rank as usize,
        env.world_size as usize,
        &env.mode,
    )?;
    if comm.size() > 1 {
        watchdog::start_global();
    }
    Ok(comm)
}

/// The variables MPI launchers set in the processes they start: Open MPI's `mpirun`, PMIx
/// (`srun --mpi=pmix`, Open MPI 4/5), PMI-1/2 (MPICH's and Intel MPI's Hydra, `srun --mpi=pmi2`),
/// MVAPICH. Those that hold the number of ranks come first.
const LAUNCHER_VARS: [&str; 8] = [
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_SIZE",
    "MPI_LOCALNRANKS",
    "MV2_COMM_WORLD_SIZE",
    "PMIX_RANK",
    "PMI_RANK",
    "PMI_FD",
];

/// The first launcher variable set in this process, and the number of ranks it holds if it
/// holds one; `None` when no MPI launcher started the process.
fn launcher_var() -> Option<(&'static str, Option<usize>)> {
    LAUNCHER_VARS.iter().find_map(|&var| {
        let value = std::env::var(var).ok()?;
        let ranks = var.ends_with("SIZE") || var.ends_with("NRANKS");
        Some((var, ranks.then(|| value.trim().parse().ok()).flatten()))
    })
}

/// Rank/size agreement between the communicator and the scheduler environment.
pub(crate) fn check_world(
    rank: usize,
    size: usize,
    env_rank: usize,
    env_size: usize,
    mode: &str,
) -> Result<()> {
    if env_size > 1 && size == 1 {
        anyhow::bail!(
            "the scheduler launched {env_size} ranks ({mode}) but this process is not part of an \
             MPI world of that size{}: launch with `srun --mpi=pmix` (or set SLURM_MPI_TYPE=pmix) \
             or `mpirun -n {env_size}`",
            if MPI_BUILT {
                ""
            } else {
                " (this binary was built without MPI: rebuild with --features mpi)"
            }
        );
    }
    if env_size > 1 && (env_size != size || env_rank != rank) {
        anyhow::bail!(
            "MPI says rank {rank} of {size}, the scheduler ({mode}) says rank {env_rank} of \
             {env_size}: launch one MPI process per scheduler task (`srun --mpi=pmix`)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_checks() {
        assert!(check_world(0, 1, 0, 1, "local").is_ok());
        assert!(
            check_world(1, 2, 0, 1, "local").is_ok(),
            "mpirun without scheduler ranks"
        );
        assert!(check_world(1, 2, 1, 2, "srun step").is_ok());
        let e = check_world(0, 1, 0, 2, "srun step")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mpi=pmix"), "{e}");
        assert!(check_world(0, 2, 1, 2, "srun step").is_err());
        assert!(check_world(0, 2, 0, 4, "srun step").is_err());
    }
}
