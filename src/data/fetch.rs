//! `trainer data fetch`: downloads MNIST or Fashion-MNIST from their usual public mirrors and
//! verifies MD5 checksums (the ones torchvision pins). Meant for login nodes with internet; the
//! training commands themselves never download.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use flate2::read::GzDecoder;
use md5::{Digest, Md5};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dataset {
    Mnist,
    FashionMnist,
}

const FILES: [&str; 4] = [
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
];

impl Dataset {
    fn mirrors(self) -> &'static [&'static str] {
        match self {
            Dataset::Mnist => &[
                "https://ossci-datasets.s3.amazonaws.com/mnist/",
                "http://yann.lecun.com/exdb/mnist/",
            ],
            Dataset::FashionMnist => &[
                "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
            ],
        }
    }

    /// MD5 of the uncompressed content of each file of [`FILES`] where known (so that a
    /// re-compressed copy, such as Debian's `dataset-fashion-mnist`, also verifies).
    fn content_md5s(self) -> Option<[&'static str; 4]> {
        match self {
            Dataset::Mnist => None,
            Dataset::FashionMnist => Some([
                "f4a8712d7a061bf5bd6d2ca38dc4d50a",
                "9018921c3c673c538a1fc5bad174d6f9",
                "8181f5470baa50b63fa0f6fddb340f0a",
                "15d484375f8d13e6eb1aabb0c3f46965",
            ]),
        }
    }

    /// MD5 of each gzipped file of [`FILES`], in order (as torchvision pins them).
    fn md5s(self) -> [&'static str; 4] {
        match self {
            Dataset::Mnist => [
                "f68b3c2dcbeaaa9fbdd348bbdeb94873",
                "d53e105ee54ea40749a09fcbcd1e9432",
                "9fb629c4189551a2d022fa330f9573f3",
                "ec29112dd5afa0611ce80d1b7f02629c",
            ],
            Dataset::FashionMnist => [
                "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                "25c81989df183df01b3e8a0aad5dffbe",
                "bef4ecab320f06d8554ea6380940ec79",
                "bb300cfdad3c16e7a12a480ee83cd310",
            ],
        }
    }
}

fn md5_hex(bytes: &[u8]) -> String {
    Md5::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn download(url: &str) -> Result<Vec<u8>> {
    let resp = ureq::get(url)
        .call()
        .with_context(|| format!("GET {url}"))?;
    let mut body = Vec::new();
    resp.into_body()
        .into_reader()
        .read_to_end(&mut body)
        .with_context(|| format!("reading {url}"))?;
    Ok(body)
}

/// Checks `bytes` (a gzipped IDX file) against the pinned checksums of file number `i`.
fn verify(dataset: Dataset, i: usize, bytes: &[u8]) -> Result<(), String> {
    let gz = md5_hex(bytes);
    if gz == dataset.md5s()[i] {
        return Ok(());
    }
    if let Some(content) = dataset.content_md5s() {
        let mut raw = Vec::new();
        if GzDecoder::new(bytes).read_to_end(&mut raw).is_ok() && md5_hex(&raw) == content[i] {
            return Ok(());
        }
    }
    Err(format!("checksum {gz}, expected {}", dataset.md5s()[i]))
}

/// Downloads every file into `out` (kept when already present with the right checksum).
/// With `mirror`, only that base URL is used.
pub(crate) fn fetch(dataset: Dataset, out: &Path, mirror: Option<&str>) -> Result<()> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let bases: Vec<String> = match mirror {
        Some(m) => vec![m.to_string()],
        None => dataset.mirrors().iter().map(|s| s.to_string()).collect(),
    };
    for (i, file) in FILES.iter().enumerate() {
        let dest = out.join(file);
        if let Ok(existing) = std::fs::read(&dest)
            && verify(dataset, i, &existing).is_ok()
        {
            eprintln!("{file}: present, checksum ok");
            continue;
        }
        let mut errors = Vec::new();
        let mut done = false;
        for base in &bases {
            let url = format!("{}/{file}", base.trim_end_matches('/'));
            match download(&url) {
                Ok(body) => {
                    if let Err(e) = verify(dataset, i, &body) {
                        errors.push(format!("{url}: {e}"));
                        continue;
                    }
                    crate::files::write_atomic(&dest, |w| {
                        w.write_all(&body)?;
                        Ok(())
                    })?;
                    eprintln!("{file}: downloaded from {url}, checksum ok");
                    done = true;
                    break;
                }
                Err(e) => errors.push(format!("{e:#}")),
            }
        }
        if !done {
            bail!("could not fetch {file}:\n  {}", errors.join("\n  "));
        }
    }
    Ok(())
}
