//! Loading, rejecting and normalising small hand-written cohorts.

use std::collections::HashSet;

use super::*;
use crate::data::connectome::split::{cv_fold, test_split};
use crate::data::connectome::test_util::write;

const HEADER: &str = "SubjectID,R2_Thickness,R1_Thickness,R3_Thickness,R1_Area,R2_Area,R3_Area";

fn matrix_csv(n: usize, w: f32) -> String {
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if i != j && (i + j) % 2 == 1 {
                        format!("{w}")
                    } else {
                        "0".into()
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn morph(root: &Path, ses: &str, sub: &str, v: f32) {
    write(
        root,
        &format!("morph/{ses}/site1/Schaefer400_Morphology_{sub}.csv"),
        &format!(
            "{HEADER}\n{sub},{v},{},{},{},{},{}\n",
            v + 1.0,
            v + 2.0,
            v * 10.0,
            0,
            1
        ),
    );
}

/// A 3-node cohort with every kind of irregularity the loader must report.
fn small_cohort(root: &Path) {
    let b = "ses-baselineYear1Arm1";
    let y2 = "ses-2YearFollowUpYArm1";
    for (sub, ses, w) in [
        ("sub-A", b, 1.0),
        ("sub-A", y2, 2.0),
        ("sub-B", b, 3.0),
        ("sub-B", y2, 4.0),
        ("sub-C", b, 5.0), // no morphology → dropped, and sub-C with it
        ("sub-D", y2, 6.0),
        ("sub-D", b, 7.0),
    ] {
        write(root, &format!("sc/{sub}_{ses}.csv"), &matrix_csv(3, w));
    }
    write(root, "sc/sub-E.csv", &matrix_csv(3, 1.0)); // empty session
    morph(root, b, "sub-A", 1.0);
    morph(root, y2, "sub-A", 2.0);
    morph(root, b, "sub-B", 3.0);
    morph(root, y2, "sub-B", 4.0);
    morph(root, b, "sub-D", 5.0);
    morph(root, y2, "sub-D", 6.0);
    write(
        root,
        "subject_info_sc.csv",
        "scanid,age,sex,siteid\n\
         sub-A_ses-baselineYear1Arm1,9.5,M,s2\n\
         sub-A_ses-2YearFollowUpYArm1,11.5,M,s2\n\
         sub-B_ses-baselineYear1Arm1,,F,\n\
         sub-B_ses-2YearFollowUpYArm1,12,F,s1\n\
         sub-X_ses-baselineYear1Arm1,10,F,s3\n",
    );
}

#[test]
fn loads_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    small_cohort(dir.path());
    let (c, r) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
    let ids: Vec<_> = c.subjects.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["sub-A", "sub-B", "sub-D"]);
    assert_eq!((c.n_nodes, c.n_metrics(), c.n_scans()), (3, 2, 6));
    assert_eq!(c.rois, ["R1", "R2", "R3"]);
    assert_eq!(c.metrics, ["Thickness", "Area"]);
    assert_eq!((c.sex_vocab, c.site_vocab), (3, 4));
    assert_eq!(c.sites, ["s1", "s2", "s3"]);
    assert_eq!(r.subjects_dropped, ["sub-C", "sub-E"]);
    assert_eq!(
        r.scans_without_morph,
        ["sub-C_ses-baselineYear1Arm1", "sub-E"]
    );
    assert_eq!(r.non_canonical_sessions, ["sub-E.csv"]);
    assert_eq!(
        r.scans_not_in_table,
        [
            "sub-D_ses-baselineYear1Arm1",
            "sub-D_ses-2YearFollowUpYArm1"
        ]
    );
    assert_eq!(r.ages_not_finite, ["sub-B_ses-baselineYear1Arm1"]);
    // sub-B's baseline age is its visit index, its follow-up's the table's: named.
    assert_eq!(
        r.subjects_mixing_ages,
        [
            "sub-B: ages of sub-B_ses-2YearFollowUpYArm1 from the subject table, of \
          sub-B_ses-baselineYear1Arm1 the visit index"
        ]
    );
    assert_eq!(r.subjects_with_two_scans, 3);
    assert!(r.sc_asymmetric.is_empty());
    assert!(
        r.warnings()
            .iter()
            .any(|w| w.contains("subject sub-B: ages"))
    );
    assert_eq!((r.n_subjects, r.n_scans, r.sc_files), (3, 6, 8));
    assert!(r.to_string().contains("2 subjects dropped"), "{r}");

    let a = &c.subjects[0];
    assert_eq!((a.sex, a.site), (1, 2));
    assert_eq!(a.scans[1].age, 11.5);
    assert!(a.scans[0].age_from_table);
    // Morphology rows in lexicographic ROI order: R1 = v+1, R2 = v, R3 = v+2.
    assert_eq!(a.scans[0].x.column(0).to_vec(), [2.0, 1.0, 3.0]);
    assert_eq!(a.scans[0].x.column(1).to_vec(), [10.0, 0.0, 1.0]);
    let b = &c.subjects[1];
    // Sex: first non-zero; site: first non-zero (visit 1's).
    assert_eq!((b.sex, b.site), (2, 1));
    assert_eq!((b.scans[0].age, b.scans[1].age), (0.0, 12.0));
    assert!(!b.scans[0].age_from_table);
    let d = &c.subjects[2];
    // Baseline sorted first even though the 2-year file name sorts first; ages = visit index.
    assert_eq!(d.scans[0].session, "ses-baselineYear1Arm1");
    assert_eq!((d.scans[0].age, d.scans[1].age), (0.0, 1.0));
    assert_eq!((d.sex, d.site), (0, 0));
    let s0 = &d.scans[0];
    assert_eq!(s0.a_raw.get(0, 1), 7.0);
    assert_eq!(s0.a_raw.get(1, 0), 7.0);
    assert_eq!(s0.a_log()[(0, 1)], 7.0f32.ln_1p());
    assert_eq!(s0.ecc.len(), 32);
    assert!((s0.s - (14.0f64 + 1e-8).ln()).abs() < 1e-12);
    let cov = s0.numeric_covariates(Array1::<f32>::zeros(32).view(), true);
    assert_eq!(cov.len(), 35);

    // Without require_morph the dropped scans come back with zero morphology.
    let opts = LoadOptions {
        require_morph: false,
        ..LoadOptions::default()
    };
    let (c2, _) = load_cohort(&CohortPaths::under(dir.path()), &opts).unwrap();
    assert_eq!(c2.subjects.len(), 5);
    assert!(c2.subjects[2].scans[0].x.iter().all(|v| *v == 0.0));
}

#[test]
fn rejects_bad_cohorts() {
    // Node count mismatch names both files.
    let dir = tempfile::tempdir().unwrap();
    small_cohort(dir.path());
    write(
        dir.path(),
        "sc/sub-B_ses-2YearFollowUpYArm1.csv",
        &matrix_csv(4, 1.0),
    );
    let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sub-B_ses-2YearFollowUpYArm1.csv: SC matrix is 4×4")
            && err.contains("sub-A_ses-baselineYear1Arm1.csv is 3×3"),
        "{err}"
    );

    // Fewer morphology ROIs than nodes.
    let dir = tempfile::tempdir().unwrap();
    small_cohort(dir.path());
    for ses in ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1"] {
        for sub in ["sub-A", "sub-B", "sub-D"] {
            write(
                dir.path(),
                &format!("sc/{sub}_{ses}.csv"),
                &matrix_csv(5, 1.0),
            );
        }
    }
    write(
        dir.path(),
        "sc/sub-C_ses-baselineYear1Arm1.csv",
        &matrix_csv(5, 1.0),
    );
    write(dir.path(), "sc/sub-E.csv", &matrix_csv(5, 1.0));
    let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("3 morphology ROIs but the SC matrices have 5 nodes"),
        "{err}"
    );

    // No scan has morphology.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "sc/sub-A_ses-baselineYear1Arm1.csv",
        &matrix_csv(3, 1.0),
    );
    morph(dir.path(), "ses-2YearFollowUpYArm1", "sub-A", 1.0);
    write(dir.path(), "subject_info_sc.csv", "scanid,age\n");
    let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("no subject is left"), "{err}");

    // Bad matrix inside a cohort names the file.
    let dir = tempfile::tempdir().unwrap();
    small_cohort(dir.path());
    write(
        dir.path(),
        "sc/sub-D_ses-baselineYear1Arm1.csv",
        "0,1,x\n1,0,1\n1,1,0\n",
    );
    let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sub-D_ses-baselineYear1Arm1.csv: line 1, column 3"),
        "{err}"
    );

    // Empty SC directory.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sc")).unwrap();
    let err = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("sc: no SC matrix files"), "{err}");
}

#[test]
fn norm_stats_use_training_subjects_only() {
    let dir = tempfile::tempdir().unwrap();
    small_cohort(dir.path());
    let (c, _) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
    // Train on sub-A only (2 scans: v = 1, 2 → R2 thickness values 1, 2).
    let st = c.norm_stats(&[0]).unwrap();
    assert_eq!(st.n_scans, 2);
    let k = c.n_metrics(); // row R2 = 1, metric 0
    assert!((st.x_mean[k] - 1.5).abs() < 1e-12);
    assert!((st.x_std[k] - 0.5).abs() < 1e-12);
    // A constant element gets std = sqrt(1e-6).
    assert!((st.x_std[k + 1] - 1e-3).abs() < 1e-12);
    // Changing a non-training subject does not move the statistics.
    let mut c2 = c.clone();
    c2.subjects[1].scans[0].x.fill(1e6);
    c2.subjects[2].scans[0].ecc.fill(-5.0);
    assert_eq!(c2.norm_stats(&[0]).unwrap(), st);
    // …while changing a training subject does.
    c2.subjects[0].scans[0].x.fill(1e6);
    assert_ne!(c2.norm_stats(&[0]).unwrap(), st);
    // Normalised training data has mean 0 per element.
    let z = c.normalized(&st);
    let mean = (z[0][0].x[(1, 0)] + z[0][1].x[(1, 0)]) / 2.0;
    assert!(mean.abs() < 1e-6);
    assert_eq!(z[1][0].ecc.len(), 32);
    assert!(c.norm_stats(&[]).is_err());
    assert!(c.norm_stats(&[7]).is_err());
}

#[test]
fn split_then_fold_stats() {
    let dir = tempfile::tempdir().unwrap();
    crate::data::connectome::write_synthetic_cohort(dir.path(), 20, 12, 3).unwrap();
    let (c, _) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
    let split = test_split(c.subjects.len(), 0.2, 42).unwrap();
    let fold = cv_fold(&split.trainval, 0, 5).unwrap();
    let ids =
        |v: &[usize]| -> HashSet<String> { v.iter().map(|&i| c.subjects[i].id.clone()).collect() };
    assert!(ids(&split.test).is_disjoint(&ids(&split.trainval)));
    assert!(ids(&fold.val).is_disjoint(&ids(&fold.train)));
    assert!(ids(&split.test).is_disjoint(&ids(&fold.train)));
    let st = c.norm_stats(&fold.train).unwrap();
    let manual = NormStats::from_scans(
        fold.train.iter().flat_map(|&i| c.subjects[i].scans.iter()),
        c.n_nodes,
        c.n_metrics(),
        c.topo_bins,
    )
    .unwrap();
    assert_eq!(st, manual);
    assert_ne!(st, c.norm_stats(&split.trainval).unwrap());
}

/// `small_cohort` with `edit` applied to the text of `file` (relative to the cohort root), loaded.
fn load_edited(file: &str, edit: impl Fn(&str) -> String) -> Result<(Cohort, LoadReport)> {
    let dir = tempfile::tempdir().unwrap();
    small_cohort(dir.path());
    let path = dir.path().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, edit(&text)).unwrap();
    load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default())
}

#[test]
fn follow_ups_must_be_older_than_the_visit_before() {
    for age in ["9.5", "8"] {
        let err = load_edited("subject_info_sc.csv", |t| {
            t.replace(
                "sub-A_ses-2YearFollowUpYArm1,11.5",
                &format!("sub-A_ses-2YearFollowUpYArm1,{age}"),
            )
        })
        .unwrap_err()
        .to_string();
        for needle in [
            "subject_info_sc.csv: subject sub-A",
            &format!("sub-A_ses-2YearFollowUpYArm1 (table line 3, age {age}; SC file"),
            "sub-A_ses-baselineYear1Arm1 (table line 2, age 9.5; SC file \
             sub-A_ses-baselineYear1Arm1.csv)",
            "is not older than the visit before it",
        ] {
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
    // A negative age is an error of the table itself.
    let err = load_edited("subject_info_sc.csv", |t| t.replace(",9.5,", ",-9.5,"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("line 2: scan sub-A_ses-baselineYear1Arm1: negative age \"-9.5\""),
        "{err}"
    );
}

#[test]
fn negative_weights_are_errors_asymmetry_and_no_pairs_warnings() {
    let b = "sc/sub-A_ses-baselineYear1Arm1.csv";
    let err = load_edited(b, |_| "0,1,0\n1,0,-2\n0,-2,0\n".into())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sub-A_ses-baselineYear1Arm1.csv: line 2, column 3: negative edge weight"),
        "{err}"
    );
    let (c, r) = load_edited(b, |_| "0,1,0\n1.5,0,2\n0,2,0\n".into()).unwrap();
    assert_eq!(r.sc_asymmetric.len(), 1);
    let w = r.warnings().join("\n");
    assert!(
        w.contains("sub-A_ses-baselineYear1Arm1.csv: not symmetric: 1 pair(s)")
            && w.contains("row 1, column 2 (1) against row 2, column 1 (1.5)")
            && w.contains("symmetrised"),
        "{w}"
    );
    assert_eq!(c.subjects[0].scans[0].a_raw.get(0, 1), 1.25);
    assert_eq!(r.counts()["sc_asymmetric"], 1);

    // Only baselines: loaded, with one cohort-wide warning naming the SC directory.
    let dir = tempfile::tempdir().unwrap();
    small_cohort(dir.path());
    for f in std::fs::read_dir(dir.path().join("sc")).unwrap() {
        let p = f.unwrap().path();
        if p.to_string_lossy().contains("2YearFollowUp") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let (c, r) = load_cohort(&CohortPaths::under(dir.path()), &LoadOptions::default()).unwrap();
    assert_eq!((c.subjects.len(), r.subjects_with_two_scans), (3, 0));
    let w = r.warnings();
    assert!(
        w[0].starts_with(&format!(
            "{}: no subject has two scans",
            dir.path().join("sc").display()
        )),
        "{w:?}"
    );
    assert_eq!(r.warnings_capped(0).len(), 1);
    assert!(r.warnings_capped(0)[0].contains("more"));
}
