//! The IDX format of MNIST-style datasets: a magic number naming the element type and rank,
//! big-endian `u32` dimensions, then the raw elements. Files may be gzipped. Nothing is
//! allocated from a header's claim before the file is known to hold that much.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::{Context, Result, bail};
use flate2::read::GzDecoder;

/// An IDX array of unsigned bytes.
#[derive(Debug, Clone)]
pub struct IdxU8 {
    pub dims: Vec<usize>,
    pub data: Vec<u8>,
}

/// A checked IDX header: the dimensions, the header's length and the data bytes it claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdxHeader {
    pub dims: Vec<usize>,
    pub header_len: usize,
    pub data_len: usize,
}

/// Checks the header at the start of `bytes` (magic, element type, rank, dimensions whose
/// product fits in memory arithmetic). Nothing is allocated from the claimed size.
pub(crate) fn parse_header(bytes: &[u8], rank: usize, path: &Path) -> Result<IdxHeader> {
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
            "{name}: IDX array has {} dimensions (magic {:02x}{:02x}{:02x}{:02x}), expected {rank} \
             (magic 0000080{rank})",
            bytes[3],
            bytes[0],
            bytes[1],
            bytes[2],
            bytes[3]
        );
    }
    let header_len = 4 + 4 * rank;
    if bytes.len() < header_len {
        bail!(
            "{name}: truncated IDX header ({} of {header_len} bytes)",
            bytes.len()
        );
    }
    let dims: Vec<usize> = (0..rank)
        .map(|i| {
            let o = 4 + 4 * i;
            u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as usize
        })
        .collect();
    let Some(data_len) = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) else {
        bail!("{name}: dimensions {dims:?} overflow");
    };
    Ok(IdxHeader {
        dims,
        header_len,
        data_len,
    })
}

/// The size check shared by both readers: the data must be exactly what the header claims.
fn check_body(h: &IdxHeader, body: u64, path: &Path) -> Result<()> {
    let (dims, expected) = (&h.dims, h.data_len as u64);
    let name = path.display();
    if body < expected {
        bail!("{name}: truncated: dimensions {dims:?} need {expected} data bytes, file has {body}");
    }
    if body > expected {
        bail!(
            "{name}: {} trailing bytes after the {dims:?} array",
            body - expected
        );
    }
    Ok(())
}

/// Parses an IDX file of `u8` elements with exactly `rank` dimensions, held in memory.
pub fn parse_u8(bytes: &[u8], rank: usize, path: &Path) -> Result<IdxU8> {
    let h = parse_header(bytes, rank, path)?;
    check_body(&h, (bytes.len() - h.header_len) as u64, path)?;
    Ok(IdxU8 {
        data: bytes[h.header_len..].to_vec(),
        dims: h.dims,
    })
}

/// Reads and parses an IDX file of `u8` elements, raw or gzipped (detected by content, not by
/// name). The data is allocated only once the header's claim is known to match the file: the
/// file's size for a raw file, the bytes really decompressed for a gzipped one (reading stops
/// one byte past the claim), so a header claiming 2^31 images costs nothing.
pub fn read_u8(path: &Path, rank: usize) -> Result<IdxU8> {
    let cannot_read = || format!("cannot read {}", path.display());
    let file = std::fs::File::open(path).with_context(cannot_read)?;
    let file_len = file.metadata().with_context(cannot_read)?.len();
    let mut reader = BufReader::new(file);
    let gz = reader
        .fill_buf()
        .with_context(cannot_read)?
        .starts_with(&[0x1f, 0x8b]);
    let head_len = 4 + 4 * rank as u64;
    if !gz {
        let mut head = Vec::new();
        read_up_to(&mut reader, &mut head, head_len).with_context(cannot_read)?;
        let h = parse_header(&head, rank, path)?;
        check_body(&h, file_len.saturating_sub(h.header_len as u64), path)?;
        let mut data = Vec::with_capacity(h.data_len);
        read_up_to(&mut reader, &mut data, h.data_len as u64).with_context(cannot_read)?;
        // The file shrank under us.
        check_body(&h, data.len() as u64, path)?;
        return Ok(IdxU8 { dims: h.dims, data });
    }
    let gz_err = || format!("{}: corrupt or truncated gzip stream", path.display());
    let mut stream = GzDecoder::new(reader);
    let mut head = Vec::new();
    read_up_to(&mut stream, &mut head, head_len).with_context(gz_err)?;
    let h = parse_header(&head, rank, path)?;
    // Grow with the bytes that really arrive; the claim only caps the read.
    let hint = usize::try_from(file_len.saturating_mul(4)).unwrap_or(usize::MAX);
    let mut data = Vec::with_capacity(h.data_len.min(hint));
    read_up_to(&mut stream, &mut data, h.data_len as u64 + 1).with_context(gz_err)?;
    let mut body = data.len() as u64;
    if data.len() > h.data_len {
        // Count what follows without keeping it (at most 1 GiB more is looked at).
        body += std::io::copy(&mut (&mut stream).take(1 << 30), &mut std::io::sink())
            .with_context(gz_err)?;
    }
    check_body(&h, body, path)?;
    Ok(IdxU8 { dims: h.dims, data })
}

/// Appends at most `limit` bytes of `r` to `out`, stopping early at the end of the stream.
fn read_up_to(r: &mut impl Read, out: &mut Vec<u8>, limit: u64) -> std::io::Result<()> {
    r.take(limit).read_to_end(out).map(|_| ())
}

/// Encodes `u8` data as IDX (used by tests and the synthetic benchmark data).
#[cfg(test)]
pub(crate) fn encode_u8(dims: &[usize], data: &[u8]) -> Vec<u8> {
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
