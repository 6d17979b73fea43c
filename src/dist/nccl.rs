//! NCCL implementation of the gradient all-reduce for GPU ranks (features `cuda` + `mpi`).
//!
//! Rank 0 creates the NCCL unique id and MPI broadcasts it; each rank then joins the NCCL
//! communicator on its own GPU. `libnccl.so` is loaded at run time by cudarc. Buffers are staged
//! through a device buffer of this module (Burn 0.21 does not expose its tensors' device
//! pointers), so the reduction itself runs on the GPUs over NVLink/InfiniBand while float
//! tensors reach it through one host copy each way. NCCL refuses two ranks on one GPU.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use cudarc::driver::{CudaContext, CudaStream};
use cudarc::nccl::safe::{Comm, Id, ReduceOp};

use super::Collective;
use super::watchdog::Guard;

pub(crate) struct NcclWorld {
    host: Box<dyn Collective>,
    stream: Arc<CudaStream>,
    comm: Comm,
}

impl NcclWorld {
    /// Joins an NCCL communicator on CUDA device `ordinal`, bootstrapped over `host` (MPI).
    pub(crate) fn init(host: Box<dyn Collective>, ordinal: usize) -> Result<Self> {
        let ctx = CudaContext::new(ordinal)
            .with_context(|| format!("cannot open CUDA device {ordinal} for NCCL"))?;
        let stream = ctx.default_stream();
        let id = if host.rank() == 0 {
            Id::new().map_err(|e| {
                anyhow::anyhow!("ncclGetUniqueId failed: {e:?} (is libnccl.so installed?)")
            })?
        } else {
            Id::uninit([0; 128])
        };
        let mut bytes: Vec<u8> = id.internal().iter().map(|c| *c as u8).collect();
        host.broadcast_bytes(&mut bytes, 0)?;
        if bytes.len() != 128 {
            bail!(
                "NCCL unique id of {} bytes received, expected 128",
                bytes.len()
            );
        }
        let mut raw = [0 as core::ffi::c_char; 128];
        for (d, s) in raw.iter_mut().zip(&bytes) {
            *d = *s as core::ffi::c_char;
        }
        let comm = {
            let _g = Guard::enter();
            Comm::from_rank(stream.clone(), host.rank(), host.size(), Id::uninit(raw))
                .map_err(|e| anyhow::anyhow!("ncclCommInitRank failed: {e:?}"))?
        };
        Ok(Self { host, stream, comm })
    }

    fn reduce<T: cudarc::nccl::NcclType + cudarc::driver::DeviceRepr + Copy>(
        &self,
        buf: &mut [T],
    ) -> Result<()> {
        let _g = Guard::enter();
        let mut dev = self.stream.clone_htod(buf).context("host to device copy")?;
        self.comm
            .all_reduce_in_place(&mut dev, &ReduceOp::Sum)
            .map_err(|e| anyhow::anyhow!("ncclAllReduce failed: {e:?}"))?;
        let back = self
            .stream
            .clone_dtoh(&dev)
            .context("device to host copy")?;
        buf.copy_from_slice(&back);
        Ok(())
    }
}

impl Collective for NcclWorld {
    fn rank(&self) -> usize {
        self.host.rank()
    }
    fn size(&self) -> usize {
        self.host.size()
    }
    fn name(&self) -> &'static str {
        "nccl"
    }
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<()> {
        self.reduce(buf)
    }
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<()> {
        self.reduce(buf)
    }
    fn broadcast_f32(&self, buf: &mut [f32], root: usize) -> Result<()> {
        self.host.broadcast_f32(buf, root)
    }
    fn broadcast_bytes(&self, buf: &mut Vec<u8>, root: usize) -> Result<()> {
        self.host.broadcast_bytes(buf, root)
    }
}

/// One rank's NCCL all-reduce on CUDA device `ordinal`, without MPI: the unique id, the
/// communicator, a device buffer and `ncclAllReduce` all run, so a GPU node's NCCL is checked
/// before a multi-rank job depends on it (`TRAINER_CHECK_NCCL=1 trainer doctor`).
pub(crate) fn self_test(ordinal: usize) -> Result<String> {
    let world = NcclWorld::init(Box::new(super::Single), ordinal)?;
    let mut buf = vec![1.0f32, 2.0, 3.0];
    world.all_reduce_sum_f32(&mut buf)?;
    if buf != [1.0, 2.0, 3.0] {
        bail!("ncclAllReduce over one rank changed [1, 2, 3] into {buf:?}");
    }
    Ok(format!(
        "ncclAllReduce on cuda:{ordinal} (1 rank) returned {buf:?}"
    ))
}
