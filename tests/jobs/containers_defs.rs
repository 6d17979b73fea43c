//! The container definitions that cannot be built here (NVIDIA's CUDA images and the Rust and
//! Debian images of Docker Hub are not reachable from this machine), checked as far as it allows:
//! each Apptainer file is split into stages and sections, its `{{ build args }}` are resolved
//! from %arguments, the shell of every %post/%test/%runscript/%environment passes `bash -n`, the
//! base images and versions are the deliberate ones (CUDA 12.8 ↔ CUDARC_CUDA_VERSION=12080,
//! PyTorch 2.9.0), and the Dockerfile's stages, ARGs and RUN steps (`sh -n`) match trainer.def.
//! containers/trainer-cpu.def is also built for real by tests/jobs/containers_apptainer.rs.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("containers")
}

fn read(f: &str) -> String {
    std::fs::read_to_string(dir().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"))
}

#[derive(Debug, Default)]
struct Stage {
    header: BTreeMap<String, String>,
    sections: BTreeMap<String, String>,
}

const SECTIONS: &[&str] = &[
    "%arguments",
    "%files",
    "%post",
    "%environment",
    "%runscript",
    "%test",
    "%labels",
    "%help",
    "%setup",
    "%startscript",
];

/// Splits an Apptainer definition into stages (a header block starts each), after replacing
/// `{{ NAME }}` with the %arguments defaults (panics on an undefined one).
fn parse_def(raw: &str) -> Vec<Stage> {
    // %arguments defaults (from any stage).
    let mut args = BTreeMap::new();
    let mut in_args = false;
    for l in raw.lines() {
        let tl = l.trim();
        if tl.starts_with('%') {
            in_args = tl == "%arguments";
            continue;
        }
        if in_args && !tl.is_empty() && !tl.starts_with('#') {
            let (k, v) = tl.split_once('=').expect("NAME=value in %arguments");
            args.insert(k.trim().to_string(), v.trim().to_string());
        }
    }
    let mut text = raw.to_string();
    while let Some(i) = text.find("{{") {
        let j = text[i..].find("}}").expect("unclosed {{") + i;
        let name = text[i + 2..j].trim().to_string();
        let v = args
            .get(&name)
            .unwrap_or_else(|| panic!("{{{{ {name} }}}} has no default in %arguments"));
        text.replace_range(i..j + 2, v);
    }
    let mut stages: Vec<Stage> = vec![];
    let mut section: Option<String> = None;
    for l in text.lines() {
        let tl = l.trim_end();
        if tl.starts_with("Bootstrap:") {
            stages.push(Stage::default());
            section = None;
        }
        if tl.starts_with('%') {
            let name = tl.split_whitespace().next().unwrap().to_string();
            assert!(SECTIONS.contains(&name.as_str()), "unknown section {name}");
            let key = tl.to_string();
            stages
                .last_mut()
                .expect("section before Bootstrap")
                .sections
                .insert(key.clone(), String::new());
            section = Some(key);
            continue;
        }
        match &section {
            None => {
                if tl.is_empty() || tl.starts_with('#') {
                    continue;
                }
                let (k, v) = tl
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad header line `{tl}`"));
                stages
                    .last_mut()
                    .unwrap()
                    .header
                    .insert(k.trim().into(), v.trim().into());
            }
            Some(s) => {
                let body = stages.last_mut().unwrap().sections.get_mut(s).unwrap();
                body.push_str(l);
                body.push('\n');
            }
        }
    }
    stages
}

fn shell_ok(shell: &str, script: &str) {
    let mut c = Command::new(shell)
        .arg("-n")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    c.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{shell} -n failed:\n{script}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn check_scripts(stages: &[Stage]) {
    for s in stages {
        for (name, body) in &s.sections {
            if ["%post", "%test", "%runscript", "%environment", "%setup"]
                .iter()
                .any(|x| name.starts_with(x))
            {
                shell_ok("bash", body);
            }
        }
    }
}

fn cargo_config_cuda() -> String {
    let c = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".cargo/config.toml"),
    )
    .unwrap();
    c.lines()
        .find_map(|l| l.strip_prefix("CUDARC_CUDA_VERSION = "))
        .unwrap()
        .trim_matches('"')
        .to_string()
}

fn cargo_features() -> String {
    std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap()
}

/// `rust:1.95-bookworm` → (1, 95): new enough for the crate (edition 2024, let chains).
fn rust_image_ok(image: &str) {
    let v = image
        .strip_prefix("rust:")
        .unwrap()
        .split('-')
        .next()
        .unwrap();
    let mut it = v.split('.').map(|x| x.parse::<u32>().unwrap());
    let (maj, min) = (it.next().unwrap(), it.next().unwrap());
    assert!(
        maj == 1 && min >= 88,
        "{image}: too old for edition 2024 let chains"
    );
    assert!(
        image.ends_with("-bookworm"),
        "{image}: build on Debian 12 (glibc 2.36)"
    );
}

fn section<'a>(s: &'a Stage, name: &str) -> &'a str {
    s.sections
        .iter()
        .find(|(k, _)| k.as_str() == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {:?}", s.sections.keys()))
}

#[test]
fn cpu_def_is_bookworm_with_runscript_test_labels_help() {
    let st = parse_def(&read("trainer-cpu.def"));
    assert_eq!(st.len(), 1);
    let s = &st[0];
    assert_eq!(s.header["Bootstrap"], "debootstrap");
    assert_eq!(s.header["OSVersion"], "bookworm");
    assert!(section(s, "%runscript").contains("trainer \"$@\""));
    assert!(section(s, "%test").contains("trainer doctor"));
    assert!(section(s, "%labels").contains("org.opencontainers.image.version 0.1.0"));
    assert!(section(s, "%help").contains("trainer 0.1.0"));
    assert!(section(s, "%files").contains("target/release/trainer /usr/local/bin/trainer"));
    check_scripts(&st);
}

/// The GPU image (scripts/build-gpu-image.sh builds it for real; CI runs its `--check-only`
/// against the features binary): Debian only, the host's tch + cuda + mpi binary, LibTorch and the
/// wheel's NVIDIA libraries at LibTorch's relative RPATH places, NVRTC and NCCL on the path.
#[test]
fn gpu_def_is_bookworm_with_libtorch_and_the_wheels_nvidia_libraries() {
    let raw = read("trainer-gpu.def");
    let st = parse_def(&raw);
    assert_eq!(st.len(), 1, "one stage: nothing is compiled inside");
    let s = &st[0];
    assert_eq!(s.header["Bootstrap"], "debootstrap");
    assert_eq!(s.header["OSVersion"], "bookworm");
    assert!(!raw.contains("Bootstrap: docker"), "no registry image");
    let files = section(s, "%files");
    for want in [
        "target/features/release/trainer /usr/local/bin/trainer",
        "/torch/lib /opt/torch/torch/lib",
        "/nvidia /opt/torch/nvidia",
    ] {
        assert!(files.contains(want), "%files lacks {want}:\n{files}");
    }
    let env = section(s, "%environment");
    for dir in [
        "/opt/torch/torch/lib",
        "/opt/torch/nvidia/cuda_nvrtc/lib",
        "/opt/torch/nvidia/nccl/lib",
    ] {
        assert!(env.contains(dir), "%environment lacks {dir}:\n{env}");
    }
    // Keeps the driver directory `--nv` puts on the path.
    assert!(
        env.contains("${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"),
        "{env}"
    );
    let post = section(s, "%post");
    // cudarc opens `libnccl.so`; the wheel has `.so.2` only.
    assert!(post.contains("ln -sf libnccl.so.2 /opt/torch/nvidia/nccl/lib/libnccl.so"));
    assert!(
        post.contains("libtorch_cuda.so => /opt/torch/torch/lib/"),
        "{post}"
    );
    assert!(post.contains("libopenmpi3"), "{post}");
    assert!(section(s, "%runscript").contains("trainer \"$@\""));
    assert!(section(s, "%test").contains("trainer doctor"));
    assert!(section(s, "%labels").contains("org.opencontainers.image.version 0.1.0"));
    for want in ["sm_70", "sm_120", "R525", "R570", "exit 14"] {
        assert!(raw.contains(want), "trainer-gpu.def does not state {want}");
    }
    check_scripts(&st);
}

#[test]
fn cuda_def_builds_with_cuda_12_8_and_copies_only_the_binary() {
    let raw = read("trainer.def");
    let st = parse_def(&raw);
    assert_eq!(st.len(), 2, "build stage + final stage");
    let (build, fin) = (&st[0], &st[1]);
    assert_eq!(build.header["Stage"], "build");
    assert_eq!(fin.header["Stage"], "final");
    assert_eq!(build.header["Bootstrap"], "docker");
    rust_image_ok(&build.header["From"]);
    // The base: an NVIDIA CUDA *runtime* image (it has NVRTC), CUDA 12.x, and the cudarc pin
    // of .cargo/config.toml must agree with it.
    let from = &fin.header["From"];
    assert_eq!(from, "nvidia/cuda:12.8.1-runtime-ubuntu24.04");
    let pin = cargo_config_cuda();
    assert_eq!(pin, "12080");
    assert!(raw.contains("CUDARC_CUDA_VERSION=12080"));
    let post = section(build, "%post");
    assert!(
        post.contains("cargo build --release --locked --features \"cuda\""),
        "{post}"
    );
    assert!(post.contains("CUDARC_CUDA_VERSION=12080"), "{post}");
    // The workspace's crates (crates/fast-cpu) and the patched cubecl-cuda go into the build.
    assert!(
        section(build, "%files").contains("crates /src/crates"),
        "{}",
        section(build, "%files")
    );
    assert!(
        section(fin, "%files from build")
            .contains("/src/target/release/trainer /usr/local/bin/trainer")
    );
    assert!(section(fin, "%runscript").contains("trainer \"$@\""));
    assert!(section(fin, "%test").contains("trainer doctor"));
    assert!(section(fin, "%labels").contains("org.opencontainers.image.version"));
    // The documented choices: minimum driver, the 11.8 alternative, V100.
    for want in ["R525", "R570", "11080", "11.8.0", "7.0", "Volta"] {
        assert!(raw.contains(want), "trainer.def does not mention {want}");
    }
    assert!(cargo_features().contains("\ncuda = ") && cargo_features().contains("\nmpi = "));
    check_scripts(&st);
}

#[test]
fn torch_def_uses_pytorch_2_9_with_libtorch_use_pytorch() {
    let raw = read("trainer-torch.def");
    let st = parse_def(&raw);
    assert_eq!(st.len(), 2);
    let (build, fin) = (&st[0], &st[1]);
    rust_image_ok(&build.header["From"]);
    assert_eq!(fin.header["From"], "debian:bookworm-slim");
    let post = section(build, "%post");
    assert!(post.contains("torch==2.9.0"), "{post}");
    assert!(post.contains("LIBTORCH_USE_PYTORCH=1"), "{post}");
    assert!(
        post.contains("cargo build --release --locked --features tch"),
        "{post}"
    );
    let env = section(fin, "%environment");
    assert!(env.contains("LIBTORCH_USE_PYTORCH=1"));
    // Debian 12's python is 3.11: the venv's torch/lib is there.
    assert!(env.contains("LD_LIBRARY_PATH=/opt/torch/lib/python3.11/site-packages/torch/lib"));
    assert!(section(fin, "%files from build").contains("/opt/torch /opt/torch"));
    assert!(section(fin, "%test").contains("trainer doctor"));
    assert!(cargo_features().contains("\ntch = "));
    check_scripts(&st);
}

#[test]
fn dockerfile_matches_the_cuda_def() {
    let raw = read("Dockerfile");
    // Join continuation lines, drop comments.
    let mut instrs: Vec<String> = vec![];
    let mut cur = String::new();
    for l in raw.lines() {
        let t = l.trim();
        if cur.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        if let Some(x) = t.strip_suffix('\\') {
            cur.push_str(x);
            cur.push(' ');
        } else {
            cur.push_str(t);
            instrs.push(std::mem::take(&mut cur));
        }
    }
    let mut args: BTreeMap<String, String> = BTreeMap::new();
    let mut froms = vec![];
    for i in &instrs {
        let (op, rest) = i.split_once(' ').unwrap_or((i, ""));
        match op {
            "ARG" => {
                if let Some((k, v)) = rest.split_once('=') {
                    args.insert(k.into(), v.into());
                }
            }
            "FROM" => {
                let mut s = rest.to_string();
                for (k, v) in &args {
                    s = s.replace(&format!("${{{k}}}"), v);
                }
                froms.push(s);
            }
            "RUN" => {
                let mut s = rest.to_string();
                for (k, v) in &args {
                    s = s.replace(&format!("${{{k}}}"), v);
                }
                shell_ok("sh", &s);
            }
            "WORKDIR" | "COPY" | "ENV" | "LABEL" | "ENTRYPOINT" | "CMD" | "HEALTHCHECK" => {}
            other => panic!("unexpected Dockerfile instruction {other}"),
        }
    }
    assert_eq!(
        froms,
        vec![
            "rust:1.95-bookworm AS build",
            "nvidia/cuda:12.8.1-runtime-ubuntu24.04 AS cuda"
        ]
    );
    assert_eq!(args["CUDARC_CUDA_VERSION"], cargo_config_cuda());
    assert!(
        instrs
            .iter()
            .any(|i| i == "COPY --from=build /src/target/release/trainer /usr/local/bin/trainer")
    );
    assert!(
        instrs.iter().any(|i| i == "COPY crates crates"),
        "the workspace's crates go into the build"
    );
    assert!(
        instrs
            .iter()
            .any(|i| i.starts_with("ENTRYPOINT [\"/usr/local/bin/trainer\"]"))
    );
    // The same pins as trainer.def.
    let def = read("trainer.def");
    for k in [
        "BUILD_IMAGE",
        "CUDA_VERSION",
        "UBUNTU",
        "CUDARC_CUDA_VERSION",
        "FEATURES",
    ] {
        let v = &args[k];
        assert!(
            def.contains(&format!("{k}={v}")),
            "trainer.def has no {k}={v}"
        );
    }
}
