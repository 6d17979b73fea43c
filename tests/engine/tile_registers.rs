//! The direct convolution's register tiles (`fast_cpu/direct/simd.rs`) keep their accumulators
//! in registers: no loop of fused multiply-adds in the built binary stores a vector register
//! to the stack.
//!
//! Why a test reads machine code: the tiles are compiled for AVX-512 and for AVX2 + FMA on
//! every machine, but run only where the CPU has them. In b3a3d41 an index into the
//! accumulators (`row[s.vector]`) made the compiler keep AVX-512's forward tile in memory,
//! with one store per multiply-add: that pass became 2.6× slower on AVX-512 CPUs while every
//! test and CI (on a CPU without AVX-512) stayed green. This test catches that on any CPU.
//!
//! It reads `objdump -d` of the test's `trainer` binary: needs binutils, and a release build
//! (`cargo test --release`, as `scripts/test.sh` runs it); a debug build keeps every value in
//! memory, so there it says so and checks nothing. `TRAINER_TILE_BINARY=path` checks another
//! build.

use std::process::Command;

/// The tile functions: each is `#[target_feature]`, so never inlined into its callers.
const TILES: [&str; 6] = [
    "direct::simd::avx512::forward",
    "direct::simd::avx512::scatter",
    "direct::simd::avx512::weight",
    "direct::simd::avx2::forward",
    "direct::simd::avx2::scatter",
    "direct::simd::avx2::weight",
];

/// A loop of a tile (from a backward jump's target to the jump): its fused multiply-adds and
/// its stores of vector registers to the stack.
struct Loop {
    fmas: usize,
    stack_stores: Vec<String>,
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd} (binutils) is needed by this test: {e}"));
    assert!(out.status.success(), "{cmd} {args:?} failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `(address, size, name)` of every copy of each tile function in `binary`.
fn tile_symbols(binary: &str) -> Vec<(u64, u64, String)> {
    run("nm", &["-C", "-S", binary])
        .lines()
        .filter_map(|line| {
            let mut f = line.splitn(4, ' ');
            let (addr, size, _kind, name) = (f.next()?, f.next()?, f.next()?, f.next()?);
            TILES.iter().any(|t| name.ends_with(t)).then(|| {
                let hex = |s: &str| u64::from_str_radix(s, 16).expect("nm's hex field");
                (hex(addr), hex(size), name.to_string())
            })
        })
        .collect()
}

/// The loops of the function at `addr` (`size` bytes) that contain fused multiply-adds.
fn fma_loops(binary: &str, addr: u64, size: u64) -> Vec<Loop> {
    let text = run(
        "objdump",
        &[
            "-d",
            "--no-show-raw-insn",
            &format!("--start-address={addr:#x}"),
            &format!("--stop-address={:#x}", addr + size),
            binary,
        ],
    );
    let instructions: Vec<(u64, &str)> = text
        .lines()
        .filter_map(|line| {
            let (at, insn) = line.split_once(':')?;
            Some((u64::from_str_radix(at.trim(), 16).ok()?, insn.trim()))
        })
        .collect();
    let mut loops = Vec::new();
    for &(at, insn) in &instructions {
        let Some(target) = insn
            .strip_prefix('j')
            .and_then(|rest| rest.split_whitespace().nth(1))
            .and_then(|t| u64::from_str_radix(t, 16).ok())
        else {
            continue;
        };
        if target >= at {
            continue;
        }
        let body: Vec<&str> = instructions
            .iter()
            .filter(|(a, _)| (target..=at).contains(a))
            .map(|(_, insn)| *insn)
            .collect();
        let fmas = body.iter().filter(|i| i.starts_with("vfmadd")).count();
        let stack_stores = body
            .iter()
            .filter(|i| {
                i.starts_with("vmov")
                    && i.split_once(',').is_some_and(|(src, dst)| {
                        src.contains("mm") && (dst.contains("(%rsp)") || dst.contains("(%rbp)"))
                    })
            })
            .map(|i| i.to_string())
            .collect();
        if fmas > 0 {
            loops.push(Loop { fmas, stack_stores });
        }
    }
    loops
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "a debug build keeps values in memory: run with --release (CI does)"
)]
fn register_tiles_keep_their_accumulators_in_registers() {
    // TRAINER_TILE_BINARY checks another build (a binary carried to a cluster, an older one).
    let binary =
        std::env::var("TRAINER_TILE_BINARY").unwrap_or(env!("CARGO_BIN_EXE_trainer").into());
    let binary = binary.as_str();
    let symbols = tile_symbols(binary);
    for tile in TILES {
        assert!(
            symbols.iter().any(|(_, _, name)| name.ends_with(tile)),
            "no symbol {tile} in {binary}: the tile was renamed or inlined; update TILES"
        );
    }
    for (addr, size, name) in &symbols {
        let loops = fma_loops(binary, *addr, *size);
        assert!(
            !loops.is_empty(),
            "{name} at {addr:#x}: no loop of fused multiply-adds found"
        );
        for l in loops {
            assert!(
                l.stack_stores.is_empty(),
                "{name} at {addr:#x}: a loop of {} fused multiply-adds stores registers to the \
                 stack ({} stores, e.g. `{}`): its accumulators left the registers",
                l.fmas,
                l.stack_stores.len(),
                l.stack_stores[0]
            );
        }
    }
}
