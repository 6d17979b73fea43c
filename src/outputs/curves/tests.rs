use super::*;
use serde_json::{Value, json};

fn row(v: Value) -> MetricsRow {
    MetricsRow::from(v.as_object().unwrap().clone())
}

#[test]
fn columns_group_by_stage_and_skip_missing_values() {
    let rows = vec![
        row(json!({"fold": 0, "epoch": 1, "train_loss": 2.0, "val_loss": 3.0})),
        row(json!({"fold": 0, "epoch": 2, "train_loss": 1.0})),
        row(json!({"fold": 1, "epoch": 1, "train_loss": 4.0, "val_loss": null})),
    ];
    let g = column_by_stage(&rows, "train_loss");
    assert_eq!(
        g,
        vec![
            ("fold 0".to_string(), vec![(1.0, 2.0), (2.0, 1.0)]),
            ("fold 1".to_string(), vec![(1.0, 4.0)])
        ]
    );
    assert_eq!(column_by_stage(&rows, "val_loss").len(), 1);
    let charts = run_charts(&rows, &[Panel::new("loss", &["train_loss"], &["val_loss"])]);
    let labels: Vec<&str> = charts[0].lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        labels,
        ["train_loss (fold 0)", "train_loss (fold 1)", "val_loss"]
    );
    assert!(charts[0].lines[2].dashed);
}

#[test]
fn renders_svg_and_png_and_refuses_other_extensions() {
    let dir = tempfile::tempdir().unwrap();
    let chart = Chart {
        title: "loss".into(),
        lines: vec![Line {
            label: "a".into(),
            points: vec![(1.0, 2.0), (2.0, 1.0), (3.0, 0.5)],
            dashed: false,
        }],
    };
    render(std::slice::from_ref(&chart), &dir.path().join("c.svg")).unwrap();
    let svg = std::fs::read_to_string(dir.path().join("c.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("polyline"), "{svg}");
    render(std::slice::from_ref(&chart), &dir.path().join("c.png")).unwrap();
    let png = std::fs::read(dir.path().join("c.png")).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(render(&[chart], &dir.path().join("c.pdf")).is_err());
}

#[test]
fn a_run_keeps_its_colour_in_every_panel_and_the_legend_is_beside_the_data() {
    let line = |label: &str, y: f64| Line {
        label: label.into(),
        points: vec![(1.0, y), (2.0, y / 2.0)],
        dashed: false,
    };
    // Run "b" is the second line of the first chart and the first of the second.
    let charts = [
        Chart {
            title: "loss".into(),
            lines: vec![line("a", 2.0), line("b", 3.0)],
        },
        Chart {
            title: "skill".into(),
            lines: vec![line("b", 0.5)],
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    render(&charts, &dir.path().join("c.svg")).unwrap();
    let svg = std::fs::read_to_string(dir.path().join("c.svg")).unwrap();
    // Each polyline's stroke colour, in drawing order: a, b (chart 1), b (chart 2).
    // (the data lines are 2 px wide; the axes' and grid's 1 px).
    let strokes: Vec<&str> = svg
        .split("<polyline")
        .skip(1)
        .filter(|p| p.split('>').next().unwrap().contains("stroke-width=\"2\""))
        .map(|p| {
            p.split("stroke=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(strokes.len(), 3, "{svg}");
    assert_ne!(strokes[0], strokes[1]);
    assert_eq!(
        strokes[1], strokes[2],
        "run b changed colour between panels"
    );
    // The legend's labels start right of the data area.
    let text_x = |label: &str| -> f64 {
        let at = svg.find(&format!(">\n{label}\n</text>")).unwrap();
        let tag = &svg[svg[..at].rfind("<text").unwrap()..at];
        tag.split("x=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert!(
        text_x("b") >= f64::from(WIDTH),
        "legend at x = {}",
        text_x("b")
    );
}

#[test]
fn a_metric_spanning_decades_gets_a_log_axis_ticked_at_1_2_5_in_values_and_a_title_is_drawn() {
    let chart = |ys: &[f64]| Chart {
        title: "val_loss".into(),
        lines: vec![Line {
            label: "a".into(),
            points: ys.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect(),
            dashed: false,
        }],
    };
    let wide = chart(&[1.0, 0.1, 0.01, 0.001]);
    let narrow = chart(&[1.0, 0.5, 0.2]);
    let signed = chart(&[1.0, -0.001, 100.0]);
    assert!(spans_decades(&wide));
    assert!(!spans_decades(&narrow) && !spans_decades(&signed));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("c.svg");
    render_titled(&[wide], Some("My experiment"), Layout::Screen, &out).unwrap();
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("val_loss (log scale)"), "{svg}");
    assert!(svg.contains("My experiment"), "no title");
    // Ticks name round values at 1-2-5 (0.01, 0.02, 0.05), not their logarithms (-2, -1.5)
    // nor half decades (0.03162).
    assert!(
        [">\n0.01\n<", ">\n0.02\n<", ">\n0.05\n<", ">\n0.1\n<"]
            .iter()
            .all(|t| svg.contains(t))
            && !svg.contains("0.03162"),
        "{svg}"
    );
    render(&[narrow], &out).unwrap();
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(!svg.contains("log scale"));
}

/// The legend colour of each label in an SVG: the fill of the box drawn just before its text.
fn legend_fills(svg: &str, labels: &[&str]) -> Vec<String> {
    labels
        .iter()
        .map(|l| {
            let at = svg
                .find(&format!(">\n{l}\n<"))
                .unwrap_or_else(|| panic!("{l} not in {svg}"));
            let head = &svg[..at];
            let rect = &head[head.rfind("<rect").expect("a box before the label")..];
            let fill = rect.find("fill=\"#").expect("a filled box") + 6;
            rect[fill..fill + 7].to_string()
        })
        .collect()
}

#[test]
fn a_label_keeps_its_colour_when_the_arguments_come_in_another_order() {
    let line = |label: &str, y: f64| Line {
        label: label.into(),
        points: vec![(1.0, y), (2.0, y / 2.0)],
        dashed: false,
    };
    let names = ["identity", "linear-drift", "eb-drift"];
    let dir = tempfile::tempdir().unwrap();
    let mut fills = Vec::new();
    for order in [[0, 1, 2], [2, 0, 1]] {
        let chart = Chart {
            title: "sc_log_mse".into(),
            lines: order
                .iter()
                .map(|&i| line(names[i], 1.0 + i as f64))
                .collect(),
        };
        let out = dir.path().join("c.svg");
        render(&[chart], &out).unwrap();
        fills.push(legend_fills(
            &std::fs::read_to_string(&out).unwrap(),
            &names,
        ));
    }
    assert_eq!(fills[0], fills[1], "colours moved with the order");
    let mut distinct = fills[0].clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{fills:?}");
}
