//! Records the git commit the binary was built from (for run_meta.json), when git knows it; with
//! feature `tch`, compiles the LibTorch shim (`src/backend/fast_tch/shim.cpp`) against the
//! headers of the LibTorch torch-sys links.
fn main() {
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs");
    if let Ok(out) = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        && out.status.success()
    {
        let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
        if !sha.is_empty() {
            println!("cargo:rustc-env=TRAINER_GIT_COMMIT={sha}");
        }
    }
    if std::env::var_os("CARGO_FEATURE_TCH").is_some() {
        torch_shim();
    }
}

/// The shim, built the way torch-sys builds its own C++ (same standard, same C++ ABI).
fn torch_shim() {
    const SHIM: &str = "src/backend/fast_tch/shim.cpp";
    println!("cargo:rerun-if-changed={SHIM}");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    // torch-sys (`links = "tch"`) tells its dependents where LibTorch's libraries are.
    let lib = std::path::PathBuf::from(
        std::env::var("DEP_TCH_LIBTORCH_LIB").expect("torch-sys exports DEP_TCH_LIBTORCH_LIB"),
    );
    let root = lib.parent().expect("LibTorch's lib directory has a parent");
    let include = root.join("include");
    let abi = std::env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| cxx11_abi());
    let mut build = cc::Build::new();
    // CUDA graphs (`--cuda-graph`) when this LibTorch has CUDA and CUDA's runtime headers are
    // found; the shim says "no CUDA" otherwise.
    println!("cargo:rerun-if-env-changed=TRAINER_CUDA_INCLUDE");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    if let Some(site) = root.parent() {
        // Installing the headers' package (setup-torch.sh) changes this folder.
        println!("cargo:rerun-if-changed={}", site.join("nvidia").display());
    }
    if lib.join("libtorch_cuda.so").exists()
        && let Some(cuda) = cuda_include(root)
    {
        build.define("TRAINER_SHIM_CUDA", None).includes(cuda);
        // The streams' functions (torch-sys links torch_cuda, which needs it too, not this).
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
    build
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .file(SHIM)
        .compile("trainer_torch_shim");
}

/// The folders holding CUDA's runtime headers (`cuda_runtime_api.h` and the `crt/` it includes):
/// those PyTorch's wheel brings (`nvidia/cuda_runtime/include`, with `nvidia/cuda_nvcc/include`
/// beside the `torch` package), else `TRAINER_CUDA_INCLUDE`, `$CUDA_HOME/include` or
/// `/usr/local/cuda/include`.
fn cuda_include(torch: &std::path::Path) -> Option<Vec<std::path::PathBuf>> {
    let mut candidates: Vec<std::path::PathBuf> = Vec::new();
    if let Some(dir) = std::env::var_os("TRAINER_CUDA_INCLUDE") {
        candidates.push(dir.into());
    }
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        candidates.push(std::path::PathBuf::from(home).join("include"));
    }
    candidates.push("/usr/local/cuda/include".into());
    if let Some(site) = torch.parent() {
        // The runtime's headers include `crt/*.h`, which come with the compiler's package
        // (nvidia-cuda-nvcc-cu12, headers only; scripts/setup-torch.sh installs it).
        let (runtime, nvcc) = (
            site.join("nvidia/cuda_runtime/include"),
            site.join("nvidia/cuda_nvcc/include"),
        );
        if nvcc.join("crt/host_defines.h").exists() {
            return runtime
                .join("cuda_runtime_api.h")
                .exists()
                .then(|| vec![runtime, nvcc]);
        }
    }
    candidates
        .into_iter()
        .find(|d| d.join("cuda_runtime_api.h").exists() && d.join("crt/host_defines.h").exists())
        .map(|d| vec![d])
}

/// PyTorch's C++ ABI flag when LibTorch comes from a PyTorch install (as torch-sys asks it),
/// else 1 (LibTorch 2.9's own archives are built with the C++11 ABI).
fn cxx11_abi() -> String {
    if std::env::var_os("LIBTORCH_USE_PYTORCH").is_some() {
        let python = std::env::var("PYTHON_SYS_EXECUTABLE").unwrap_or("python3".into());
        if let Ok(out) = std::process::Command::new(python)
            .args([
                "-c",
                "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))",
            ])
            .output()
            && out.status.success()
        {
            let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if v == "0" || v == "1" {
                return v;
            }
        }
    }
    "1".into()
}
