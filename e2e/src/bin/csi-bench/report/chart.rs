//! The SVG chart of results.json: per scenario and limit setting, ours against upstream in objects per second,
//! the ceiling (a bare client doing the same API work) marked by a line; then, for every scenario both sides ran,
//! ours against upstream in peak RSS (the only chart a scale run has: its scenarios have no ceiling). Each group has
//! its own scale (rates differ a hundredfold between limit settings), printed beside the bars.

use std::fmt::Write;

use super::Results;
use super::results::{BARE, OURS, UPSTREAM};

const WIDTH: f64 = 760.0;
const LEFT: f64 = 190.0;
const BAR_WIDTH: f64 = WIDTH - LEFT - 130.0;
const BAR_HEIGHT: f64 = 14.0;
const GROUP_HEIGHT: f64 = 2.0 * BAR_HEIGHT + 22.0;

/// One group of bars: a scenario at one limit setting.
#[derive(Debug, PartialEq)]
struct Group {
    label: String,
    ours: f64,
    upstream: f64,
    ceiling: Option<f64>,
}

/// Peak RSS in MiB of every scenario and setting where both sides have one.
fn memory_groups(results: &Results) -> Vec<Group> {
    let mut groups = Vec::new();
    for (scenario, sides) in &results.summaries {
        let (Some(ours), Some(upstream)) = (sides.get(OURS), sides.get(UPSTREAM)) else { continue };
        for (setting, summary) in ours {
            let (Some(ours), Some(theirs)) = (summary.peak_rss_mib, upstream.get(setting).and_then(|u| u.peak_rss_mib))
            else {
                continue;
            };
            groups.push(Group { label: format!("{scenario} ({setting})"), ours, upstream: theirs, ceiling: None });
        }
    }
    groups
}

fn groups(results: &Results) -> Vec<Group> {
    let mut groups = Vec::new();
    for (scenario, sides) in &results.summaries {
        // Rates only mean something beside a ceiling (idle's "rate" is objects cached per second of start-up).
        if !results.ceilings.contains_key(scenario) {
            continue;
        }
        let (Some(ours), Some(upstream)) = (sides.get(OURS), sides.get(UPSTREAM)) else { continue };
        for (setting, summary) in ours {
            let Some(theirs) = upstream.get(setting) else { continue };
            let ceiling =
                results.ceilings.get(scenario).and_then(|c| results.get(c, BARE, setting)).map(|c| c.per_second);
            groups.push(Group {
                label: format!("{scenario} ({setting} limits)"),
                ours: summary.per_second,
                upstream: theirs.per_second,
                ceiling,
            });
        }
    }
    groups
}

/// The whole SVG document.
pub fn svg(results: &Results) -> String {
    let panels = [
        ("Objects per second: ours vs upstream (| = ceiling)", "/s", groups(results)),
        ("Peak RSS, MiB: ours vs upstream (shorter is better)", " MiB", memory_groups(results)),
    ];
    let panels: Vec<_> = panels.into_iter().filter(|(_, _, groups)| !groups.is_empty()).collect();
    let bars: usize = panels.iter().map(|(_, _, groups)| groups.len()).sum();
    let height = 30.0 * panels.len() as f64 + GROUP_HEIGHT * bars as f64 + 40.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let mut top = 0.0;
    for (title, unit, groups) in &panels {
        let _ = writeln!(out, r#"<text x="10" y="{:.1}" font-size="14">{title}</text>"#, top + 20.0);
        top += 40.0;
        for group in groups {
            draw(&mut out, group, top, unit);
            top += GROUP_HEIGHT;
        }
        top -= 10.0;
    }
    let ceilings = panels.iter().any(|(_, _, groups)| groups.iter().any(|g| g.ceiling.is_some()));
    let footer = if ceilings {
        "Each group has its own scale; the black line is the ceiling at the same limits."
    } else {
        "Each group has its own scale."
    };
    let _ = writeln!(out, r##"<text x="10" y="{:.1}" fill="#555">{footer}</text>"##, height - 10.0);
    out.push_str("</svg>\n");
    out
}

/// One group's two bars (and its ceiling), `top` being the first bar's top edge.
fn draw(out: &mut String, group: &Group, top: f64, unit: &str) {
    let scale =
        [group.ours, group.upstream, group.ceiling.unwrap_or(0.0)].into_iter().fold(f64::MIN_POSITIVE, f64::max);
    let _ = writeln!(out, r#"<text x="10" y="{:.1}">{}</text>"#, top + BAR_HEIGHT + 4.0, group.label);
    for (row, (side, value, colour)) in
        [(OURS, group.ours, "#d9480f"), (UPSTREAM, group.upstream, "#1c7ed6")].iter().enumerate()
    {
        let y = top + row as f64 * (BAR_HEIGHT + 2.0);
        let length = BAR_WIDTH * value / scale;
        let _ = writeln!(
            out,
            r#"<rect x="{LEFT}" y="{y:.1}" width="{length:.1}" height="{BAR_HEIGHT}" fill="{colour}"><title>{side}</title></rect>"#
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{side} {value:.1}{unit}</text>"#,
            LEFT + length + 4.0,
            y + BAR_HEIGHT - 3.0
        );
    }
    if let Some(ceiling) = group.ceiling {
        let x = LEFT + BAR_WIDTH * ceiling / scale;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="black" stroke-width="2"><title>ceiling {ceiling:.1}/s</title></line>"##,
            top - 3.0,
            top + 2.0 * BAR_HEIGHT + 5.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Run, Summary};

    #[test]
    fn one_group_per_scenario_and_setting_with_its_ceiling() {
        let mut results = Results::default();
        results.ceilings.insert("provision".into(), "ceiling".into());
        let summary = |objects, seconds| Summary::of(&[Run { objects, seconds, ..Default::default() }]);
        results.insert("provision", OURS, "raised", summary(100, 2.0));
        results.insert("provision", UPSTREAM, "raised", summary(100, 4.0));
        results.insert("ceiling", BARE, "raised", summary(100, 1.0));
        results.insert("idle", OURS, "raised", summary(1, 1.0));
        results.insert("idle", UPSTREAM, "raised", summary(1, 1.0));
        let found = groups(&results);
        assert_eq!(
            found,
            vec![Group { label: "provision (raised limits)".into(), ours: 50.0, upstream: 25.0, ceiling: Some(100.0) }],
            "idle has no ceiling, a ceiling no sidecar"
        );
        let svg = svg(&results);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // The ceiling is the longest: the full bar width; ours is half of it.
        assert!(svg.contains(&format!(r#"width="{:.1}""#, BAR_WIDTH / 2.0)), "{svg}");
        assert!(svg.contains("ceiling 100.0/s"));
        assert!(!svg.contains("Peak RSS"), "no panel without memory on both sides: {svg}");
    }

    #[test]
    fn memory_bars_for_every_scenario_both_sides_measured() {
        let mut results = Results::default();
        let summary = |rss| Summary::of(&[Run { objects: 1, seconds: 1.0, peak_rss_kib: rss, ..Default::default() }]);
        results.insert("idle_scale", OURS, "default", summary(Some(100 * 1024)));
        results.insert("idle_scale", UPSTREAM, "default", summary(Some(400 * 1024)));
        results.insert("idle_scale_combined", OURS, "default", summary(Some(160 * 1024)));
        results.insert("attach", OURS, "raised", summary(Some(20 * 1024)));
        results.insert("attach", UPSTREAM, "raised", summary(None));
        let want = Group { label: "idle_scale (default)".into(), ours: 100.0, upstream: 400.0, ceiling: None };
        assert_eq!(memory_groups(&results), vec![want], "ours alone, or upstream without a reading, draws nothing");
        let svg = svg(&results);
        assert!(svg.contains("Peak RSS") && !svg.contains("Objects per second"), "{svg}");
        assert!(svg.contains("ours 100.0 MiB") && svg.contains(&format!(r#"width="{:.1}""#, BAR_WIDTH / 4.0)), "{svg}");
    }
}
