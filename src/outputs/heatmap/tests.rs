//! The heatmaps' networks, colour maps and layout.
use super::*;

#[test]
fn schaefer_names_give_network_boundaries_and_others_none() {
    let names: Vec<String> = [
        "7Networks_LH_Vis_1",
        "7Networks_LH_Vis_2",
        "7Networks_LH_SomMot_1",
        "7Networks_RH_SomMot_1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(network_boundaries(&names), vec![2, 3]);
    assert!(network_boundaries(&["a".to_string(), "b".to_string()]).is_empty());
}

/// Schaefer-like 17-network names: `per` nodes per network, the networks in each
/// hemisphere in `nets` order.
fn schaefer(nets: &[&str], per: usize) -> Vec<String> {
    let mut out = Vec::new();
    for hemi in ["LH", "RH"] {
        for net in nets {
            for i in 0..per {
                out.push(format!("17Networks_{hemi}_{net}_{}", i + 1));
            }
        }
    }
    out
}

fn figure_svg(names: &[String], lines: bool) -> String {
    let n = names.len();
    let m = Array2::from_shape_fn((n, n), |(i, j)| ((i * j) % 7) as f32);
    let fig = Comparison {
        title: "t".into(),
        truth: &m,
        prediction: &m,
        start: &m,
        roi_names: Some(names),
        network_lines: lines,
        layout: Layout::Screen,
    };
    crate::outputs::figure::svg_string(&fig).unwrap()
}

#[test]
fn networks_are_a_strip_in_the_colour_of_their_name_lines_only_when_asked() {
    let nets = ["VisCent", "SomMotA", "DefaultB"];
    let names = schaefer(&nets, 3);
    let runs = network_runs(&names);
    assert_eq!(runs.len(), 6, "{runs:?}");
    assert_eq!(
        (runs[3].start, runs[3].end, runs[3].hemisphere.as_str()),
        (9, 12, "RH")
    );
    assert_eq!(network_boundaries(&names), [3, 6, 9, 12, 15]);
    let svg = figure_svg(&names, false);
    // Every network named once in the key, the hemispheres after them.
    for net in nets {
        assert_eq!(svg.matches(&format!(">\n{net}\n<")).count(), 1, "{net}");
    }
    assert!(svg.contains(">\nLH | RH\n<"), "no hemispheres");
    // Each network's strip in its name's colour, the same as in any other figure.
    let colours = crate::outputs::legend::colours(nets);
    for net in nets {
        let c = crate::outputs::legend::colour(colours[net]);
        let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        // Two strips per panel and hemisphere, five panels, and the key's swatch.
        assert!(svg.matches(&fill).count() > 2 * 2 * 5, "{net}: {fill}");
    }
    // No line across the matrices by default; with network_lines, one each way per
    // boundary and panel (the hemisphere's tick aside).
    let crossing = |svg: &str| svg.matches("opacity=\"0.6\" stroke=\"#000000\"").count();
    assert_eq!(crossing(&svg), 0);
    assert_eq!(crossing(&figure_svg(&names, true)), 5 * 2 * 5);
    // Names that are not Schaefer's: no strip, no key.
    let plain: Vec<String> = (0..4).map(|i| format!("roi_{i}_x")).collect();
    assert!(network_runs(&plain).is_empty());
    let svg = figure_svg(&plain, false);
    assert!(!svg.contains("LH | RH"));
}

#[test]
fn colour_maps_span_their_ends_and_white_at_zero() {
    assert_eq!(sequential(0.0), RGBColor(68, 1, 84));
    assert_eq!(sequential(1.0), RGBColor(253, 231, 37));
    assert_eq!(diverging(0.0), RGBColor(255, 255, 255));
    assert_eq!(diverging(1.0), RGBColor(178, 24, 43));
    assert_eq!(downsample(&Array2::ones((10, 10)), 4).dim(), (4, 4));
}
