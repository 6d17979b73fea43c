//! The `cuda` backend loads cubin, not PTX (`crates/cubecl-cuda/PATCH.md`): NVRTC, the one
//! PyTorch's CUDA 12.8 wheel ships (`TRAINER_NVRTC_LIB`, exported by `scripts/setup-torch.sh`),
//! compiles a kernel as CubeCL does, and `module_image` hands back an ELF cubin for a real
//! architecture (what `cuModuleLoadData` then loads without JIT) and PTX for a virtual one.
//! No GPU is needed to compile; loading the cubin is `scripts/gpu-check.sh`'s.
#![cfg(feature = "cuda")]

use std::ffi::CString;

use cudarc::nvrtc::result as nvrtc;

/// NVRTC loaded from its file, so that cudarc's `dlopen("libnvrtc.so.12")` finds it loaded.
fn nvrtc_loaded() -> libloading::Library {
    let path = std::env::var("TRAINER_NVRTC_LIB").expect(
        "TRAINER_NVRTC_LIB names libnvrtc.so.12 (eval \"$(scripts/setup-torch.sh)\" exports it)",
    );
    // SAFETY: NVRTC's initialisers have no preconditions; the handle is kept for the test.
    unsafe { libloading::Library::new(&path) }.unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Compiles a small kernel with `arch` and returns `module_image`'s bytes.
fn compile(arch: &str) -> Vec<u8> {
    let src =
        CString::new("extern \"C\" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }")
            .unwrap();
    // SAFETY: the program is created, compiled and read here, in order, and not destroyed
    // before `module_image` reads it.
    unsafe {
        let program = nvrtc::create_program(src.as_c_str(), None).expect("an NVRTC program");
        let options = [format!("--gpu-architecture={arch}")];
        nvrtc::compile_program(program, &options).expect("NVRTC compiles the kernel");
        let image = cubecl::cuda::module_image(program).expect("a module image");
        nvrtc::destroy_program(program).expect("destroyed");
        image.iter().map(|&c| c as u8).collect()
    }
}

#[test]
fn real_architectures_give_a_cubin_virtual_ones_ptx() {
    let _lib = nvrtc_loaded();
    const EM_CUDA: u16 = 190;
    // V100 (sm_70, as CubeCL asks for 7.0), A100, Ada and H100 (sm_90a: CubeCL's choice ≥ 9.0).
    for arch in ["sm_70", "sm_80", "sm_89", "sm_90a"] {
        let image = compile(arch);
        assert_eq!(
            &image[..4],
            b"\x7fELF",
            "{arch}: an ELF cubin, not PTX text"
        );
        let machine = u16::from_le_bytes([image[18], image[19]]);
        assert_eq!(machine, EM_CUDA, "{arch}: e_machine");
    }
    let ptx = compile("compute_70");
    let text = String::from_utf8_lossy(&ptx);
    assert!(
        text.contains(".target sm_70") && !ptx.starts_with(b"\x7fELF"),
        "a virtual architecture gives PTX: {}",
        &text[..text.len().min(200)]
    );
}
