//! Morphology index, layout and file reading on hand-written files and the golden fixture.

use super::*;
use crate::data::connectome::test_util::{golden, write};

fn default_metrics() -> Vec<String> {
    DEFAULT_METRICS.iter().map(|s| s.to_string()).collect()
}

#[test]
fn golden_roi_metric_order() {
    let g = &golden()["infer_roi_metric_order"];
    let columns: Vec<String> = g["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let (rois, metrics) = infer_roi_metric_order(&columns, &default_metrics());
    let want = |k: &str| -> Vec<String> {
        g[k].as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(rois, want("roi_order"));
    assert_eq!(metrics, want("metric_order"));
}

#[test]
fn suffix_matching_and_metric_restriction() {
    let metrics = default_metrics();
    assert_eq!(match_column("LH_a_Thickness", &metrics), Some(("LH_a", 0)));
    assert_eq!(match_column("LH_aThickness", &metrics), None);
    assert_eq!(match_column("LH_a_thickness", &metrics), None);
    let cols: Vec<String> = ["SubjectID", "b_GWC", "a_GWC", "a_Curv", "misc"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (rois, m) = infer_roi_metric_order(&cols, &metrics);
    assert_eq!(rois, ["a", "b"]);
    assert_eq!(m, ["Curv", "GWC"]);
    // Lexicographic (byte) order, not natural order.
    let cols: Vec<String> = ["LH_10_Area", "LH_9_Area", "LH_1_Area"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        infer_roi_metric_order(&cols, &metrics).0,
        ["LH_1", "LH_10", "LH_9"]
    );
}

#[test]
fn index_and_load() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("morph");
    let body = "SubjectID,b_Thickness,a_Thickness,a_Area,b_Area,zz_Foo\nsub-1,1,2,3,NaN,9\nsub-1,7,7,7,7,7\n";
    write(
        &root,
        "ses-baselineYear1Arm1/site1/Schaefer400_Morphology_sub-1.csv",
        body,
    );
    write(
        &root,
        "ses-baselineYear1Arm1/site2/Schaefer400_Morphology_sub-1.csv",
        body,
    );
    write(
        &root,
        "2YearFollowUpYArm1/s/Schaefer400_Morphology_sub-1.csv",
        "SubjectID,a_Area\nx,\n",
    );
    write(&root, "other/Schaefer400_Morphology_sub-2.csv", body);
    write(&root, "baseline/Schaefer400_Morphology_NDAR3.csv", body);
    write(&root, "baseline/Schaefer400_Morphology_sub-4.txt", body);
    write(
        &root,
        "baseline/Schaefer400_Morphology_sub-5.csv",
        "SubjectID,age\nsub-5,3\n",
    );
    write(
        &root,
        "baseline/Schaefer400_Morphology_sub-6.csv",
        "SubjectID,a_Area\n",
    );
    write(
        &root,
        "baseline/Schaefer400_Morphology_sub-7.csv",
        "SubjectID,a_Area\nsub-7,abc\n",
    );
    let index = index_morphology(&root).unwrap();
    assert_eq!(index.files.len(), 5, "{:?}", index.files);
    assert_eq!(index.duplicates.len(), 1);
    assert_eq!(index.ignored_no_session.len(), 1);
    assert_eq!(index.ignored_no_subject.len(), 1);
    // Sorted path strings: "2YearFollowUpYArm1/..." < "baseline/..." < "ses-...".
    assert!(
        index
            .first
            .as_ref()
            .unwrap()
            .ends_with("2YearFollowUpYArm1/s/Schaefer400_Morphology_sub-1.csv")
    );
    let base = &index.files["sub-1_ses-baselineYear1Arm1"];
    assert!(base.to_string_lossy().contains("site1"));

    let layout = MorphLayout::infer(
        &index.files["sub-1_ses-baselineYear1Arm1"],
        &default_metrics(),
    )
    .unwrap();
    assert_eq!(layout.rois, ["a", "b"]);
    assert_eq!(layout.metrics, ["Thickness", "Area"]);
    let m = load_morph(base, &layout).unwrap();
    assert!(m.had_data_row);
    assert_eq!(m.nan_cells, 1);
    assert_eq!(m.x[(0, 0)], 2.0);
    assert_eq!(m.x[(1, 0)], 1.0);
    assert_eq!(m.x[(0, 1)], 3.0);
    assert!(m.x[(1, 1)].is_nan());

    // Header only: zeros, flagged. Empty cell: NaN.
    let m = load_morph(&index.files["sub-6_ses-baselineYear1Arm1"], &layout).unwrap();
    assert!(!m.had_data_row);
    assert!(m.x.iter().all(|v| *v == 0.0));
    let m = load_morph(&index.files["sub-1_ses-2YearFollowUpYArm1"], &layout).unwrap();
    assert!(m.x[(0, 1)].is_nan());

    let err = load_morph(&index.files["sub-5_ses-baselineYear1Arm1"], &layout)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("Schaefer400_Morphology_sub-5.csv") && err.contains("no column"),
        "{err}"
    );
    let err = load_morph(&index.files["sub-7_ses-baselineYear1Arm1"], &layout)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sub-7.csv: line 2, column 2: \"abc\""),
        "{err}"
    );
    let err = MorphLayout::infer(
        &index.files["sub-5_ses-baselineYear1Arm1"],
        &default_metrics(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("sub-5.csv"), "{err}");
}

#[test]
fn no_morphology_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "x/Schaefer400_Morphology_sub-1.csv",
        "SubjectID\n",
    );
    let err = index_morphology(dir.path()).unwrap_err().to_string();
    assert!(err.contains("no morphology file"), "{err}");
    let err = index_morphology(&dir.path().join("absent"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("absent"), "{err}");
}
