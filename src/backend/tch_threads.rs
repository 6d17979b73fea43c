//! LibTorch's intra-op threads per placement. On a CUDA device LibTorch's CPU work is small
//! (filling an upload's staging tensor, scalars), but each OpenMP region wakes every intra-op
//! thread and libgomp then spins them for milliseconds: a GPU run kept 16 cores busy where
//! PyTorch's own loop keeps one. A CUDA placement therefore runs with one intra-op thread;
//! the count in force before is restored when the job ends, so a CPU placement later in the
//! same process (`trainer bench` runs several) gets every core again.

use super::DeviceSpec;

/// The intra-op threads a job on `device` runs with, given the count in force (`current`).
pub(crate) fn threads_for(device: DeviceSpec, current: i32) -> i32 {
    match device {
        DeviceSpec::Cuda(_) => 1,
        DeviceSpec::Cpu => current,
    }
}

/// Sets LibTorch's intra-op threads for a job on `device` until dropped.
pub struct IntraOpThreads {
    before: i32,
}

impl IntraOpThreads {
    pub fn for_device(device: DeviceSpec) -> Self {
        let before = tch::get_num_threads();
        let wanted = threads_for(device, before);
        if wanted != before {
            tch::set_num_threads(wanted);
        }
        Self { before }
    }
}

impl Drop for IntraOpThreads {
    fn drop(&mut self) {
        if tch::get_num_threads() != self.before {
            tch::set_num_threads(self.before);
        }
    }
}
