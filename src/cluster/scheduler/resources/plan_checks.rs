//! The checks of issue 71 (values the scheduler would refuse, refused at plan time) and what a
//! re-plan says it changed.

use super::*;
use crate::cluster::scheduler::{Lsf, Scheduler, Slurm};

fn with(pairs: &[(&str, toml::Value)]) -> Result<Resources> {
    let mut r = Resources::default();
    for (k, v) in pairs {
        r.set(k, v)?;
    }
    Ok(r)
}

fn n(v: i64) -> toml::Value {
    toml::Value::Integer(v)
}

fn s(v: &str) -> toml::Value {
    toml::Value::String(v.into())
}

#[test]
fn zero_cpus_is_refused_naming_key_and_value() {
    for v in [n(0), s("0")] {
        let e = with(&[("cpus", v)]).unwrap_err().to_string();
        assert!(
            e.contains("`cpus` = ") && e.contains("from 1 to 4096"),
            "{e}"
        );
    }
    assert_eq!(with(&[("cpus", n(1))]).unwrap().cpus, Some(1));
    // A manifest holding cpus = 0 (written before the rule) is refused on reading.
    let old = Resources {
        cpus: Some(0),
        ..Default::default()
    };
    assert!(old.check().unwrap_err().to_string().contains("`cpus`"));
}

#[test]
fn a_gpu_type_or_mig_profile_without_gpus_is_refused() {
    for (key, gpus) in [("gpu_type", Some(0)), ("gpu_type", None), ("mig", Some(0))] {
        let mut pairs = vec![(key, s("a100"))];
        if let Some(g) = gpus {
            pairs.push(("gpus", n(g)));
        }
        let r = with(&pairs).unwrap();
        // Each scheduler would drop it silently: no GPU line at all.
        assert!(!Slurm.directives(&r).join("\n").contains("a100"));
        assert!(!Lsf.directives(&r).join("\n").contains("a100"));
        let e = r.check_plan().unwrap_err().to_string();
        assert!(e.contains(&format!("`{key}` = \"a100\"")), "{e}");
        assert!(e.contains("needs GPUs"), "{e}");
        let said = if gpus.is_some() {
            "`gpus` = 0"
        } else {
            "no `gpus`"
        };
        assert!(e.contains(said), "{e}");
    }
    let ok = with(&[
        ("gpus", n(2)),
        ("gpu_type", s("a100")),
        ("mig", s("3g.20gb")),
    ])
    .unwrap();
    ok.check_plan().unwrap();
}

#[test]
fn zero_gpus_drops_gpu_keys_of_the_layer_below_and_not_those_given_with_it() {
    let below = with(&[
        ("gpus", n(1)),
        ("gpu_type", s("a100")),
        ("mig", s("1g.5gb")),
    ]);
    let mut r = below.unwrap();
    r.set("gpus", &n(0)).unwrap();
    let given = |k: &str| k == "gpus";
    assert_eq!(r.drop_gpu_keys(&given), ["gpu_type = a100", "mig = 1g.5gb"]);
    assert_eq!((r.gpu_type.clone(), r.mig.clone()), (None, None));
    r.check_plan().unwrap();
    // `--gpus 0 --gpu-type a100`: kept, so that the plan refuses it.
    let mut r = with(&[("gpus", n(0)), ("gpu_type", s("a100"))]).unwrap();
    let given = |k: &str| k == "gpus" || k == "gpu_type";
    assert!(r.drop_gpu_keys(&given).is_empty());
    assert!(r.check_plan().is_err());
    // With GPUs nothing is dropped.
    let mut r = with(&[("gpus", n(1)), ("gpu_type", s("a100"))]).unwrap();
    assert!(r.drop_gpu_keys(&|_| false).is_empty());
}

#[test]
fn changes_name_each_key_with_its_old_and_new_value() {
    let old = with(&[
        ("partition", s("q_ai4")),
        ("gpus", n(1)),
        ("gpu_type", s("a100")),
        ("time", s("30")),
        ("binds", toml::Value::Array(vec![s("/a"), s("/b")])),
    ])
    .unwrap();
    let new = with(&[
        ("gpus", n(0)),
        ("time", s("30")),
        ("mem", s("2G")),
        ("binds", toml::Value::Array(vec![s("/a")])),
    ])
    .unwrap();
    assert_eq!(
        new.changes_from(&old),
        [
            "resources.partition q_ai4 -> (none)",
            "resources.gpus 1 -> 0",
            "resources.gpu_type a100 -> (none)",
            "resources.mem (none) -> 2048M",
            "resources.binds /a,/b -> /a",
        ]
    );
    assert!(old.changes_from(&old).is_empty());
    // `gpus = 0` is said, not the same as no request.
    let none = Resources::default();
    assert_eq!(
        with(&[("gpus", n(0))]).unwrap().changes_from(&none),
        ["resources.gpus (none) -> 0"]
    );
}
