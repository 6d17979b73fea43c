//! How `CUDA_VISIBLE_DEVICES` was written, and which visible GPU each local rank should use.
//!
//! CUDA accepts a comma-separated list of device indices (`0,2`), GPU UUIDs (`GPU-8f1c...`,
//! unique prefixes allowed) or MIG instance UUIDs (`MIG-<uuid>` on newer drivers,
//! `MIG-GPU-<uuid>/<gi>/<ci>` on older ones). `-1`, `""` and `NoDevFiles` hide every GPU.
//! CUDA stops at the first entry it cannot parse; we keep such entries in `invalid` so the
//! report can point at them.

use serde::Serialize;

use super::vars::Vars;

/// One entry of `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "id", rename_all = "kebab-case")]
pub enum DeviceId {
    /// A device index, `0`.
    Index(u32),
    /// A whole-GPU UUID, `GPU-...`.
    GpuUuid(String),
    /// A MIG instance UUID, `MIG-...` (new or old form).
    MigUuid(String),
}

impl std::fmt::Display for DeviceId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceId::Index(i) => write!(f, "{i}"),
            DeviceId::GpuUuid(s) | DeviceId::MigUuid(s) => f.write_str(s),
        }
    }
}

/// How the list is written as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VisibleForm {
    /// Not set: every GPU of the machine is visible.
    Unset,
    /// Set to hide every GPU (`""`, `-1`, `NoDevFiles`).
    Hidden,
    /// Device indices.
    Indices,
    /// `GPU-` UUIDs.
    GpuUuids,
    /// `MIG-` UUIDs.
    MigUuids,
    /// More than one of the above in one list.
    Mixed,
}

/// `CUDA_VISIBLE_DEVICES` as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VisibleDevices {
    /// The raw value, if set.
    pub raw: Option<String>,
    /// How it is written.
    pub form: VisibleForm,
    /// Entries CUDA will use, in order (CUDA ordinal = position in this list).
    pub devices: Vec<DeviceId>,
    /// The first entry CUDA cannot parse and everything after it (CUDA ignores these).
    pub invalid: Vec<String>,
}

impl VisibleDevices {
    /// Reads `CUDA_VISIBLE_DEVICES` from `vars`.
    pub fn from_vars(vars: &Vars) -> Self {
        Self::parse(vars.get_raw("CUDA_VISIBLE_DEVICES"))
    }

    /// Parses a raw value (`None` = unset).
    pub fn parse(raw: Option<&str>) -> Self {
        let Some(raw) = raw else {
            return Self {
                raw: None,
                form: VisibleForm::Unset,
                devices: Vec::new(),
                invalid: Vec::new(),
            };
        };
        let mut devices = Vec::new();
        let mut invalid = Vec::new();
        let trimmed = raw.trim();
        if !(trimmed.is_empty() || trimmed == "NoDevFiles") {
            let entries: Vec<&str> = trimmed.split(',').map(str::trim).collect();
            for (i, e) in entries.iter().enumerate() {
                match parse_entry(e) {
                    Some(d) => devices.push(d),
                    None => {
                        // CUDA stops at the first bad entry; a negative index hides the rest silently.
                        if !e.starts_with('-') || i > 0 || e.parse::<i64>().is_err() {
                            invalid.extend(entries[i..].iter().map(|s| s.to_string()));
                        }
                        break;
                    }
                }
            }
        }
        let form = form_of(&devices);
        Self {
            raw: Some(raw.to_string()),
            form,
            devices,
            invalid,
        }
    }

    /// Number of GPUs CUDA will see, if the list restricts them (`None` when unset).
    pub fn count(&self) -> Option<usize> {
        match self.form {
            VisibleForm::Unset => None,
            _ => Some(self.devices.len()),
        }
    }

    /// Short description for reports: "indices 0,1", "MIG- UUIDs ...", "unset (all GPUs)".
    pub fn describe(&self) -> String {
        let list = self
            .devices
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut s = match self.form {
            VisibleForm::Unset => "unset (all GPUs visible)".to_string(),
            VisibleForm::Hidden => {
                format!("{:?} (hides every GPU)", self.raw.as_deref().unwrap_or(""))
            }
            VisibleForm::Indices => format!("indices {list}"),
            VisibleForm::GpuUuids => format!("GPU- UUIDs {list}"),
            VisibleForm::MigUuids => format!("MIG- UUIDs {list}"),
            VisibleForm::Mixed => format!("mixed entries {list}"),
        };
        if !self.invalid.is_empty() {
            s.push_str(&format!(
                "; CUDA ignores {:?} onwards (not an index or UUID)",
                self.invalid[0]
            ));
        }
        s
    }
}

fn parse_entry(e: &str) -> Option<DeviceId> {
    if let Ok(i) = e.parse::<u32>() {
        return Some(DeviceId::Index(i));
    }
    if e.starts_with("MIG-") && e.len() > 4 {
        return Some(DeviceId::MigUuid(e.to_string()));
    }
    if e.starts_with("GPU-") && e.len() > 4 {
        return Some(DeviceId::GpuUuid(e.to_string()));
    }
    None
}

fn form_of(devices: &[DeviceId]) -> VisibleForm {
    let mut kinds = devices.iter().map(|d| match d {
        DeviceId::Index(_) => VisibleForm::Indices,
        DeviceId::GpuUuid(_) => VisibleForm::GpuUuids,
        DeviceId::MigUuid(_) => VisibleForm::MigUuids,
    });
    match kinds.next() {
        None => VisibleForm::Hidden,
        Some(first) if kinds.all(|k| k == first) => first,
        Some(_) => VisibleForm::Mixed,
    }
}

/// The GPU one rank should use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceAssignment {
    /// CUDA device ordinal inside this process (what `--device cuda:N` / `CudaDevice::new(N)` takes).
    pub cuda_ordinal: u32,
    /// The `CUDA_VISIBLE_DEVICES` entry it maps to, if the list is set.
    pub visible_entry: Option<String>,
    /// Set when ranks on this node must share GPUs.
    pub note: Option<String>,
}

/// Maps a local rank to a visible GPU.
///
/// * one visible GPU (e.g. Slurm `--gpus-per-task=1`, which gives each task its own list):
///   ordinal 0 for every rank;
/// * at least as many visible GPUs as local ranks: ordinal = local rank;
/// * fewer: ordinal = local rank modulo the count, with a note that GPUs are shared;
/// * list unset: ordinal = local rank (CUDA sees the whole machine);
/// * every GPU hidden: no assignment (run on the CPU).
pub(crate) fn assign_device(
    visible: &VisibleDevices,
    local_rank: u32,
    local_world_size: u32,
) -> Option<DeviceAssignment> {
    let n = match visible.count() {
        None => {
            return Some(DeviceAssignment {
                cuda_ordinal: local_rank,
                visible_entry: None,
                note: None,
            });
        }
        Some(0) => return None,
        Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
    };
    let (ordinal, note) = if n == 1 {
        let note = (local_world_size > 1).then(|| {
            "one GPU visible to this rank: it uses cuda:0 (its own with --gpus-per-task=1, \
             otherwise shared by the node's ranks)"
                .to_string()
        });
        (0, note)
    } else if local_rank < n {
        let note = (local_world_size > n)
            .then(|| format!("{local_world_size} ranks share {n} visible GPUs on this node"));
        (local_rank, note)
    } else {
        (
            local_rank % n,
            Some(format!(
                "{local_world_size} ranks share {n} visible GPUs on this node"
            )),
        )
    };
    let entry = visible
        .devices
        .get(usize::try_from(ordinal).unwrap_or(usize::MAX))
        .map(ToString::to_string);
    Some(DeviceAssignment {
        cuda_ordinal: ordinal,
        visible_entry: entry,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices() {
        let v = VisibleDevices::parse(Some("0,2"));
        assert_eq!(v.form, VisibleForm::Indices);
        assert_eq!(v.devices, [DeviceId::Index(0), DeviceId::Index(2)]);
        assert!(v.describe().contains("indices 0,2"));
    }

    #[test]
    fn gpu_and_mig_uuids() {
        let g = VisibleDevices::parse(Some("GPU-8f1c2d3e-0000-1111-2222-333344445555"));
        assert_eq!(g.form, VisibleForm::GpuUuids);
        let m = VisibleDevices::parse(Some(
            "MIG-5c3a6f1e-1111-2222-3333-444455556666,MIG-GPU-8f1c2d3e-0000-1111-2222-333344445555/1/0",
        ));
        assert_eq!(m.form, VisibleForm::MigUuids);
        assert_eq!(m.devices.len(), 2);
        let mixed = VisibleDevices::parse(Some("0,MIG-abc"));
        assert_eq!(mixed.form, VisibleForm::Mixed);
    }

    #[test]
    fn hidden_and_unset() {
        assert_eq!(VisibleDevices::parse(None).form, VisibleForm::Unset);
        assert_eq!(VisibleDevices::parse(None).count(), None);
        for raw in ["", "-1", "NoDevFiles", " "] {
            let v = VisibleDevices::parse(Some(raw));
            assert_eq!(v.form, VisibleForm::Hidden, "{raw:?}");
            assert_eq!(v.count(), Some(0));
            assert!(v.invalid.is_empty(), "{raw:?}");
        }
    }

    #[test]
    fn cuda_stops_at_the_first_bad_entry() {
        let v = VisibleDevices::parse(Some("1,gpu2,3"));
        assert_eq!(v.devices, [DeviceId::Index(1)]);
        assert_eq!(v.invalid, ["gpu2", "3"]);
        assert!(v.describe().contains("gpu2"));
        let v = VisibleDevices::parse(Some("0,-1,2"));
        assert_eq!(v.devices, [DeviceId::Index(0)]);
    }

    #[test]
    fn assignment_rules() {
        let two = VisibleDevices::parse(Some("2,3"));
        let a = assign_device(&two, 1, 2).unwrap();
        assert_eq!((a.cuda_ordinal, a.visible_entry.as_deref()), (1, Some("3")));
        assert!(a.note.is_none());
        let one = VisibleDevices::parse(Some("5"));
        let a = assign_device(&one, 1, 2).unwrap();
        assert_eq!((a.cuda_ordinal, a.visible_entry.as_deref()), (0, Some("5")));
        let shared = assign_device(&two, 3, 4).unwrap();
        assert_eq!(shared.cuda_ordinal, 1);
        assert!(shared.note.is_some());
        assert_eq!(
            assign_device(&VisibleDevices::parse(None), 3, 4)
                .unwrap()
                .cuda_ordinal,
            3
        );
        assert!(assign_device(&VisibleDevices::parse(Some("-1")), 0, 1).is_none());
        let mig = VisibleDevices::parse(Some("MIG-aaaa"));
        assert_eq!(
            assign_device(&mig, 0, 1).unwrap().visible_entry.as_deref(),
            Some("MIG-aaaa")
        );
    }
}
