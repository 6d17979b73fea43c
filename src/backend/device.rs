//! `--device`: the CPU, or a GPU by index.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// `cpu` or a GPU by index (`cuda:N`, also read from `gpu:N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum DeviceSpec {
    Cpu,
    Cuda(usize),
}

impl DeviceSpec {
    pub fn is_cuda(self) -> bool {
        matches!(self, DeviceSpec::Cuda(_))
    }
}

impl fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(i) => write!(f, "cuda:{i}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "cpu" => Ok(DeviceSpec::Cpu),
            "cuda" | "gpu" => Ok(DeviceSpec::Cuda(0)),
            _ => match s
                .strip_prefix("cuda:")
                .or_else(|| s.strip_prefix("gpu:"))
                .map(str::parse::<usize>)
            {
                Some(Ok(i)) => Ok(DeviceSpec::Cuda(i)),
                _ => Err(format!(
                    "unknown device `{s}`: expected cpu, cuda, cuda:N, gpu or gpu:N"
                )),
            },
        }
    }
}

impl From<DeviceSpec> for String {
    fn from(d: DeviceSpec) -> String {
        d.to_string()
    }
}

impl TryFrom<String> for DeviceSpec {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}
