//! The checkpoint keys of the optimisers' state, spelled once: `optim.<optimiser>.<state>.<param
//! name>` (`optim.adam.moment_1.conv1.weight`, `optim.sgd.momentum_buffer.fc2.bias`). A resume
//! file, the PyTorch reference's goldens and the tests read them through these functions.

/// The state of one optimiser in a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateKey {
    /// Adam's first moment (F32).
    AdamMoment1,
    /// Adam's second moment (F32).
    AdamMoment2,
    /// Adam's step count (I64 counter).
    AdamTime,
    /// SGD's momentum buffer (F32).
    SgdMomentum,
}

/// The prefix of Adam's keys.
pub const ADAM: &str = "optim.adam.";
/// The prefix of SGD's keys.
pub const SGD: &str = "optim.sgd.";

impl StateKey {
    /// The key of this state of parameter `name`.
    pub fn of(self, name: &str) -> String {
        let (prefix, state) = match self {
            StateKey::AdamMoment1 => (ADAM, "moment_1"),
            StateKey::AdamMoment2 => (ADAM, "moment_2"),
            StateKey::AdamTime => (ADAM, "time"),
            StateKey::SgdMomentum => (SGD, "momentum_buffer"),
        };
        format!("{prefix}{state}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_as_the_files_written_before_them() {
        assert_eq!(StateKey::AdamMoment1.of("w"), "optim.adam.moment_1.w");
        assert_eq!(StateKey::AdamMoment2.of("a.b"), "optim.adam.moment_2.a.b");
        assert_eq!(
            StateKey::AdamTime.of("fc2.bias"),
            "optim.adam.time.fc2.bias"
        );
        assert_eq!(StateKey::SgdMomentum.of("w"), "optim.sgd.momentum_buffer.w");
        assert!(StateKey::AdamTime.of("w").starts_with(ADAM));
        assert!(StateKey::SgdMomentum.of("w").starts_with(SGD));
    }
}
