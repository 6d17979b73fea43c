use super::*;
use crate::cluster::scheduler::{Gflow, Lsf, Scheduler, SchedulerKind, Slurm};

fn table(text: &str) -> toml::Table {
    text.parse().unwrap()
}

#[test]
fn time_limits_in_slurm_forms_become_seconds_and_back() {
    for (text, secs, shown) in [
        ("90", 5400, "01:30:00"),
        ("10:30", 630, "00:10:30"),
        ("12:00:00", 43200, "12:00:00"),
        ("2-0", 172_800, "2-00:00:00"),
        ("1-02:03", 93_780, "1-02:03:00"),
        ("1-02:03:04", 93_784, "1-02:03:04"),
    ] {
        assert_eq!(parse_time(text).unwrap(), secs, "{text}");
        assert_eq!(format_time(secs), shown);
    }
    for bad in ["", "abc", "1:2:3:4", "-5", "0", "1-", "400-00"] {
        let e = parse_time(bad).unwrap_err().to_string();
        assert!(e.contains("`time`"), "{bad}: {e}");
    }
}

#[test]
fn memory_sizes_become_megabytes() {
    for (text, mb) in [
        ("512", 512),
        ("32G", 32768),
        ("32GB", 32768),
        ("1t", 1_048_576),
        ("1536K", 2),
    ] {
        assert_eq!(parse_mem(text).unwrap(), mb, "{text}");
    }
    for bad in ["", "G", "-1G", "lots", "0"] {
        assert!(
            parse_mem(bad).unwrap_err().to_string().contains("`mem`"),
            "{bad}"
        );
    }
}

#[test]
fn the_warning_margin_follows_the_time_limit() {
    let with = |t: u64| Resources {
        time_secs: Some(t),
        ..Default::default()
    };
    assert_eq!(Resources::default().margin_secs(), None);
    assert_eq!(with(60).margin_secs(), Some(30));
    assert_eq!(with(30 * 60).margin_secs(), Some(180));
    assert_eq!(with(12 * 3600).margin_secs(), Some(600));
    assert_eq!(with(10 * 60).margin_secs(), Some(60));
}

#[test]
fn a_spec_table_renders_for_each_scheduler() {
    let r = Resources::from_table(&table(
        r#"partition = "q_ai4"
gpus = 2
gpu_type = "a100"
cpus = 8
mem = "32G"
time = "12:00:00"
account = "lab"
qos = "high"
constraint = "ib"
image = "/gpfs/t.sif"
binds = ["/gpfs", "/scratch"]
modules = "singularity/3.8"
extra = ["--exclusive"]
"#,
    ))
    .unwrap();
    assert_eq!(
        Slurm.directives(&r),
        [
            "#SBATCH --partition=q_ai4",
            "#SBATCH --gres=gpu:a100:2",
            "#SBATCH --cpus-per-task=8",
            "#SBATCH --mem=32768M",
            "#SBATCH --time=12:00:00",
            "#SBATCH --account=lab",
            "#SBATCH --qos=high",
            "#SBATCH --constraint=ib",
            "#SBATCH --exclusive",
        ]
    );
    let lsf = Lsf.directives(&r).join("\n");
    for want in [
        "#BSUB -q q_ai4",
        "#BSUB -gpu \"num=2:gmodel=a100\"",
        "#BSUB -n 8",
        "#BSUB -R \"rusage[mem=32768MB]\"",
        "#BSUB -W 12:00",
        "#BSUB -P lab",
        "#BSUB -R \"select[ib]\"",
    ] {
        assert!(lsf.contains(want), "{want}\n{lsf}");
    }
    assert_eq!(SchedulerKind::Lsf.ignored(&r), ["qos"]);
    let gflow = Gflow.directives(&r).join("\n");
    assert!(gflow.contains("# GFLOW --gpus 2\n# GFLOW --time 12:00:00\n# GFLOW --memory 32768M"));
    assert_eq!(
        SchedulerKind::Gflow.ignored(&r),
        ["partition", "gpu_type", "cpus", "qos", "constraint"]
    );
    let shell = r.setup_shell();
    assert!(shell.contains("module load singularity/3.8 ||"), "{shell}");
    assert!(
        shell.contains("[[ -n \"${IMAGE:-}\" ]] || IMAGE=/gpfs/t.sif\n"),
        "{shell}"
    );
    assert!(
        shell.contains("[[ -n \"${BIND_MOUNTS:-}\" ]] || BIND_MOUNTS='/gpfs,/scratch'\n"),
        "{shell}"
    );
}

#[test]
fn bad_values_name_the_key_and_what_was_expected() {
    for (text, needle) in [
        (
            "partiton = \"x\"",
            "`partiton` is not a resource; expected one of partition, gpus",
        ),
        ("gpus = -1", "`gpus` = -1: expected a whole number"),
        (
            "gpus = \"two\"",
            "`gpus` = \"two\": expected a whole number",
        ),
        (
            "partition = \"q ai4\"",
            "`partition` = \"q ai4\": expected one word",
        ),
        ("account = \"$(rm -rf)\"", "`account`"),
        ("extra = [\"--a\\n--b\"]", "`extra`"),
        ("time = \"soon\"", "`time` = \"soon\""),
        ("time = true", "`time` = true: expected a string"),
    ] {
        let e = Resources::from_table(&table(text)).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn hostile_values_are_refused_by_each_fields_allow_list() {
    // The six injections the hostile-input campaign found, and their kin: shell operators in a
    // module name, a section break in an LSF select string, NUL, a newline, 200 KB.
    let huge = "a".repeat(200_000);
    for (key, value) in [
        ("modules", "x|{touch,FILE}"),
        ("modules", "x&touch FILE"),
        ("modules", "x>FILE"),
        ("modules", "x(y)"),
        ("modules", "-x"),
        ("partition", "q<FILE"),
        ("partition", "q\u{0}"),
        ("account", "a\nb"),
        ("constraint", "ib]rusage[mem=1"),
        ("constraint", "a\"b"),
        ("constraint", "a#b"),
        ("image", "/x\n/y"),
        ("binds", "/a,/b"),
        ("extra", "not-an-option"),
        ("extra", "--x\u{1b}[2J"),
        ("partition", huge.as_str()),
        ("image", huge.as_str()),
    ] {
        let mut r = Resources::default();
        let e = r
            .set(key, &toml::Value::String(value.into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("`{key}`")) && e.contains("expected"),
            "{value:?}: {e}"
        );
        assert!(
            e.len() < 400,
            "the error repeats the whole value: {} bytes",
            e.len()
        );
    }
    // Paths may hold spaces and quotes: they are quoted where a shell reads them.
    let mut r = Resources::default();
    r.set("image", &toml::Value::String("/my images/it's.sif".into()))
        .unwrap();
    assert!(
        r.setup_shell().contains("IMAGE=\"/my images/it's.sif\""),
        "{}",
        r.setup_shell()
    );
}

#[test]
fn time_limits_that_would_wrap_or_mean_no_limit_are_refused() {
    for (value, needle) in [
        (
            toml::Value::String("5124095576030432:00:00".into()),
            "between one second and a year",
        ),
        (toml::Value::Integer(0), "between one minute and a year"),
        (
            toml::Value::String("0".into()),
            "between one second and a year",
        ),
    ] {
        let e = Resources::default()
            .set("time", &value)
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{value}: {e}");
    }
}

#[test]
fn a_manifests_resources_are_checked_again_when_read() {
    let good =
        Resources::from_table(&table("partition = \"q\"\nmodules = [\"m/1\"]\ntime = 90")).unwrap();
    good.check().unwrap();
    let mut edited = good.clone();
    edited.modules = vec!["x;touch FILE".into()];
    assert!(
        edited
            .check()
            .unwrap_err()
            .to_string()
            .contains("`modules`")
    );
    let mut edited = good;
    edited.time_secs = Some(0);
    assert!(edited.check().unwrap_err().to_string().contains("`time`"));
}

/// Every key of the table in `key.rs`, set.
const EVERY_KEY: &str = "partition = \"q_ai4\"\ngpus = 2\ngpu_type = \"a100\"\nmig = \"3g.20gb\"\n\
    cpus = 8\nmem = \"32G\"\ntime = 90\naccount = \"lab\"\nqos = \"normal\"\n\
    constraint = \"v100|a100\"\nimage = \"/x/trainer.sif\"\nbinds = [\"/a\", \"/b\"]\n\
    modules = [\"singularity/3.8\"]\nextra = [\"--exclusive\", \"-w node1\"]\n";

#[test]
fn the_keys_table_drives_the_struct_the_names_the_values_and_the_flags() {
    use clap::{Args, FromArgMatches};
    // Names unique, each found by its name, in `KEYS` in `ALL`'s order.
    for (i, k) in ResourceKey::ALL.into_iter().enumerate() {
        assert_eq!(ResourceKey::from_name(k.name()), Some(k));
        assert_eq!(KEYS[i], k.name());
        assert!(!KEYS[..i].contains(&k.name()), "{k} twice");
    }
    // Every key set reads back through `set` to the same field.
    let full = Resources::from_table(&table(EVERY_KEY)).unwrap();
    full.check().unwrap();
    let mut again = Resources::default();
    for k in ResourceKey::ALL {
        let v = full.value(k).unwrap_or_else(|| panic!("{k}: not set"));
        again.set(k.name(), &v).unwrap();
        assert_eq!(again.value(k), Some(v), "{k}");
    }
    assert_eq!(again, full);
    // Every key has its `sweep plan` flag, named as the key (`gpu_type`: `--gpu-type`; the
    // lists singular: `--bind`, `--module`, `--extra`), and the flags give the same resources.
    let cmd = ResourceArgs::augment_args(clap::Command::new("plan"));
    let mut argv = vec!["plan".to_string()];
    for k in ResourceKey::ALL {
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id().as_str() == k.name())
            .unwrap_or_else(|| panic!("{k}: no flag"));
        let long = format!("--{}", arg.get_long().unwrap());
        let want = k.name().replace('_', "-");
        assert!(want.starts_with(&long[2..]), "{k}: {long}");
        match full.value(k).unwrap() {
            toml::Value::Array(items) => {
                for x in items {
                    argv.extend([long.clone(), x.as_str().unwrap().to_string()]);
                }
            }
            toml::Value::String(s) => argv.extend([long, s]),
            other => argv.extend([long, other.to_string()]),
        }
    }
    assert_eq!(cmd.get_arguments().count(), ResourceKey::ALL.len());
    let flags = ResourceArgs::from_arg_matches(&cmd.try_get_matches_from(&argv).unwrap()).unwrap();
    let mut from_flags = Resources::default();
    for (k, v) in flags.pairs() {
        from_flags.set(k, &v).unwrap();
    }
    assert_eq!(from_flags, full, "{argv:?}");
}
