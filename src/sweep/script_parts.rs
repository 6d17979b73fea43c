//! The pieces every scheduler's script is made of, below the scripts themselves (so that
//! `scripts.rs` and the per-scheduler files `slurm.rs`, `lsf.rs`, `gflow.rs` import them without
//! importing each other): index ranges, the arrays of a submission, the trainer choice
//! (`$TRAINER`, or a container with `--nv`), running a task with the scheduler's signal
//! forwarded.

use std::path::Path;

use super::Manifest;
use super::quote::sh_path;

/// `0-3,5,7-9` from sorted indices.
pub fn ranges(indices: &[usize]) -> String {
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
pub(super) fn job_name(dir: &Path) -> String {
    dir.file_name()
        .map_or("sweep".into(), |n| n.to_string_lossy().into_owned())
}

/// Directive lines (a scheduler's resources), each ending in a newline.
pub(super) fn lines(v: Vec<String>) -> String {
    v.into_iter().map(|l| l + "\n").collect()
}

/// `%N` of an array's throttle (empty without one).
pub(super) fn throttle(m: &Manifest) -> String {
    if m.throttle > 0 {
        format!("%{}", m.throttle)
    } else {
        String::new()
    }
}

/// The resources' `module load` lines and image defaults, then [`CHOOSE_TRAINER`].
pub(super) fn choose_trainer(m: &Manifest) -> String {
    format!("{}{CHOOSE_TRAINER}", m.resources.setup_shell())
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
pub(super) fn run_task(dir: &Path, signal: &str, m: &Manifest) -> String {
    let dir = sh_path(dir);
    let preflight = if m.resources.gpus() > 0 {
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

/// The arrays that run `indices`: phase 1 first; then phase-2 tasks whose phase-1 task is in
/// it (chained), and phase-2 tasks whose phase 1 is already done (not chained).
pub fn arrays(m: &Manifest, indices: &[usize]) -> Vec<Array> {
    let phase_one = m.tasks.iter().filter(|t| t.after.is_none()).count();
    let first: Vec<usize> = indices
        .iter()
        .copied()
        .filter(|&i| m.tasks[i].after.is_none())
        .collect();
    let (chained, free): (Vec<usize>, Vec<usize>) = indices
        .iter()
        .copied()
        .filter(|&i| m.tasks[i].after.is_some())
        .partition(|&i| m.tasks[i].after.is_some_and(|p| first.contains(&p)));
    let mut out = Vec::new();
    if !first.is_empty() {
        out.push(Array {
            tasks: first,
            offset: 0,
            chained: false,
        });
    }
    for (tasks, chained) in [(chained, true), (free, false)] {
        if !tasks.is_empty() {
            out.push(Array {
                tasks,
                offset: phase_one,
                chained,
            });
        }
    }
    out
}

/// `TASK=` line of an array script: the array index plus the array's offset.
pub(super) fn task_line(var: &str, offset: isize) -> String {
    match offset {
        0 => format!("TASK=\"${{{var}:?an array task}}\""),
        o => format!("TASK=$(( ${{{var}:?an array task}} + {o} ))"),
    }
}
