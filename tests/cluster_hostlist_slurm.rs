//! Our hostlist expansion against the reference, `scontrol show hostnames`, of a real Slurm
//! (see tests/common/scontrol.rs for where Slurm comes from; without one the tests print SKIP,
//! or fail with `TRAINER_REQUIRE_SLURM=1`):
//!
//! * hand-picked lists, and the corpus in `tests/corpus/hostlist/*.txt`;
//! * a property test over generated lists, valid and malformed (prefixes, several bracket
//!   groups, zero padding, repeats, overlapping and backward ranges, text after brackets, empty
//!   pieces, huge ranges, stray brackets, cut or spliced text): every list Slurm expands we
//!   expand the same way, every list Slurm refuses we refuse. Where Slurm prints garbage for a
//!   malformed list (`node[1-` gives `node]`), we refuse it with a message naming the list.
//!   `TRAINER_HOSTLIST_CASES` sets the number of generated lists (default 2500).

#[path = "common/scontrol.rs"]
mod scontrol;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use scontrol::{BROKE, hostnames_conf, scontrol_hostnames};
use trainer::cluster::hostlist;

fn conf_or_skip() -> Option<PathBuf> {
    let conf = hostnames_conf();
    match &conf {
        Some(c) => println!("comparing against scontrol with SLURM_CONF={}", c.display()),
        None => println!(
            "SKIP cluster_hostlist_slurm: scontrol not found; run scripts/slurm-up.sh or set \
             TRAINER_REQUIRE_SLURM=1 to start Slurm and require this test"
        ),
    }
    conf
}

/// Lists both sides must expand identically.
const VALID: &[&str] = &[
    "vm",
    "ai[01-02]",
    "gpu1,gpu[3-5,7]",
    "ai[01-02],gpu[10-11]",
    "n[8-10]",
    "n[08-10]",
    "n[001-3]",
    "n[1-003]",
    "n[99-101]",
    "n[00-00]",
    "n[0-3,02]",
    "a[1-2]b[3-4]",
    "n[1-2]-[3-4]",
    "n[1-2][3-4]",
    "rack1-n[1,3]",
    "a,b,,c",
    "x[1-2],x1",
    "[1-2]",
    "node-[0001-0300]",
    "q_ai4-gpu[1-2],q_ai8-gpu[07-09]",
];

/// Lists both sides must reject.
const INVALID: &[&str] = &[
    "n[5-3]",
    "n[]",
    "n[a-b]",
    "n[1,-2]",
    "n[-]",
    "a[1-2]b",
    "rack1-n[1,3]x",
    "n[1-100000000]",
];

#[test]
fn hostlist_expansion_matches_scontrol() {
    let Some(conf) = conf_or_skip() else {
        return;
    };

    let mut mismatches = Vec::new();
    for list in VALID {
        let reference = scontrol_hostnames(&conf, list);
        let ours = hostlist::expand(list).map_err(|e| e.to_string());
        match (&reference, &ours) {
            (Ok(r), Ok(o)) if r == o => {}
            _ => mismatches.push(format!("{list:?}: scontrol {reference:?}, ours {ours:?}")),
        }
    }
    for list in INVALID {
        let reference = scontrol_hostnames(&conf, list);
        let ours = hostlist::expand(list);
        if reference.is_ok() || ours.is_ok() {
            mismatches.push(format!(
                "{list:?} should be rejected: scontrol {reference:?}, ours {ours:?}"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "hostlist mismatches:\n{}",
        mismatches.join("\n")
    );
    println!(
        "{} valid and {} invalid hostlists agree with scontrol",
        VALID.len(),
        INVALID.len()
    );
}

/// The lists of `tests/corpus/hostlist/*.txt`.
fn corpus() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/hostlist");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/corpus/hostlist")
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(f)
                .expect("corpus file")
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Lists on which Slurm may print garbage, which we refuse: malformed by the plain grammar
/// (see [`strictly_malformed`]), or a bracket over 65 536 hosts that two more follow (Slurm
/// silently keeps 65 536 of them: `a[0-65535,0-5][0][0]`).
fn slurm_garbage(list: &str) -> bool {
    strictly_malformed(list)
        || items(list).iter().any(|item| {
            let groups: Vec<u64> = item
                .split('[')
                .skip(1)
                .filter_map(|g| g.split(']').next())
                .map(|inner| {
                    inner
                        .split(',')
                        .map(|p| match p.split_once('-') {
                            Some((lo, hi)) => match (lo.parse::<u64>(), hi.parse::<u64>()) {
                                (Ok(lo), Ok(hi)) if hi >= lo => hi - lo + 1,
                                _ => 1,
                            },
                            None => 1,
                        })
                        .sum()
                })
                .collect();
            groups.len() > 1 && groups[..groups.len() - 1].iter().any(|&n| n > 65_536)
        })
}

/// The items of a list: split at commas and whitespace outside brackets.
fn items(list: &str) -> Vec<String> {
    let (mut out, mut cur, mut open) = (Vec::new(), String::new(), false);
    for c in list.chars() {
        match c {
            '[' => open = true,
            ']' => open = false,
            ',' | ' ' | '\t' if !open => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out
}

/// Malformed by the plain grammar: brackets balanced and not nested, each holding `N` or `N-M`
/// pieces of decimal digits that fit in 64 bits. Slurm expands some such lists to garbage
/// (`node[1-` gives `node]`, `n[ 1]` gives `n01`); we refuse them all.
fn strictly_malformed(list: &str) -> bool {
    let number = |s: &str| s.bytes().all(|b| b.is_ascii_digit()) && s.parse::<u64>().is_ok();
    let piece_ok = |p: &str| match p.split_once('-') {
        Some((lo, hi)) => number(lo) && number(hi),
        None => number(p),
    };
    let (mut open, mut inner) = (false, String::new());
    for c in list.chars() {
        match c {
            '[' if open => return true,
            '[' => (open, inner) = (true, String::new()),
            ']' if !open => return true,
            ']' if !inner.split(',').all(piece_ok) => return true,
            ']' => open = false,
            _ if open => inner.push(c),
            _ => {}
        }
    }
    open
}

/// A number of 20 digits or more (near or past 2^64).
fn has_huge_number(list: &str) -> bool {
    list.split(|c: char| !c.is_ascii_digit())
        .any(|d| d.len() >= 20)
}

#[derive(Clone, Copy)]
enum Class {
    Expanded = 0,
    RefusedByBoth = 1,
    SlurmGarbageRefused = 2,
    SlurmHung = 3,
}

fn short<T: std::fmt::Debug>(v: &T) -> String {
    let s = format!("{v:?}");
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

/// Our expansion or refusal of `list` against scontrol's.
fn compare(conf: &Path, list: &str) -> Result<Class, String> {
    let slurm = scontrol_hostnames(conf, list);
    let ours = hostlist::expand(list);
    match (&slurm, &ours) {
        (Ok(s), Ok(o)) if s == o => Ok(Class::Expanded),
        // Slurm 22.05 loops or segfaults on some lists with numbers near 2^64; ours answered.
        (Err(h), _) if h == BROKE && has_huge_number(list) => Ok(Class::SlurmHung),
        (Err(h), _) if h == BROKE => Err(format!(
            "{list:?}: scontrol hung or crashed, ours {}",
            short(&ours)
        )),
        (Err(_), Err(_)) => Ok(Class::RefusedByBoth),
        (Ok(_), Err(e)) if slurm_garbage(list) => {
            let text = e.to_string();
            if text.contains(&format!("{list:?}")) && !e.reason.is_empty() {
                Ok(Class::SlurmGarbageRefused)
            } else {
                Err(format!("{list:?}: refusal does not name the list: {text}"))
            }
        }
        _ => Err(format!(
            "{list:?}: scontrol {}, ours {}",
            short(&slurm),
            short(&ours)
        )),
    }
}

/// One piece inside brackets.
#[derive(Debug, Clone)]
enum Piece {
    One(String),
    Range(String, String),
    Bad(&'static str),
}

impl Piece {
    fn render(&self) -> String {
        match self {
            Piece::One(n) => n.clone(),
            Piece::Range(lo, hi) => format!("{lo}-{hi}"),
            Piece::Bad(s) => (*s).to_string(),
        }
    }
    fn count(&self) -> u64 {
        match self {
            Piece::Range(lo, hi) => {
                let (lo, hi) = (lo.parse::<u64>(), hi.parse::<u64>());
                match (lo, hi) {
                    (Ok(lo), Ok(hi)) if hi >= lo => hi - lo + 1,
                    _ => 1,
                }
            }
            _ => 1,
        }
    }
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (0u64..200, 0usize..3).prop_map(|(n, zeros)| format!("{}{n}", "0".repeat(zeros))),
        2 => (0u64..100_000).prop_map(|n| n.to_string()),
        1 => (4_294_967_290u64..4_294_967_300).prop_map(|n| n.to_string()),
    ]
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        6 => number().prop_map(Piece::One),
        6 => (number(), number()).prop_map(|(a, b)| Piece::Range(a, b)),
        3 => (0u64..50, 0u64..30).prop_map(|(lo, n)| Piece::Range(lo.to_string(), (lo + n).to_string())),
        1 => (0u64..10, 65_530u64..65_540)
            .prop_map(|(lo, n)| Piece::Range(lo.to_string(), (lo + n).to_string())),
        2 => prop::sample::select(vec![
            "", "-", "1-", "-2", " 1", "1 ", "+1", "1--2", "1-2-3", "a", "0x1", "1a",
        ])
        .prop_map(Piece::Bad),
    ]
}

/// Literal text between or after bracket groups (mostly none).
fn infix() -> impl Strategy<Value = String> {
    prop_oneof![6 => Just(String::new()), 2 => "[a-z_-]{1,3}", 1 => "[0-9]{1,2}"]
}

/// One item: a prefix and up to three bracket groups, each followed by literal text; now and
/// then a single group holding a number near or past 2^64.
fn item() -> impl Strategy<Value = (String, u64)> {
    let huge = (
        "[a-z]{1,3}",
        prop::sample::select(vec![
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
            "1-18446744073709551615",
            "18446744073709551614-18446744073709551615",
        ]),
    )
        .prop_map(|(p, n)| (format!("{p}[{n}]"), 1));
    prop_oneof![12 => plain_item(), 1 => huge]
}

fn plain_item() -> impl Strategy<Value = (String, u64)> {
    let prefix = prop_oneof![
        8 => "[a-z][a-z0-9_-]{0,6}",
        1 => Just(String::new()),
        1 => "[a-z]{1,3}é",
    ];
    let group = (prop::collection::vec(piece(), 1..4), infix());
    (prefix, prop::collection::vec(group, 0..3)).prop_map(|(prefix, groups)| {
        let mut text = prefix;
        let mut count = 1u64;
        for (pieces, after) in &groups {
            let texts: Vec<String> = pieces.iter().map(Piece::render).collect();
            text.push_str(&format!("[{}]{after}", texts.join(",")));
            count = count.saturating_mul(pieces.iter().map(Piece::count).sum());
        }
        (text, count)
    })
}

/// Whole lists: items joined by separators, some then cut, spliced or given a stray bracket.
fn hostlist_strategy() -> impl Strategy<Value = String> {
    let sep = prop::sample::select(vec![",", ",", ",", " ", ",,", ", ", "\t"]);
    let mutation = prop::option::weighted(
        0.2,
        (
            0usize..64,
            prop::sample::select(vec!['[', ']', '-', ',', ' ', '0', '\0']),
        ),
    );
    (prop::collection::vec((item(), sep), 0..5), mutation)
        .prop_filter("at most 150 000 hosts", |(items, _)| {
            items.iter().map(|((_, n), _)| *n).sum::<u64>() <= 150_000
        })
        .prop_map(|(items, mutation)| {
            let mut chars: Vec<char> = items
                .iter()
                .enumerate()
                .flat_map(|(i, ((text, _), sep))| {
                    let sep = if i + 1 < items.len() { *sep } else { "" };
                    format!("{text}{sep}").chars().collect::<Vec<_>>()
                })
                .collect();
            if let Some((at, c)) = mutation {
                let at = at % (chars.len() + 1);
                match c {
                    // '\0' stands for "delete the character there" (or cut when at the end).
                    '\0' if at < chars.len() => drop(chars.remove(at)),
                    '\0' => chars.truncate(at / 2),
                    c => chars.insert(at, c),
                }
            }
            let list: String = chars.into_iter().collect();
            // scontrol would read a leading '-' as an option.
            if list.starts_with('-') {
                format!("x{list}")
            } else {
                list
            }
        })
}

#[test]
fn generated_and_corpus_hostlists_match_scontrol() {
    let Some(conf) = conf_or_skip() else {
        return;
    };
    let counts = [const { AtomicUsize::new(0) }; 4];
    let corpus = corpus();
    let failures: Vec<String> = corpus
        .iter()
        .filter_map(|l| match compare(&conf, l) {
            Ok(c) => {
                counts[c as usize].fetch_add(1, Ordering::Relaxed);
                None
            }
            Err(e) => Some(e),
        })
        .collect();
    assert!(failures.is_empty(), "corpus:\n{}", failures.join("\n"));

    let cases = std::env::var("TRAINER_HOSTLIST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2500);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let t0 = Instant::now();
    let result = runner.run(&hostlist_strategy(), |list| {
        let class = compare(&conf, &list).map_err(TestCaseError::fail)?;
        counts[class as usize].fetch_add(1, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}\n(add the minimal list to tests/corpus/hostlist/)");
    }
    let [expanded, refused, garbage, hung] = counts.map(|c| c.load(Ordering::Relaxed));
    println!(
        "{} corpus + {cases} generated hostlists in {:.1} s: {expanded} expanded alike, \
         {refused} refused by both, {garbage} garbage from Slurm refused by us, {hung} on which \
         scontrol hung or crashed (numbers near 2^64)",
        corpus.len(),
        t0.elapsed().as_secs_f64()
    );
    // The generator must keep producing all three kinds, or the test proves little.
    let total = (expanded + refused + garbage) as f64;
    for (n, what) in [
        (expanded, "expanded"),
        (refused, "refused"),
        (garbage, "garbage"),
    ] {
        assert!(n as f64 >= 0.05 * total, "only {n} of {total} {what}");
    }
}
