//! Checkpoints as safetensors files: named F32 tensors (`model.*`, `optim.*`), I64 counters
//! (`train.*`, `rng.*`) and F64 accumulators, plus string metadata. Readable with Python's
//! `safetensors` package. Written to a temporary name, synced, then renamed: a reader never sees
//! a half-written file, even when the process is killed mid-write.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use super::params::HostTensor;
use crate::files::write_atomic;

/// Identifies our checkpoints (metadata key `format`).
pub(crate) const FORMAT: &str = "trainer-checkpoint/1";

/// The prefix of the model's weights (`model.<parameter name>`) and the metadata key of the
/// model's name, in every checkpoint and model file.
const MODEL: &str = "model";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checkpoint {
    pub floats: BTreeMap<String, HostTensor>,
    pub counters: BTreeMap<String, i64>,
    pub reals: BTreeMap<String, f64>,
    pub metadata: BTreeMap<String, String>,
}

impl Checkpoint {
    pub fn counter(&self, name: &str) -> Result<i64> {
        self.counters
            .get(name)
            .copied()
            .with_context(|| format!("checkpoint has no counter `{name}`"))
    }

    pub fn real(&self, name: &str) -> Result<f64> {
        self.reals
            .get(name)
            .copied()
            .with_context(|| format!("checkpoint has no value `{name}`"))
    }

    /// The tensors under `prefix.` with the prefix removed (e.g. the model's parameters).
    pub fn with_prefix(&self, prefix: &str) -> BTreeMap<String, HostTensor> {
        let p = format!("{prefix}.");
        self.floats
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(&p).map(|k| (k.to_string(), v.clone())))
            .collect()
    }

    /// The model's weights (the tensors under `model.`, by parameter name).
    pub fn model(&self) -> BTreeMap<String, HostTensor> {
        self.with_prefix(MODEL)
    }

    /// Adds the model's weights under `model.`.
    pub fn put_model(&mut self, weights: impl IntoIterator<Item = (String, HostTensor)>) {
        for (name, t) in weights {
            self.floats.insert(format!("{MODEL}.{name}"), t);
        }
    }

    /// The name of the model that wrote the file (metadata `model`).
    pub fn model_name(&self) -> Option<&str> {
        self.metadata.get(MODEL).map(String::as_str)
    }

    /// Records the model's name (metadata `model`).
    pub fn set_model_name(&mut self, name: &str) {
        self.metadata.insert(MODEL.into(), name.into());
    }

    /// Serialises to safetensors bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut buffers: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        for (k, t) in &self.floats {
            let bytes = t.data.iter().flat_map(|x| x.to_le_bytes()).collect();
            buffers.push((k.clone(), Dtype::F32, t.shape.clone(), bytes));
        }
        for (k, v) in &self.counters {
            buffers.push((k.clone(), Dtype::I64, vec![], v.to_le_bytes().to_vec()));
        }
        for (k, v) in &self.reals {
            buffers.push((k.clone(), Dtype::F64, vec![], v.to_le_bytes().to_vec()));
        }
        let views = buffers
            .iter()
            .map(|(k, dtype, shape, bytes)| {
                Ok((k.clone(), TensorView::new(*dtype, shape.clone(), bytes)?))
            })
            .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
        let mut meta: HashMap<String, String> = self.metadata.clone().into_iter().collect();
        meta.insert("format".into(), FORMAT.into());
        Ok(safetensors::serialize(views, Some(meta))?)
    }

    /// Parses safetensors bytes written by [`Checkpoint::to_bytes`].
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Self> {
        let name = path.display();
        let st = SafeTensors::deserialize(bytes)
            .with_context(|| format!("{name}: not a valid safetensors file"))?;
        let (_, meta) = SafeTensors::read_metadata(bytes)
            .with_context(|| format!("{name}: unreadable safetensors header"))?;
        let metadata: BTreeMap<String, String> = meta
            .metadata()
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect();
        if metadata.get("format").map(String::as_str) != Some(FORMAT) {
            bail!("{name}: not a trainer checkpoint (metadata `format` is not {FORMAT})");
        }
        let mut ck = Checkpoint {
            metadata,
            ..Default::default()
        };
        for (k, view) in st.tensors() {
            let data = view.data();
            match view.dtype() {
                Dtype::F32 => {
                    let v: Vec<f32> = data
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect();
                    // NaN/inf weights (a diverged run, a damaged file) would resume or score
                    // silently as garbage: refused here, for every reader.
                    if let Some(i) = v.iter().position(|x| !x.is_finite()) {
                        let bad = v.iter().filter(|x| !x.is_finite()).count();
                        bail!(
                            "{name}: tensor `{k}` holds {bad} non-finite value(s) of {} (the first, \
                             {}, at flat index {i}): a checkpoint's weights and optimiser state \
                             must be finite (the run that wrote it diverged, or the file is \
                             damaged); use an earlier checkpoint",
                            v.len(),
                            v[i]
                        );
                    }
                    ck.floats.insert(
                        k,
                        HostTensor {
                            shape: view.shape().to_vec(),
                            data: v,
                        },
                    );
                }
                Dtype::I64 if data.len() == 8 => {
                    ck.counters.insert(k, i64::from_le_bytes(data.try_into()?));
                }
                Dtype::F64 if data.len() == 8 => {
                    ck.reals.insert(k, f64::from_le_bytes(data.try_into()?));
                }
                other => bail!("{name}: tensor `{k}` has unexpected dtype {other:?} or shape"),
            }
        }
        Ok(ck)
    }

    /// Writes atomically (temporary file, fsync, rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_bytes()?;
        write_atomic(path, |w| {
            w.write_all(&bytes)?;
            Ok(())
        })
    }

    /// The metadata of the checkpoint at `path`, read from its header alone (the tensors are
    /// not read: a resume checkpoint may be gigabytes); a file that is not a trainer checkpoint
    /// is an error naming it.
    pub fn read_metadata(path: &Path) -> Result<BTreeMap<String, String>> {
        use std::io::Read;
        let name = path.display();
        let mut file =
            std::fs::File::open(path).with_context(|| format!("cannot read checkpoint {name}"))?;
        let mut len = [0u8; 8];
        file.read_exact(&mut len)
            .with_context(|| format!("{name}: not a valid safetensors file (no header)"))?;
        let len = u64::from_le_bytes(len);
        // safetensors' own limit on a header.
        if len > 100_000_000 {
            bail!("{name}: not a valid safetensors file (a header of {len} bytes)");
        }
        let mut header = vec![0u8; len as usize];
        file.read_exact(&mut header)
            .with_context(|| format!("{name}: not a valid safetensors file (short header)"))?;
        let header: serde_json::Value = serde_json::from_slice(&header)
            .with_context(|| format!("{name}: unreadable safetensors header"))?;
        let metadata: BTreeMap<String, String> = header
            .get("__metadata__")
            .and_then(|m| m.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        if metadata.get("format").map(String::as_str) != Some(FORMAT) {
            bail!("{name}: not a trainer checkpoint (metadata `format` is not {FORMAT})");
        }
        Ok(metadata)
    }

    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read checkpoint {}", path.display()))?;
        Self::from_bytes(&bytes, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut ck = Checkpoint::default();
        let w = HostTensor {
            shape: vec![2, 2],
            data: vec![1.0, 2.0, 3.0, 4.5],
        };
        ck.put_model([("w".to_string(), w.clone())]);
        ck.counters.insert("train.epoch".into(), 3);
        ck.reals.insert("train.loss_sum".into(), 0.1 + 0.2);
        ck.set_model_name("x");
        let bytes = ck.to_bytes().unwrap();
        let mut back = Checkpoint::from_bytes(&bytes, Path::new("c")).unwrap();
        back.metadata.remove("format");
        assert_eq!(back, ck);
        assert!(back.floats.contains_key("model.w"));
        assert_eq!(back.model(), BTreeMap::from([("w".to_string(), w)]));
        assert_eq!(back.model_name(), Some("x"));
    }

    #[test]
    fn refuses_non_finite_weights_naming_file_and_tensor() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut ck = Checkpoint::default();
            ck.floats.insert(
                "model.conv.weight".into(),
                HostTensor {
                    shape: vec![3],
                    data: vec![1.0, bad, bad],
                },
            );
            let bytes = ck.to_bytes().unwrap();
            let err = Checkpoint::from_bytes(&bytes, Path::new("run/checkpoints/last.safetensors"))
                .unwrap_err()
                .to_string();
            for needle in [
                "run/checkpoints/last.safetensors",
                "`model.conv.weight`",
                "2 non-finite value(s) of 3",
                "flat index 1",
            ] {
                assert!(err.contains(needle), "{needle}: {err}");
            }
        }
    }

    #[test]
    fn metadata_reads_from_the_header_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.safetensors");
        let mut ck = Checkpoint::default();
        ck.put_model([(
            "w".to_string(),
            HostTensor {
                shape: vec![2],
                data: vec![1.0, 2.0],
            },
        )]);
        ck.metadata.insert("run_state".into(), "{}".into());
        ck.save(&path).unwrap();
        let meta = Checkpoint::read_metadata(&path).unwrap();
        assert_eq!(meta.get("run_state").map(String::as_str), Some("{}"));
        assert_eq!(meta.get("format").map(String::as_str), Some(FORMAT));
        std::fs::write(&path, b"short").unwrap();
        let e = Checkpoint::read_metadata(&path).unwrap_err();
        assert!(
            format!("{e:#}").contains("not a valid safetensors file"),
            "{e:#}"
        );
    }

    #[test]
    fn rejects_foreign_files() {
        assert!(Checkpoint::from_bytes(b"garbage", Path::new("c")).is_err());
    }
}
