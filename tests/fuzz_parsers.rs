//! Fuzz properties of the readers of user files: IDX (raw and gzipped), SC matrix CSV,
//! morphology CSV and the subject table. For every input, generated or from
//! `tests/corpus/<parser>/`: no panic, no allocation beyond [`fuzz::alloc_bound`] of the input
//! (a header claiming 2^31 images, a first CSV row claiming 60 000 columns), and an error that
//! names the file. Reading never writes, so no partial file can be left. Case budget:
//! `TRAINER_FUZZ_CASES` (see tests/common/fuzz.rs).

#[path = "common/fuzz.rs"]
mod fuzz;

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{TestCaseError, TestRunner};
use trainer::data::connectome::morph::{DEFAULT_METRICS, MorphLayout, load_morph};
use trainer::data::connectome::sc::read_sc_matrix;
use trainer::data::connectome::subjects::read_subject_table;
use trainer::data::idx;

#[global_allocator]
static ALLOC: fuzz::Tracking = fuzz::Tracking;

type Case = Result<(), TestCaseError>;

/// Runs `check` on every corpus file of `parser`, then on `cases` generated inputs.
fn run<S: Strategy>(parser: &str, strategy: S, check: impl Fn(&[u8], S::Value) -> Case)
where
    S::Value: Clone,
{
    let _serial = fuzz::serial();
    let t0 = Instant::now();
    let corpus = fuzz::corpus(parser);
    let mut runner = TestRunner::new(fuzz::config());
    for (path, bytes) in &corpus {
        let value = strategy.new_tree(&mut runner).expect("a value").current();
        if let Err(e) = check(bytes, value) {
            panic!("corpus {}: {e}", path.display());
        }
    }
    // Generated inputs come as (bytes, extra); corpus inputs reuse a generated `extra`.
    let result = runner.run(&strategy, |v| check(&[], v));
    if let Err(e) = result {
        panic!("{parser}: {e}\n(add the minimal input to tests/corpus/{parser}/)");
    }
    fuzz::report(parser, corpus.len(), fuzz::cases(), t0);
}

fn bounded(largest: usize, len: usize, what: &str) -> Case {
    prop_assert!(
        largest <= fuzz::alloc_bound(len),
        "{what}: one allocation of {largest} bytes for {len} input bytes"
    );
    Ok(())
}

fn names_file(err: &str, path: &Path) -> Case {
    let name = path.file_name().unwrap().to_string_lossy();
    prop_assert!(err.contains(&*name), "error does not name {name}: {err}");
    Ok(())
}

fn gzip(raw: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(raw).unwrap();
    gz.finish().unwrap()
}

/// IDX inputs: a structured header (magic, rank, dimensions up to u32::MAX) and a body of
/// about the claimed size or not, or random bytes; gzipped or not; read as rank 1 or 3.
fn idx_input() -> impl Strategy<Value = (Vec<u8>, bool, usize)> {
    let dim = prop_oneof![
        0u32..4,
        Just(28u32),
        Just(1u32 << 31),
        Just(u32::MAX),
        any::<u32>()
    ];
    let structured = (
        prop::sample::select(vec![[0u8, 0, 8], [0, 0, 9], [1, 0, 8], [0, 0, 0x0d]]),
        0u8..5,
        prop::collection::vec(dim, 0..4),
        -3i64..3,
        0usize..3000,
        any::<bool>(),
    )
        .prop_map(|(magic, rank, dims, off, random_len, exact)| {
            let mut b = vec![magic[0], magic[1], magic[2], rank];
            for d in &dims {
                b.extend_from_slice(&d.to_be_bytes());
            }
            let claim = dims
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(u64::from(d)));
            let len = match claim {
                Some(c) if exact && c <= 100_000 => (c as i64 + off).max(0) as usize,
                _ => random_len,
            };
            b.extend((0..len).map(|i| (i % 251) as u8));
            b
        });
    (
        prop_oneof![4 => structured, 1 => prop::collection::vec(any::<u8>(), 0..64)],
        any::<bool>(),
        prop_oneof![Just(1usize), Just(3usize)],
    )
}

#[test]
fn fuzz_idx() {
    let dir = tempfile::tempdir().unwrap();
    run("idx", idx_input(), |corpus, (generated, gz, rank)| {
        let raw = if corpus.is_empty() {
            generated
        } else {
            corpus.to_vec()
        };
        let path = dir.path().join("train-images-idx3-ubyte");
        std::fs::write(&path, if gz { gzip(&raw) } else { raw.clone() }).unwrap();
        let (r, largest) = fuzz::measure(|| idx::read_u8(&path, rank));
        bounded(largest, raw.len(), "read_u8")?;
        let in_memory = idx::parse_u8(&raw, rank, &path);
        match r {
            Ok(a) => {
                prop_assert_eq!(a.dims.len(), rank);
                prop_assert_eq!(a.data.len(), a.dims.iter().product::<usize>());
                prop_assert_eq!(in_memory.ok().map(|m| m.data), Some(a.data));
            }
            Err(e) => {
                prop_assert!(in_memory.is_err() || gz, "file refused, memory accepted");
                names_file(&format!("{e:#}"), &path)?;
            }
        }
        Ok(())
    });
}

/// SC matrix CSV: cells from numbers, blanks, NaN/inf, words, quotes and BOMs in ragged rows;
/// square matrices; a first row of thousands of empty cells; random bytes.
fn sc_input() -> impl Strategy<Value = Vec<u8>> {
    let cell = prop::sample::select(vec![
        "0",
        "1",
        "1.5",
        "-2e3",
        " 3 ",
        "",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "x",
        "1e39",
        "1e-50",
        "\u{feff}1",
        "\"1\"",
        "1;2",
        "0x10",
    ]);
    let rows = (
        prop::collection::vec(prop::collection::vec(cell, 0..6), 0..6),
        prop::sample::select(vec!["\n", "\r\n"]),
    )
        .prop_map(|(rows, nl)| {
            rows.iter()
                .map(|r| r.join(","))
                .collect::<Vec<_>>()
                .join(nl)
                .into_bytes()
        });
    let square = (1usize..8).prop_map(|n| {
        let row = vec!["0.5"; n].join(",");
        vec![row; n].join("\n").into_bytes()
    });
    let wide = (1000usize..60_000).prop_map(|k| ",".repeat(k).into_bytes());
    prop_oneof![
        6 => rows,
        2 => square,
        1 => wide,
        2 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn fuzz_sc_csv() {
    let dir = tempfile::tempdir().unwrap();
    run("sc_csv", sc_input(), |corpus, generated| {
        let bytes = if corpus.is_empty() {
            generated
        } else {
            corpus.to_vec()
        };
        let path = dir.path().join("sub-01_ses-baseline.csv");
        std::fs::write(&path, &bytes).unwrap();
        let (r, largest) = fuzz::measure(|| read_sc_matrix(&path));
        bounded(largest, bytes.len(), "read_sc_matrix")?;
        match r {
            Ok(m) => {
                prop_assert_eq!(m.nrows(), m.ncols());
                prop_assert!(m.iter().all(|v| v.is_finite()));
            }
            Err(e) => names_file(&e.to_string(), &path)?,
        }
        Ok(())
    });
}

/// A CSV from a header row and data rows drawn from the given cells.
fn table(header: Vec<&str>, rows: Vec<Vec<&str>>) -> Vec<u8> {
    let mut lines = vec![header.join(",")];
    lines.extend(rows.iter().map(|r| r.join(",")));
    lines.join("\n").into_bytes()
}

fn morph_input() -> impl Strategy<Value = Vec<u8>> {
    let head = prop::sample::select(vec![
        "SubjectID",
        "R1_Thickness",
        "R2_Thickness",
        "R1_Area",
        "R10_GWC",
        "LH_V1_Curv",
        "_Thickness",
        "Thickness",
        "x",
        "",
        "\u{feff}R1_Area",
    ]);
    let cell = prop::sample::select(vec![
        "1", "2.5", "NA", "", "x", "-0", "1e40", "nan", "sub-1",
    ]);
    prop_oneof![
        5 => (
            prop::collection::vec(head, 0..7),
            prop::collection::vec(prop::collection::vec(cell, 0..8), 0..3),
        )
            .prop_map(|(h, r)| table(h, r)),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn fuzz_morph_csv() {
    let dir = tempfile::tempdir().unwrap();
    let metrics: Vec<String> = DEFAULT_METRICS.iter().map(|m| m.to_string()).collect();
    run("morph_csv", morph_input(), |corpus, generated| {
        let bytes = if corpus.is_empty() {
            generated
        } else {
            corpus.to_vec()
        };
        let path = dir.path().join("Schaefer400_Morphology_sub-01.csv");
        std::fs::write(&path, &bytes).unwrap();
        let (r, largest) = fuzz::measure(|| {
            MorphLayout::infer(&path, &metrics).and_then(|l| Ok((load_morph(&path, &l)?, l)))
        });
        bounded(largest, bytes.len(), "morphology")?;
        match r {
            Ok((m, l)) => prop_assert_eq!(m.x.dim(), (l.rois.len(), l.metrics.len())),
            Err(e) => names_file(&e.to_string(), &path)?,
        }
        Ok(())
    });
}

fn subjects_input() -> impl Strategy<Value = Vec<u8>> {
    let head = prop::sample::select(vec![
        "scanid",
        "age",
        "sex",
        "siteid",
        "ICV",
        "tiv",
        "other",
        "\u{feff}scanid",
        "",
    ]);
    let cell = prop::sample::select(vec![
        "sub-1_ses-baseline",
        "sub-2_ses-2year",
        "",
        "NA",
        "12.5",
        "x",
        "m",
        "female",
        "2",
        "siteA",
        "1e400",
        "\"a,b\"",
        "\"",
    ]);
    prop_oneof![
        5 => (
            prop::collection::vec(head, 0..6),
            prop::collection::vec(prop::collection::vec(cell, 0..7), 0..5),
        )
            .prop_map(|(h, r)| table(h, r)),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn fuzz_subject_table() {
    let dir = tempfile::tempdir().unwrap();
    run("subjects_csv", subjects_input(), |corpus, generated| {
        let bytes = if corpus.is_empty() {
            generated
        } else {
            corpus.to_vec()
        };
        let path = dir.path().join("subject_info_sc.csv");
        std::fs::write(&path, &bytes).unwrap();
        let (r, largest) = fuzz::measure(|| read_subject_table(&path));
        bounded(largest, bytes.len(), "read_subject_table")?;
        if let Err(e) = r {
            names_file(&e.to_string(), &path)?;
        }
        Ok(())
    });
}
