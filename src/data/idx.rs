//! The IDX format of MNIST-style datasets: a magic number naming the element type and rank,
//! big-endian `u32` dimensions, then the raw elements. Files may be gzipped.

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, bail};
use flate2::read::GzDecoder;

/// An IDX array of unsigned bytes.
#[derive(Debug, Clone)]
pub struct IdxU8 {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// Reads a whole file, transparently un-gzipping it (detected by content, not by name).
pub fn read_maybe_gz(path: &Path) -> Result<Vec<u8>> {
    let raw = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 4);
        GzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .with_context(|| format!("{}: corrupt or truncated gzip stream", path.display()))?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Parses an IDX file of `u8` elements with exactly `rank` dimensions.
pub fn parse_u8(bytes: &[u8], rank: usize, path: &Path) -> Result<IdxU8> {
    let name = path.display();
    if bytes.len() < 4 {
        bail!(
            "{name}: file too short for an IDX header ({} bytes)",
            bytes.len()
        );
    }
    if bytes[0] != 0 || bytes[1] != 0 {
        bail!(
            "{name}: wrong magic number {:02x}{:02x}{:02x}{:02x}: not an IDX file (expected 0000080{rank})",
            bytes[0],
            bytes[1],
            bytes[2],
            bytes[3]
        );
    }
    if bytes[2] != 0x08 {
        bail!(
            "{name}: IDX element type 0x{:02x} is not unsigned byte (0x08)",
            bytes[2]
        );
    }
    if bytes[3] as usize != rank {
        bail!(
            "{name}: IDX array has {} dimensions, expected {rank} (magic 0000080{rank})",
            bytes[3]
        );
    }
    let header = 4 + 4 * rank;
    if bytes.len() < header {
        bail!(
            "{name}: truncated IDX header ({} of {header} bytes)",
            bytes.len()
        );
    }
    let dims: Vec<usize> = (0..rank)
        .map(|i| {
            let o = 4 + 4 * i;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let expected = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .with_context(|| format!("{name}: dimensions {dims:?} overflow"))?;
    let body = bytes.len() - header;
    if body < expected {
        bail!("{name}: truncated: dimensions {dims:?} need {expected} data bytes, file has {body}");
    }
    if body > expected {
        bail!(
            "{name}: {} trailing bytes after the {dims:?} array",
            body - expected
        );
    }
    Ok(IdxU8 {
        dims,
        data: bytes[header..].to_vec(),
    })
}

/// Reads and parses an IDX file of `u8` elements.
pub fn read_u8(path: &Path, rank: usize) -> Result<IdxU8> {
    let bytes = read_maybe_gz(path)?;
    parse_u8(&bytes, rank, path)
}

/// Encodes `u8` data as IDX (used by tests and the synthetic benchmark data).
pub fn encode_u8(dims: &[usize], data: &[u8]) -> Vec<u8> {
    let mut out = vec![0, 0, 0x08, dims.len() as u8];
    for d in dims {
        out.extend_from_slice(&(*d as u32).to_be_bytes());
    }
    out.extend_from_slice(data);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let bytes = encode_u8(&[2, 3], &[1, 2, 3, 4, 5, 6]);
        let a = parse_u8(&bytes, 2, Path::new("x")).unwrap();
        assert_eq!(a.dims, vec![2, 3]);
        assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn rejects_bad_headers() {
        let p = Path::new("f");
        let mut bytes = encode_u8(&[2], &[1, 2]);
        assert!(
            parse_u8(&bytes, 3, p)
                .unwrap_err()
                .to_string()
                .contains("dimensions")
        );
        bytes[0] = 7;
        assert!(
            parse_u8(&bytes, 1, p)
                .unwrap_err()
                .to_string()
                .contains("magic")
        );
        let short = encode_u8(&[5], &[1, 2]);
        assert!(
            parse_u8(&short, 1, p)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
    }
}
