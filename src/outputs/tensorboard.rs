//! TensorBoard event files: `<run>/tensorboard/[<stage>/]events.out.tfevents.<t0>.trainer`, one
//! scalar per numeric metrics column and epoch, so `tensorboard --logdir RUN_OR_SWEEP_DIR` shows
//! a run (or every run of a sweep) while it trains.
//!
//! The files are rebuilt from `metrics.jsonl` at every epoch's end, written to a staging name
//! (without "tfevents", which TensorBoard would load) and renamed: a killed or resumed run never
//! leaves a torn or duplicated record. The bytes are a function of the rows and the run's start
//! time (`run_meta.json`'s `created_at`, plus the cumulative epoch seconds as each row's wall
//! time), so a rebuilt file starts with the same bytes as the one a live TensorBoard has read.
//!
//! A run keeps one event stream per stage across resumes: the start time is the one of the
//! event files already there (a resumed run rewrites `run_meta.json`, and with it
//! `created_at`), so a resumed run extends its file instead of starting a second one; other
//! event files of ours in the folder (a second stream an older version started) are removed;
//! and a stage's steps only go up (rows of epochs a resume trained again replace the earlier
//! ones).
//!
//! The format: TFRecord framing (length, masked CRC-32C of the length, an `Event` protocol
//! buffer, masked CRC-32C of it), the first event carrying `file_version`, the others a
//! `Summary` of `simple_value`s. Protocol buffers are written by hand: five fields.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use super::curves::stage_of;
use super::metrics_row::{EPOCH, EPOCH_STEPS, EVAL_SECONDS, IS_BEST, MetricsRow, SECONDS, STEPS};
use super::run_files::TENSORBOARD_DIR;

/// Columns that are not scalars of the run (the x axis, flags, counters of the position).
const NOT_SCALARS: &[&str] = &[EPOCH, IS_BEST, STEPS, EPOCH_STEPS];

/// Rewrites the run's event files from its metrics rows.
pub(crate) fn write(run_dir: &Path, rows: &[MetricsRow]) -> Result<()> {
    let root = run_dir.join(TENSORBOARD_DIR);
    let t0 = first_stream(&root).unwrap_or_else(|| start_time(run_dir));
    let name = format!("{EVENTS_PREFIX}{}{EVENTS_SUFFIX}", t0 as u64);
    for (stage, rows) in by_stage(rows) {
        let dir = if stage.is_empty() {
            root.clone()
        } else {
            root.join(folder_name(&stage))
        };
        let bytes = event_file(t0, &one_stream(rows));
        replace(&dir, &name, &bytes)?;
        for other in streams(&dir).into_iter().filter(|(_, n)| *n != name) {
            let path = dir.join(&other.1);
            std::fs::remove_file(&path)
                .with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    Ok(())
}

/// Our event files: `events.out.tfevents.<start time>.trainer`.
const EVENTS_PREFIX: &str = "events.out.tfevents.";
const EVENTS_SUFFIX: &str = ".trainer";

/// Our event files in `dir`: (start time, file name).
fn streams(dir: &Path) -> Vec<(u64, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let t0 = name
                .strip_prefix(EVENTS_PREFIX)?
                .strip_suffix(EVENTS_SUFFIX)?
                .parse()
                .ok()?;
            Some((t0, name))
        })
        .collect()
}

/// The start time of the run's first event stream, when it has one (in `root` or a stage's
/// folder): the time a resumed run keeps.
fn first_stream(root: &Path) -> Option<f64> {
    let mut dirs = vec![root.to_path_buf()];
    if let Ok(entries) = std::fs::read_dir(root) {
        let sub = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()));
        dirs.extend(sub.map(|e| e.path()));
    }
    let first = dirs
        .iter()
        .flat_map(|d| streams(d))
        .map(|(t0, _)| t0)
        .min()?;
    Some(first as f64)
}

/// A stage's rows as one stream of increasing steps: a row whose epoch is not past the last
/// one's (an epoch a resume from an earlier checkpoint trained again) replaces the rows from
/// its epoch on.
fn one_stream(rows: Vec<&MetricsRow>) -> Vec<&MetricsRow> {
    let step = |r: &MetricsRow| r.get(EPOCH).and_then(Value::as_i64).unwrap_or(0);
    let mut out: Vec<&MetricsRow> = Vec::with_capacity(rows.len());
    for row in rows {
        while out.last().is_some_and(|last| step(last) >= step(row)) {
            out.pop();
        }
        out.push(row);
    }
    out
}

/// The rows of each stage (the values of the columns before `epoch`), in order of appearance.
fn by_stage(rows: &[MetricsRow]) -> Vec<(String, Vec<&MetricsRow>)> {
    let mut groups: Vec<(String, Vec<&MetricsRow>)> = Vec::new();
    for row in rows {
        let stage = stage_of(row);
        match groups.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, g)) => g.push(row),
            None => groups.push((stage, vec![row])),
        }
    }
    groups
}

/// "fold 0" → "fold_0": a folder name TensorBoard shows as the run's name.
fn folder_name(stage: &str) -> String {
    stage
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Seconds since the epoch at the run's start: `run_meta.json`'s `created_at`, or 0 when the
/// file is missing or unreadable (the curves are the same; only TensorBoard's wall-time axis
/// starts at 1970).
fn start_time(run_dir: &Path) -> f64 {
    let meta = super::RunDir::new(run_dir).run_meta_json();
    std::fs::read_to_string(meta)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("created_at")?.as_str().map(str::to_owned))
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s).ok())
        .map_or(0.0, |t| t.timestamp() as f64)
}

/// The bytes of one event file: the version event, then one event per row.
fn event_file(t0: f64, rows: &[&MetricsRow]) -> Vec<u8> {
    let mut out = Vec::new();
    record(&mut out, &event(t0, 0, Payload::Version("brain.Event:2")));
    let mut wall = t0;
    for row in rows {
        wall += [SECONDS, EVAL_SECONDS]
            .iter()
            .filter_map(|c| row.number(c))
            .filter(|s| s.is_finite() && *s >= 0.0)
            .sum::<f64>();
        let step = row.get(EPOCH).and_then(Value::as_i64).unwrap_or(0);
        let stage_columns = row.stage_columns().count();
        let scalars: Vec<(&str, f32)> = row
            .iter()
            .skip(stage_columns)
            .filter(|(k, _)| !NOT_SCALARS.contains(&k.as_str()))
            .filter_map(|(k, v)| Some((k.as_str(), v.as_f64()? as f32)))
            .filter(|(_, v)| v.is_finite())
            .collect();
        if !scalars.is_empty() {
            record(&mut out, &event(wall, step, Payload::Scalars(&scalars)));
        }
    }
    out
}

enum Payload<'a> {
    Version(&'a str),
    Scalars(&'a [(&'a str, f32)]),
}

/// An `Event` message: wall_time (1, double), step (2, int64), file_version (3, string) or
/// summary (5, `Summary { repeated Value value = 1 }`, `Value { tag = 1; simple_value = 2 }`).
fn event(wall_time: f64, step: i64, payload: Payload) -> Vec<u8> {
    let mut e = vec![0x09];
    e.extend_from_slice(&wall_time.to_le_bytes());
    e.push(0x10);
    varint(&mut e, step as u64);
    match payload {
        Payload::Version(v) => bytes_field(&mut e, 3, v.as_bytes()),
        Payload::Scalars(scalars) => {
            let mut summary = Vec::new();
            for (tag, value) in scalars {
                let mut v = Vec::new();
                bytes_field(&mut v, 1, tag.as_bytes());
                v.push(0x15);
                v.extend_from_slice(&value.to_le_bytes());
                bytes_field(&mut summary, 1, &v);
            }
            bytes_field(&mut e, 5, &summary);
        }
    }
    e
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (wire type 2).
fn bytes_field(out: &mut Vec<u8>, field: u8, bytes: &[u8]) {
    out.push((field << 3) | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

const CRC32C: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// TFRecord's masked CRC-32C.
fn masked_crc(bytes: &[u8]) -> u32 {
    let c = CRC32C.checksum(bytes);
    c.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord: length, its masked CRC, the data, its masked CRC.
fn record(out: &mut Vec<u8>, data: &[u8]) {
    let len = (data.len() as u64).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
}

/// Writes `bytes` to `dir/name` through a staging file TensorBoard does not read, then renames.
fn replace(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path: PathBuf = dir.join(name);
    let tmp = dir.join(format!(".staging.{}", std::process::id()));
    let result = (|| -> Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_matches_tensorflow_for_a_known_record() {
        // CRC-32C("123456789") = 0xE3069283 (the Castagnoli check value); the mask of an empty
        // record's CRC (0) is TFRecord's constant.
        assert_eq!(CRC32C.checksum(b"123456789"), 0xE306_9283);
        assert_eq!(masked_crc(b""), 0xa282_ead8);
    }

    #[test]
    fn stages_get_folders_and_rebuilt_files_extend_the_old_bytes() {
        let rows: Vec<MetricsRow> = [
            serde_json::json!({"fold": 0, "epoch": 1, "train_loss": 2.0, "seconds": 1.5}),
            serde_json::json!({"fold": 0, "epoch": 2, "train_loss": 1.0, "seconds": 1.5}),
            serde_json::json!({"fold": 1, "epoch": 1, "train_loss": 3.0, "is_best": true}),
        ]
        .iter()
        .map(|v| MetricsRow::from(v.as_object().unwrap().clone()))
        .collect();
        let groups = by_stage(&rows);
        assert_eq!(groups.len(), 2);
        assert_eq!(folder_name(&groups[0].0), "fold_0");
        let one = event_file(100.0, &groups[0].1[..1]);
        let two = event_file(100.0, &groups[0].1);
        assert!(two.starts_with(&one) && two.len() > one.len());
        // The flag column is not a scalar; the fold column (the stage) is not one either.
        let fold1 = event_file(0.0, &groups[1].1);
        let text = String::from_utf8_lossy(&fold1);
        assert!(text.contains("train_loss") && !text.contains("is_best") && !text.contains("fold"));
    }

    fn rows(v: &[serde_json::Value]) -> Vec<MetricsRow> {
        v.iter()
            .map(|v| MetricsRow::from(v.as_object().unwrap().clone()))
            .collect()
    }

    #[test]
    fn epochs_trained_again_replace_the_earlier_rows() {
        let rows = rows(&[1, 2, 3, 2, 3, 4].map(|e| serde_json::json!({"epoch": e, "x": e})));
        let stream = one_stream(rows.iter().collect());
        let steps: Vec<i64> = stream
            .iter()
            .map(|r| r["epoch"].as_i64().unwrap())
            .collect();
        assert_eq!(steps, [1, 2, 3, 4]);
        assert!(
            std::ptr::eq(stream[1], &rows[3]),
            "the later row of epoch 2"
        );
    }

    /// A resumed run (another `created_at` in `run_meta.json`) keeps its first file and its start
    /// time, and a second stream an older version left is removed.
    #[test]
    fn a_resumed_run_extends_its_first_stream() {
        let t = tempfile::tempdir().unwrap();
        let meta = |at: &str| {
            let json = serde_json::json!({ "created_at": at }).to_string();
            std::fs::write(t.path().join("run_meta.json"), json).unwrap();
        };
        let all =
            rows(&[1, 2, 3].map(|e| serde_json::json!({"epoch": e, "loss": 1.0, "seconds": 2.0})));
        meta("2024-01-01T00:00:00+00:00");
        write(t.path(), &all[..1]).unwrap();
        let root = t.path().join(TENSORBOARD_DIR);
        let first = streams(&root);
        assert_eq!(first.len(), 1);
        let before = std::fs::read(root.join(&first[0].1)).unwrap();
        std::fs::write(root.join("events.out.tfevents.1800000000.trainer"), b"old").unwrap();
        meta("2024-06-01T00:00:00+00:00");
        write(t.path(), &all).unwrap();
        assert_eq!(streams(&root), first, "one stream, the first one's name");
        let after = std::fs::read(root.join(&first[0].1)).unwrap();
        assert!(after.starts_with(&before) && after.len() > before.len());
        assert_eq!(
            after,
            event_file(first[0].0 as f64, &all.iter().collect::<Vec<_>>())
        );
    }
}
