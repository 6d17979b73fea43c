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
    cc::Build::new()
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
