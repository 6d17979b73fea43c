//! MNIST-format datasets (MNIST, Fashion-MNIST): four IDX files in one directory.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use super::idx;

pub(crate) const ROWS: usize = 28;
pub(crate) const COLS: usize = 28;
pub(crate) const PIXELS: usize = ROWS * COLS;
pub(crate) const CLASSES: usize = 10;
/// Normalisation of PyTorch's examples/mnist recipe.
pub(crate) const MEAN: f32 = 0.1307;
pub(crate) const STD: f32 = 0.3081;

/// One split: images as bytes (row-major 28×28 each) and labels 0..9.
#[derive(Debug, Clone)]
pub(crate) struct MnistSplit {
    pub images: Vec<u8>,
    pub labels: Vec<u8>,
}

impl MnistSplit {
    pub(crate) fn len(&self) -> usize {
        self.labels.len()
    }

    /// Keeps only the first `n` examples.
    pub(crate) fn truncate(&mut self, n: usize) {
        if n < self.len() {
            self.labels.truncate(n);
            self.images.truncate(n * PIXELS);
        }
    }

    /// Normalised pixels and labels of the examples at `indices`, ready for a tensor.
    pub(crate) fn batch(&self, indices: &[usize]) -> (Vec<f32>, Vec<i64>) {
        let mut x = Vec::with_capacity(indices.len() * PIXELS);
        let mut y = Vec::with_capacity(indices.len());
        for &i in indices {
            let img = &self.images[i * PIXELS..(i + 1) * PIXELS];
            x.extend(img.iter().map(|&p| (p as f32 / 255.0 - MEAN) / STD));
            y.push(self.labels[i] as i64);
        }
        (x, y)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    Train,
    Test,
}

impl Split {
    fn prefix(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Test => "t10k",
        }
    }
}

/// Finds `<prefix>-<kind>-idx<rank>-ubyte` or `<prefix>-<kind>.idx<rank>-ubyte`, optionally `.gz`.
fn find_file(dir: &Path, split: Split, kind: &str, rank: usize) -> Result<PathBuf> {
    let p = split.prefix();
    let names = [
        format!("{p}-{kind}-idx{rank}-ubyte"),
        format!("{p}-{kind}.idx{rank}-ubyte"),
    ];
    for name in &names {
        for suffix in ["", ".gz"] {
            let path = dir.join(format!("{name}{suffix}"));
            if path.is_file() {
                return Ok(path);
            }
        }
    }
    bail!(
        "missing file: none of {}[.gz] or {}[.gz] in {}",
        names[0],
        names[1],
        dir.display()
    )
}

/// Loads one split from `dir`, checking magic numbers, dimensions, counts and label range.
pub(crate) fn load_split(dir: &Path, split: Split) -> Result<MnistSplit> {
    if !dir.is_dir() {
        bail!(
            "data directory {} does not exist or is not a directory",
            dir.display()
        );
    }
    let img_path = find_file(dir, split, "images", 3)?;
    let lbl_path = find_file(dir, split, "labels", 1)?;
    let images = idx::read_u8(&img_path, 3)?;
    let labels = idx::read_u8(&lbl_path, 1)?;
    if images.dims[1] != ROWS || images.dims[2] != COLS {
        bail!(
            "{}: images are {}x{}, expected {ROWS}x{COLS}",
            img_path.display(),
            images.dims[1],
            images.dims[2]
        );
    }
    if images.dims[0] != labels.dims[0] {
        bail!(
            "image/label count mismatch: {} has {} images but {} has {} labels",
            img_path.display(),
            images.dims[0],
            lbl_path.display(),
            labels.dims[0]
        );
    }
    if let Some((i, l)) = labels
        .data
        .iter()
        .enumerate()
        .find(|(_, l)| **l as usize >= CLASSES)
    {
        bail!(
            "{}: label {l} at index {i} is out of range (expected 0..{})",
            lbl_path.display(),
            CLASSES - 1
        );
    }
    if labels.data.is_empty() {
        bail!("{}: no examples", lbl_path.display());
    }
    Ok(MnistSplit {
        images: images.data,
        labels: labels.data,
    })
}
