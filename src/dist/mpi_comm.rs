//! [`Collective`] over MPI (rsmpi, any MPI-3 library; Debian's OpenMPI 4 here).

use anyhow::{Result, bail};
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::environment::Universe;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::Collective;
use super::watchdog::Guard;

pub(super) struct MpiWorld {
    // Finalises MPI when dropped, so it lives as long as the communicator.
    _universe: Universe,
    world: SimpleCommunicator,
}

impl MpiWorld {
    pub(super) fn init() -> Result<Box<dyn Collective>> {
        let Some(universe) = mpi::initialize() else {
            bail!("MPI was already initialised in this process");
        };
        let world = universe.world();
        Ok(Box::new(Self {
            _universe: universe,
            world,
        }))
    }
}

impl MpiWorld {
    /// Element-wise sum over ranks, in place (the watchdog guards the call).
    fn sum_in_place<T: mpi::datatype::Equivalence + Copy>(&self, buf: &mut [T]) -> Result<()> {
        if self.world.size() > 1 {
            let _g = Guard::enter();
            let send = buf.to_vec();
            self.world
                .all_reduce_into(&send[..], buf, SystemOperation::sum());
        }
        Ok(())
    }
}

impl Collective for MpiWorld {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn name(&self) -> &'static str {
        "mpi"
    }
    fn all_reduce_sum_f32(&self, buf: &mut [f32]) -> Result<()> {
        self.sum_in_place(buf)
    }
    fn all_reduce_sum_f64(&self, buf: &mut [f64]) -> Result<()> {
        self.sum_in_place(buf)
    }
    fn broadcast_f32(&self, buf: &mut [f32], root: usize) -> Result<()> {
        if self.size() > 1 {
            let _g = Guard::enter();
            self.world.process_at_rank(root as i32).broadcast_into(buf);
        }
        Ok(())
    }
    fn broadcast_bytes(&self, buf: &mut Vec<u8>, root: usize) -> Result<()> {
        if self.size() > 1 {
            let _g = Guard::enter();
            let mut len = [buf.len() as u64];
            self.world
                .process_at_rank(root as i32)
                .broadcast_into(&mut len[..]);
            buf.resize(len[0] as usize, 0);
            self.world
                .process_at_rank(root as i32)
                .broadcast_into(&mut buf[..]);
        }
        Ok(())
    }
}
