//! Generated Slurm hostlists, valid and malformed, for the property test against scontrol:
//! prefixes, up to three bracket groups, zero padding, repeats, overlapping and backward ranges,
//! text after brackets, empty and malformed pieces, ranges around Slurm's 65 536 limit, numbers
//! near 2^64, and lists cut, spliced or given a stray bracket.

use proptest::prelude::*;

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
pub fn hostlist_strategy() -> impl Strategy<Value = String> {
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
