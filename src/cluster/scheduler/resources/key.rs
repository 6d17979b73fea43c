//! The keys of `[resources]`, named once: the spec's table, the `sweep plan` flags of the same
//! names, the manifest's read-back, `plan --missing`'s changes and what a scheduler has a
//! directive for ([`crate::cluster::scheduler::Scheduler::has_directive`]).

/// A key of `[resources]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKey {
    Partition,
    Gpus,
    GpuType,
    Mig,
    Cpus,
    Mem,
    Time,
    Account,
    Qos,
    Constraint,
    Image,
    Binds,
    Modules,
    Extra,
}

impl ResourceKey {
    /// Every key, in the order of the docs, the messages and the manifest's changes.
    pub const ALL: [ResourceKey; 14] = [
        ResourceKey::Partition,
        ResourceKey::Gpus,
        ResourceKey::GpuType,
        ResourceKey::Mig,
        ResourceKey::Cpus,
        ResourceKey::Mem,
        ResourceKey::Time,
        ResourceKey::Account,
        ResourceKey::Qos,
        ResourceKey::Constraint,
        ResourceKey::Image,
        ResourceKey::Binds,
        ResourceKey::Modules,
        ResourceKey::Extra,
    ];

    /// The key as written in `[resources]` (`gpu_type`).
    pub const fn name(self) -> &'static str {
        match self {
            ResourceKey::Partition => "partition",
            ResourceKey::Gpus => "gpus",
            ResourceKey::GpuType => "gpu_type",
            ResourceKey::Mig => "mig",
            ResourceKey::Cpus => "cpus",
            ResourceKey::Mem => "mem",
            ResourceKey::Time => "time",
            ResourceKey::Account => "account",
            ResourceKey::Qos => "qos",
            ResourceKey::Constraint => "constraint",
            ResourceKey::Image => "image",
            ResourceKey::Binds => "binds",
            ResourceKey::Modules => "modules",
            ResourceKey::Extra => "extra",
        }
    }

    /// The key named `name`.
    pub fn from_name(name: &str) -> Option<ResourceKey> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Whether a scheduler may have no directive for it (every scheduler takes the others, or
    /// the task script handles them).
    pub fn is_optional(self) -> bool {
        matches!(
            self,
            ResourceKey::Partition
                | ResourceKey::GpuType
                | ResourceKey::Mig
                | ResourceKey::Cpus
                | ResourceKey::Qos
                | ResourceKey::Constraint
                | ResourceKey::Extra
        )
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
