//! The keys of `[resources]`, named once, in one table (the invocation of `resource_table!`
//! below): each entry gives the key's `ResourceKey` variant and TOML name, its field of
//! [`Resources`] (kept in the manifest `sweep.json`) and its type, how its value is read and
//! shown back (a `Codec` of `codec.rs`: `Checked`, `Count`, `Mem`, `Time`, `List`), whether a
//! scheduler may have no directive for it, and its `sweep plan` flag (help text, spelling).
//! From the table come [`Resources`], [`ResourceKey`] with `ALL`, `name` and `is_optional`, the
//! dispatch of `Resources::set_key` and [`Resources::value`], and the flags, [`ResourceArgs`]
//! with its `pairs`. The spec's table, the manifest's read-back, `plan --missing`'s changes and
//! what a scheduler has a directive for
//! ([`crate::cluster::scheduler::Scheduler::has_directive`]) all go through them.
//!
//! **A new key is one entry in the table plus its directive lines** (`Scheduler::directives`
//! and, when it is optional, `has_directive`, in `slurm.rs`, `lsf.rs`, `gflow.rs`).

use serde::{Deserialize, Serialize};

use super::codec::{Checked, Codec, Count, Flag, List, Mem, Slot, Time};
use super::values::Kind;

/// Generates, from the table of keys: the struct [`Resources`] (one field each, serde as the
/// manifest reads and writes it), the enum [`ResourceKey`] with `ALL` (the table's order: the
/// docs', the messages', the manifest's changes'), `name` and `is_optional`, the dispatch of
/// `Resources::set_key` and [`Resources::value`] through each key's codec, and the clap
/// flags [`ResourceArgs`] (the entry's doc is the flag's help) with `pairs`.
macro_rules! resource_table {
    ($(
        $(#[doc = $doc:tt])*
        $Key:ident($key:ident) {
            field: $field:ident: $ty:ty,
            read: $codec:expr,
            optional: $optional:literal,
            flag: #[arg($($arg:tt)*)] $flag:ident<String>,
        }
    )*) => {
        /// A sweep's queue resources, checked and normalised.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(default)]
        pub struct Resources {
            $(pub $field: $ty,)*
        }

        /// A key of `[resources]`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ResourceKey {
            $($(#[doc = $doc])* $Key,)*
        }

        impl ResourceKey {
            /// Every key, in the order of the docs, the messages and the manifest's changes.
            pub const ALL: [ResourceKey; [$(stringify!($key)),*].len()] =
                [$(ResourceKey::$Key),*];

            /// The key as written in `[resources]` (`gpu_type`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ResourceKey::$Key => stringify!($key),)*
                }
            }

            /// Whether a scheduler may have no directive for it (every scheduler takes the
            /// others, or the task script handles them).
            pub fn is_optional(self) -> bool {
                match self {
                    $(ResourceKey::$Key => $optional,)*
                }
            }
        }

        impl Resources {
            /// Sets `k` from a TOML value through its codec: [`Resources::set`] of a known key.
            pub(super) fn set_key(&mut self, k: ResourceKey, v: &toml::Value) -> anyhow::Result<()> {
                let key = k.name();
                match k {
                    $(ResourceKey::$Key => self.$field = Slot::fill($codec.read(key, v)?),)*
                }
                Ok(())
            }

            /// The value of `key` when it is set, as [`Resources::set`] reads it back to the
            /// same field (memory in MB, a time limit as `D-HH:MM:SS`, a list only when not
            /// empty).
            pub fn value(&self, key: ResourceKey) -> Option<toml::Value> {
                match key {
                    $(ResourceKey::$Key => self.$field.item().map(|x| $codec.show(x)),)*
                }
            }
        }

        /// The queue resources of every task, over the spec's `[resources]` (same names and forms).
        #[derive(clap::Args, Debug, Default)]
        #[command(next_help_heading = "Queue resources (over the spec's [resources])")]
        pub struct ResourceArgs {
            $(
                $(#[doc = $doc])*
                #[arg($($arg)*)]
                pub $key: $flag<String>,
            )*
        }

        impl ResourceArgs {
            /// The flags given, as `[resources]` keys and values, in [`ResourceKey::ALL`] order.
            pub fn pairs(self) -> Vec<(&'static str, toml::Value)> {
                let mut out = Vec::new();
                $(
                    if let Some(v) = Flag::given(self.$key) {
                        out.push((ResourceKey::$Key.name(), v));
                    }
                )*
                out
            }
        }
    };
}

// The keys. An entry: its doc (the `sweep plan` flag's help), `Variant(toml_name)`, the field of
// `Resources` and its type, its codec, whether a scheduler may lack a directive, the flag.
resource_table! {
    /// Slurm partition / LSF queue.
    Partition(partition) {
        field: partition: Option<String>,
        read: Checked(Kind::Name),
        optional: true,
        flag: #[arg(long)] Option<String>,
    }
    /// GPUs per task (Slurm --gres=gpu:N, LSF -gpu num=N, gflow --gpus); the tasks then run
    /// the GPU preflight first. 0: the tasks run on the CPU (--device cpu), and a GPU type or
    /// MIG profile under the flags (the spec's, the sweep's on --missing) is dropped.
    Gpus(gpus) {
        field: gpus: Option<u32>,
        // 0 is said, not left out: the tasks run on the CPU (`--device cpu`).
        read: Count(0, 64),
        optional: false,
        flag: #[arg(long)] Option<String>,
    }
    /// GPU type (Slurm --gres=gpu:TYPE:N, LSF gmodel=TYPE); needs GPUs (--gpus 1 or more).
    GpuType(gpu_type) {
        field: gpu_type: Option<String>,
        read: Checked(Kind::Name),
        optional: true,
        flag: #[arg(long)] Option<String>,
    }
    /// MIG profile (LSF -gpu "…:mig=PROFILE"); needs GPUs (--gpus 1 or more).
    Mig(mig) {
        field: mig: Option<String>,
        read: Checked(Kind::Name),
        optional: true,
        flag: #[arg(long)] Option<String>,
    }
    /// CPUs per task (1 or more).
    Cpus(cpus) {
        field: cpus: Option<u32>,
        // At least one: `--cpus-per-task=0` / `-n 0` is refused by the schedulers.
        read: Count(1, 4096),
        optional: true,
        flag: #[arg(long)] Option<String>,
    }
    /// Memory per task (MB, or 500M, 32G, 1T).
    Mem(mem) {
        field: mem_mb: Option<u64>,
        read: Mem,
        optional: false,
        flag: #[arg(long)] Option<String>,
    }
    /// Time limit (minutes, HH:MM:SS, `D-HH[:MM[:SS]]`); the checkpoint signal's margin follows it.
    Time(time) {
        field: time_secs: Option<u64>,
        read: Time,
        optional: false,
        flag: #[arg(long)] Option<String>,
    }
    Account(account) {
        field: account: Option<String>,
        read: Checked(Kind::Name),
        optional: false,
        flag: #[arg(long)] Option<String>,
    }
    Qos(qos) {
        field: qos: Option<String>,
        read: Checked(Kind::Name),
        optional: true,
        flag: #[arg(long)] Option<String>,
    }
    Constraint(constraint) {
        field: constraint: Option<String>,
        read: Checked(Kind::Constraint),
        optional: true,
        flag: #[arg(long)] Option<String>,
    }
    /// Container image: tasks run `singularity exec --nv IMAGE trainer`.
    Image(image) {
        field: image: Option<String>,
        read: Checked(Kind::Path { comma: true }),
        optional: false,
        flag: #[arg(long)] Option<String>,
    }
    /// Bind mounts of the container (repeat the flag, or a comma-separated list).
    Binds(binds) {
        field: binds: Vec<String>,
        read: List(Kind::Path { comma: false }),
        optional: false,
        flag: #[arg(long = "bind", value_delimiter = ',')] Vec<String>,
    }
    /// `module load` before each task (repeat the flag).
    Modules(modules) {
        field: modules: Vec<String>,
        read: List(Kind::Module),
        optional: false,
        flag: #[arg(long = "module")] Vec<String>,
    }
    /// A further directive line, as written (`--extra=--exclusive`; repeat the flag).
    Extra(extra) {
        field: extra: Vec<String>,
        read: List(Kind::Line),
        optional: true,
        flag: #[arg(long = "extra", allow_hyphen_values = true)] Vec<String>,
    }
}

impl ResourceKey {
    /// The key named `name`.
    pub fn from_name(name: &str) -> Option<ResourceKey> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The names of every key: `partition, gpus, …`.
    pub fn names() -> String {
        Self::ALL.map(Self::name).join(", ")
    }
}

impl std::fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
