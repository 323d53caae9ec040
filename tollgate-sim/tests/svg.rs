//! Every SVG the simulator draws parses and renders, in pure Rust (resvg), with lines
//! in its plot area.

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{Options, Tree};
use tollgate_sim::plot::{Measure, SIZE, svg};
use tollgate_sim::scenarios::{SCENARIOS, run};

/// Coloured pixels outside the legend: the limits' lines, not the black and grey of
/// the axes, the grid, the text or the offered line.
fn inked_plot_pixels(picture: &str) -> usize {
    let tree = Tree::from_str(picture, &Options::default()).expect("the SVG parses");
    let size = tree.size().to_int_size();
    assert_eq!((size.width(), size.height()), SIZE);
    let mut pixmap = Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(&tree, Transform::default(), &mut pixmap.as_mut());
    let (w, h) = (size.width() as usize, size.height() as usize);
    let data = pixmap.data();
    let mut inked = 0;
    // Everywhere but the legend's corner.
    for y in 0..h {
        for x in 0..w {
            if x < w / 3 && y < h / 3 {
                continue;
            }
            let p = &data[(y * w + x) * 4..(y * w + x) * 4 + 4];
            let (hi, lo) = (p[0].max(p[1]).max(p[2]), p[0].min(p[1]).min(p[2]));
            if p[3] > 0 && hi - lo > 60 {
                inked += 1;
            }
        }
    }
    inked
}

#[test]
fn every_scenario_draws_a_plot_with_lines() {
    for scenario in SCENARIOS {
        let outcome = run(scenario.name, 1).unwrap();
        for measure in [outcome.measure, Measure::PerStep] {
            let picture = svg(
                scenario.name,
                &outcome.series,
                measure,
                outcome.reference.as_ref(),
            )
            .unwrap();
            let inked = inked_plot_pixels(&picture);
            assert!(
                inked > 1_000,
                "{} {measure:?}: {inked} inked pixels",
                scenario.name
            );
        }
    }
}

#[test]
fn a_plot_of_nothing_is_an_error_not_an_empty_picture() {
    let err = svg("empty", &[], Measure::PerStep, None).unwrap_err();
    assert_eq!(err.to_string(), "plot: no series has a step");
}

/// The README's pictures are the simulator's own output, not stale copies:
/// `cargo run -p tollgate-sim -- scenario NAME --out DIR` draws `DIR/NAME.svg`.
#[test]
fn the_readme_pictures_are_current() {
    for scenario in SCENARIOS {
        let outcome = run(scenario.name, 1).unwrap();
        let picture = svg(
            scenario.name,
            &outcome.series,
            outcome.measure,
            outcome.reference.as_ref(),
        )
        .unwrap();
        let path = format!(
            "{}/../docs/sim/{}.svg",
            env!("CARGO_MANIFEST_DIR"),
            scenario.name
        );
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == picture,
            "{path} is stale: cargo run -p tollgate-sim -- scenario {} --out DIR, then copy DIR/{}.svg",
            scenario.name,
            scenario.name
        );
    }
}

#[test]
fn the_warmup_plot_draws_guavas_documented_shape_over_the_simulation() {
    let outcome = run("warmup", 1).unwrap();
    let picture = svg(
        "warmup",
        &outcome.series,
        outcome.measure,
        outcome.reference.as_ref(),
    )
    .unwrap();
    assert!(picture.contains("documented shape"));
    assert!(picture.contains("SmoothWarmingUp, a caller that waits"));
}
