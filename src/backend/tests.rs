//! Devices, backends and the pairs refused.

use super::*;

#[test]
fn parses_devices() {
    assert_eq!("cpu".parse::<DeviceSpec>(), Ok(DeviceSpec::Cpu));
    assert_eq!("cuda".parse::<DeviceSpec>(), Ok(DeviceSpec::Cuda(0)));
    assert_eq!("CUDA:3".parse::<DeviceSpec>(), Ok(DeviceSpec::Cuda(3)));
    assert_eq!("gpu:2".parse::<DeviceSpec>(), Ok(DeviceSpec::Cuda(2)));
    assert!("cuda:x".parse::<DeviceSpec>().is_err());
    assert!("tpu".parse::<DeviceSpec>().is_err());
}

#[test]
fn rejects_impossible_pairs() {
    assert!(resolve(Some(BackendKind::Flex), DeviceSpec::Cuda(0)).is_err());
    let p = resolve(None, DeviceSpec::Cpu).unwrap();
    assert_eq!(p.backend, BackendKind::Flex);
}

#[test]
fn allocated_gpus_choose_the_gpu_unless_the_backend_is_cpu_only() {
    use crate::cluster::scheduler::AllocationVar;
    let alloc = [AllocationVar {
        var: "SLURM_JOB_GPUS".into(),
        value: "0".into(),
    }];
    assert_eq!(default_device(None, &alloc), DeviceSpec::Cuda(0));
    assert_eq!(
        default_device(Some(BackendKind::Cuda), &alloc),
        DeviceSpec::Cuda(0)
    );
    assert_eq!(
        default_device(Some(BackendKind::Flex), &alloc),
        DeviceSpec::Cpu
    );
    assert_eq!(default_device(None, &[]), DeviceSpec::Cpu);
}

#[test]
fn names_the_missing_feature() {
    for kind in [BackendKind::Tch, BackendKind::Cuda, BackendKind::Wgpu] {
        if !kind.compiled() {
            let dev = if kind == BackendKind::Cuda {
                DeviceSpec::Cuda(0)
            } else {
                DeviceSpec::Cpu
            };
            let err = resolve(Some(kind), dev).unwrap_err();
            assert!(format!("{err}").contains(&format!("--features {}", kind.feature())));
            assert_eq!(crate::error::exit_code_of(&err), BACKEND_UNAVAILABLE);
        }
    }
}
