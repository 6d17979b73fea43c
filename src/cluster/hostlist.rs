//! Slurm hostlist expansion: `gpu1,gpu[3-5,7]` → `gpu1 gpu3 gpu4 gpu5 gpu7`.
//!
//! Follows `scontrol show hostnames`: items are separated by commas or whitespace outside
//! brackets; each bracket holds comma-separated numbers or `lo-hi` ranges; zero padding is
//! taken from the low bound (`[08-10]` → `08 09 10`, `[8-10]` → `8 9 10`); several brackets in
//! one item form a product (`a[1-2]b[3-4]` → `a1b3 a1b4 a2b3 a2b4`); text after the last
//! bracket is rejected, as Slurm does. Duplicates and order are kept. Limits as Slurm 22.05's:
//! one range holds at most [`MAX_RANGE`] numbers, and so does each whole bracket that another
//! bracket follows (`a[0-65530,0-5][0]` is refused; `a[0-65530,0-5]` and `a[0][0-4,0-65531]`
//! are not).
//!
//! Where Slurm prints garbage we refuse with a message naming the list: an unclosed or stray
//! bracket (`node[1-` gives `node]`), an empty high bound (`n[1-]` gives `n1`), a sign or space
//! in a number (`n[ 1]` gives `n01`), a number past 2^64 (Slurm saturates), a bracket over the
//! limit followed by two more (Slurm truncates it to 65 536 hosts). This is checked
//! against `scontrol show hostnames` by tests/cluster/cluster_hostlist_slurm.rs.

/// Most host names one range may produce (Slurm's own limit is of the same order).
pub(crate) const MAX_RANGE: u64 = 65_536;
/// Most host names one list may produce.
pub const MAX_HOSTS: usize = 1 << 20;

/// Why a hostlist could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid hostlist {input:?}: {reason}")]
pub struct HostlistError {
    /// The list as given.
    pub input: String,
    /// What is wrong.
    pub reason: String,
}

/// Expands a Slurm hostlist into host names, in order.
pub fn expand(list: &str) -> Result<Vec<String>, HostlistError> {
    let err = |reason: String| HostlistError {
        input: list.to_string(),
        reason,
    };
    let mut hosts = Vec::new();
    for item in split_items(list).map_err(err)? {
        expand_item(item, &mut hosts).map_err(err)?;
        if hosts.len() > MAX_HOSTS {
            return Err(err(format!("more than {MAX_HOSTS} hosts")));
        }
    }
    Ok(hosts)
}

/// The first host of a list, the natural rendezvous address.
pub fn first_host(list: &str) -> Result<Option<String>, HostlistError> {
    // Expanding only the first item keeps this cheap for huge lists.
    let items = split_items(list).map_err(|reason| HostlistError {
        input: list.to_string(),
        reason,
    })?;
    let Some(first) = items.first() else {
        return Ok(None);
    };
    let mut hosts = Vec::new();
    expand_item(first, &mut hosts).map_err(|reason| HostlistError {
        input: list.to_string(),
        reason,
    })?;
    Ok(hosts.into_iter().next())
}

/// Splits at commas and whitespace that are outside brackets; drops empty items.
fn split_items(list: &str) -> Result<Vec<&str>, String> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in list.char_indices() {
        match c {
            '[' if depth > 0 => return Err("nested '['".into()),
            '[' => depth = 1,
            ']' if depth == 0 => return Err("']' without '['".into()),
            ']' => depth = 0,
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth > 0 {
        return Err("'[' is never closed".into());
    }
    items.push(&list[start..]);
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

/// Expands one item such as `rack[1-2]-n[01-04]` and appends the names to `out`.
fn expand_item(item: &str, out: &mut Vec<String>) -> Result<(), String> {
    // Alternate literal text and bracket groups.
    let (groups, mut seen) = (item.matches('[').count(), 0);
    let mut names = vec![String::new()];
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let literal = &rest[..open];
        let Some(close_rel) = rest[open..].find(']') else {
            return Err(format!("'[' is never closed in {item:?}"));
        };
        let inner = &rest[open + 1..open + close_rel];
        let numbers = expand_ranges(inner)?;
        seen += 1;
        if seen < groups && numbers.len() as u64 > MAX_RANGE {
            return Err(format!(
                "[{inner}] has more than {MAX_RANGE} hosts, Slurm's limit for a bracket followed \
                 by another"
            ));
        }
        let product = names.len().saturating_mul(numbers.len());
        if product > MAX_HOSTS {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
        let mut next = Vec::with_capacity(product);
        for base in &names {
            for n in &numbers {
                next.push(format!("{base}{literal}{n}"));
            }
        }
        names = next;
        rest = &rest[open + close_rel + 1..];
        if !rest.is_empty() && !rest.contains('[') {
            return Err(format!("text {rest:?} after ']' in {item:?}"));
        }
    }
    for mut n in names {
        n.push_str(rest);
        out.push(n);
    }
    Ok(())
}

/// Expands the inside of a bracket, `3-5,7` or `01-02`, keeping the padding of each low bound.
fn expand_ranges(inner: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in inner.split(',') {
        let (lo_s, hi_s) = match part.split_once('-') {
            Some((lo, hi)) => (lo, hi),
            None => (part, part),
        };
        let lo = parse_number(lo_s, part)?;
        let hi = parse_number(hi_s, part)?;
        if hi < lo {
            return Err(format!("range {part:?} runs backwards"));
        }
        if hi - lo >= MAX_RANGE {
            return Err(format!("range {part:?} has more than {MAX_RANGE} hosts"));
        }
        let width = lo_s.len();
        for n in lo..=hi {
            out.push(format!("{n:0width$}"));
        }
    }
    Ok(out)
}

fn parse_number(s: &str, part: &str) -> Result<u64, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid range {part:?}"));
    }
    s.parse::<u64>()
        .map_err(|_| format!("number in {part:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(s: &str) -> Vec<String> {
        expand(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn single_host() {
        assert_eq!(ex("vm"), ["vm"]);
    }

    #[test]
    fn multi_range_lists() {
        assert_eq!(
            ex("gpu1,gpu[3-5,7]"),
            ["gpu1", "gpu3", "gpu4", "gpu5", "gpu7"]
        );
        assert_eq!(
            ex("ai[01-02],gpu[10-11]"),
            ["ai01", "ai02", "gpu10", "gpu11"]
        );
    }

    #[test]
    fn padding_comes_from_the_low_bound() {
        assert_eq!(ex("n[08-10]"), ["n08", "n09", "n10"]);
        assert_eq!(ex("n[8-10]"), ["n8", "n9", "n10"]);
        assert_eq!(ex("n[001-3]"), ["n001", "n002", "n003"]);
        assert_eq!(ex("n[1-003]"), ["n1", "n2", "n3"]);
        assert_eq!(ex("n[0-3,02]"), ["n0", "n1", "n2", "n3", "n02"]);
    }

    #[test]
    fn several_brackets_form_a_product() {
        assert_eq!(ex("a[1-2]b[3-4]"), ["a1b3", "a1b4", "a2b3", "a2b4"]);
        assert_eq!(ex("n[1-2]-[3-4]"), ["n1-3", "n1-4", "n2-3", "n2-4"]);
    }

    #[test]
    fn separators_and_duplicates() {
        assert_eq!(ex(" a , b "), ["a", "b"]);
        assert_eq!(ex("a,b,,c"), ["a", "b", "c"]);
        assert_eq!(ex("x[1-2],x1"), ["x1", "x2", "x1"]);
        assert_eq!(ex(""), Vec::<String>::new());
    }

    #[test]
    fn invalid_lists_are_errors_not_panics() {
        for bad in [
            "n[5-3]",
            "n[]",
            "n[a-b]",
            "n[1,-2]",
            "n[1-3",
            "n]",
            "a[1-2]b",
            "n[[1]]",
            "n[-]",
            "n[1-100000000]",
            "n[99999999999999999999]",
            "n[1-2]é",
        ] {
            assert!(expand(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn random_input_never_panics() {
        let alphabet: Vec<char> = "[]-,0123456789ab é\t".chars().collect();
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            let mut s = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for i in 0..(seed % 16) {
                let k = (seed >> (i * 4)) as usize % alphabet.len();
                s.push(alphabet[k]);
            }
            let _ = expand(&s);
            let _ = first_host(&s);
            let _ = crate::cluster::scheduler::parse_tasks_per_node(&s);
            let _ = crate::cluster::visible_devices::VisibleDevices::parse(Some(&s)).describe();
        }
    }

    #[test]
    fn first_host_is_cheap_and_right() {
        assert_eq!(
            first_host("ai[01-02],gpu[10-11]").ok().flatten().as_deref(),
            Some("ai01")
        );
        assert_eq!(first_host("").ok().flatten(), None);
        assert_eq!(
            first_host("n[1-3],n[5-2]").ok().flatten().as_deref(),
            Some("n1")
        );
    }
}
