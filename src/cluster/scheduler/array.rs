//! What a sweep hands a scheduler to submit ([`Submission`]: its arrays of tasks, the queue
//! resources, the directory) and the pieces every scheduler's array script is made of, below the
//! scripts themselves (so that the per-scheduler files `slurm.rs`, `lsf.rs`, `gflow.rs` import
//! them without importing each other): index ranges, file stems and job names, the trainer
//! choice (`$TRAINER`, or a container with `--nv`), running a task with the scheduler's signal
//! forwarded.

use std::path::{Path, PathBuf};

use super::quote::sh_path;
use super::resources::Resources;

/// A submission to write: the sweep directory (absolute), the command its tasks run, its spec,
/// at most `throttle` tasks at once (0: no limit), what each task asks of the queue, the arrays
/// of the tasks, `all` or `missing`, and the sweep's job name.
pub struct Submission<'a> {
    pub dir: &'a Path,
    pub command: &'a str,
    pub spec: &'a Path,
    pub throttle: usize,
    pub resources: &'a Resources,
    pub arrays: &'a [Array],
    pub which: &'a str,
    pub name: &'a str,
}

/// The scripts of a submission, (file, text) each, and the command that submits them.
pub(crate) type Scripts = (Vec<(PathBuf, String)>, Vec<String>);

/// The file stem of array `a` of a submission (`submit`, `submit-phase2`, …).
pub(crate) fn stem(which: &str, a: &Array) -> String {
    let base = if which == "all" {
        "submit".to_string()
    } else {
        format!("submit-{which}")
    };
    match (a.offset, a.chained) {
        (0, _) => base,
        (_, true) => format!("{base}-phase2"),
        (_, false) => format!("{base}-phase2-now"),
    }
}

/// The scheduler's job name of array `a` of the sweep named `name`.
pub(crate) fn array_job(name: &str, a: &Array) -> String {
    if a.offset == 0 {
        name.to_string()
    } else {
        format!("{name}-phase2")
    }
}

/// `0-3,5,7-9` from sorted indices.
pub(crate) fn ranges(indices: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let mut j = i;
        while j + 1 < indices.len() && indices[j + 1] == indices[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", indices[i], indices[j])
        } else {
            indices[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// `0 1 2` (a shell word list) of `indices` − `offset`.
pub(super) fn ranges_list(indices: &[usize], offset: usize) -> String {
    let v: Vec<String> = indices.iter().map(|i| (i - offset).to_string()).collect();
    v.join(" ")
}

/// The array job's name: the sweep directory's.
pub(crate) fn job_name(dir: &Path) -> String {
    dir.file_name()
        .map_or("sweep".into(), |n| n.to_string_lossy().into_owned())
}

/// Directive lines (a scheduler's resources), each ending in a newline.
pub(super) fn lines(v: Vec<String>) -> String {
    v.into_iter().map(|l| l + "\n").collect()
}

/// `%N` of an array's throttle (empty without one).
pub(super) fn throttle(s: &Submission<'_>) -> String {
    if s.throttle > 0 {
        format!("%{}", s.throttle)
    } else {
        String::new()
    }
}

/// The resources' `module load` lines and image defaults, then [`CHOOSE_TRAINER`].
pub(super) fn choose_trainer(r: &Resources) -> String {
    format!("{}{CHOOSE_TRAINER}", r.setup_shell())
}

/// The trainer command of an array task: `$TRAINER`, else the container with `--nv` when
/// `IMAGE` is set, else `trainer` on the PATH.
const CHOOSE_TRAINER: &str = r#"if [[ -n "${TRAINER:-}" ]]; then
  RUN=("$TRAINER")
elif [[ -n "${IMAGE:-}" ]]; then
  RUN=(singularity exec --nv ${BIND_MOUNTS:+--bind "$BIND_MOUNTS"} "$IMAGE" trainer)
else
  RUN=(trainer)
fi
"#;

/// `sweep task DIR $TASK` in the background, the scheduler's warning `signal` and TERM
/// forwarded to it, its exit code in `rc`; with GPUs requested, `--preflight` (the doctor's GPU
/// checks before the trainer starts).
pub(super) fn run_task(dir: &Path, signal: &str, r: &Resources) -> String {
    let dir = sh_path(dir);
    let preflight = if r.gpus() > 0 {
        "# GPU preflight first (trainer doctor's checks): a node without a usable GPU fails the\n\
         # task fast with the doctor's exit code and reason (`trainer sweep status`).\n"
    } else {
        ""
    };
    let flag = if preflight.is_empty() {
        ""
    } else {
        " --preflight"
    };
    format!(
        r#"pid=""
forward() {{ [[ -n "$pid" ]] && kill -s "$1" "$pid" 2>/dev/null; }}
trap 'forward {signal}' {signal}
trap 'forward TERM' TERM
{preflight}"${{RUN[@]}}" sweep task {dir} "$TASK"{flag} &
pid=$!
wait "$pid"; rc=$?
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done
"#
    )
}

/// One array of a submission: manifest indices `tasks`, array index = task − `offset`;
/// `chained`: each task waits for the array index of the same number in the first array
/// (phase 2 after its own phase 1).
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub tasks: Vec<usize>,
    pub offset: usize,
    pub chained: bool,
}

/// `TASK=` line of an array script: the array index plus the array's offset.
pub(super) fn task_line(var: &str, offset: isize) -> String {
    match offset {
        0 => format!("TASK=\"${{{var}:?an array task}}\""),
        o => format!("TASK=$(( ${{{var}:?an array task}} + {o} ))"),
    }
}
