//! Series drawn as SVG: what each limit admitted per step, over what was offered.

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::series::DashedLineSeries;

use crate::error::SimError;
use crate::replay::Series;

/// The plot's size in pixels.
pub const SIZE: (u32, u32) = (900, 420);

/// What a plot's lines count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Requests per step.
    PerStep,
    /// Requests in the span before each step's end: a limit of so many per span
    /// shows as a line it keeps under.
    Rolling(std::time::Duration),
    /// Each series' `limit` at each step's end, beside the service's knee: where an
    /// adaptive limit settles.
    Limit {
        /// The service's knee, drawn as a grey line.
        knee: u64,
    },
}

/// An SVG of `series` (the same traffic against several limits): the requests
/// offered in grey, and each limit's admitted in a colour of its own, counted as
/// `measure` says, with a legend; `reference` (a curve computed rather than
/// simulated) dashed in black over them. Text is SVG text, so no font is needed to
/// draw it.
///
/// # Errors
///
/// [`SimError::Plot`] when no series has a step, or plotters fails.
///
/// # Examples
///
/// ```
/// use tollgate_sim::plot::{Measure, svg};
/// use tollgate_sim::scenarios::run;
///
/// let outcome = run("boundary", 1)?;
/// let picture = svg("boundary", &outcome.series, Measure::Rolling(outcome.span), None)?;
/// assert!(picture.starts_with("<svg"));
/// assert!(picture.contains("fixed_window"));
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn svg(
    title: &str,
    series: &[Series],
    measure: Measure,
    reference: Option<&Series>,
) -> Result<String, SimError> {
    let first = series
        .iter()
        .find(|s| !s.steps.is_empty())
        .ok_or_else(|| SimError::Plot("no series has a step".into()))?;
    let step_s = first.step_ms as f64 / 1_000.0;
    // Each line's points: at a step's start (per step) or its end (rolling).
    let offered: Vec<u64> = match measure {
        Measure::PerStep => first.steps.iter().map(|s| s.offered).collect(),
        Measure::Rolling(span) => {
            let mut offered = first.clone();
            offered.admitted_at_us = offered_times(first);
            offered.rolling(span)
        }
        // The grey line is the knee.
        Measure::Limit { knee } => vec![knee; first.steps.len()],
    };
    let count = |s: &Series| -> Vec<u64> {
        match measure {
            Measure::PerStep => s.steps.iter().map(|s| s.admitted).collect(),
            // Only adaptive series are drawn so, and each of their steps has a limit.
            Measure::Limit { .. } => s.steps.iter().map(|s| s.limit.unwrap_or(0)).collect(),
            Measure::Rolling(span) => s.rolling(span),
        }
    };
    let admitted: Vec<Vec<u64>> = series.iter().map(&count).collect();
    let reference = reference.map(|r| (r, count(r)));
    let shift = match measure {
        Measure::PerStep => 0.0,
        Measure::Rolling(_) | Measure::Limit { .. } => step_s,
    };
    let x_max = series
        .iter()
        .filter_map(|s| s.steps.last())
        .map(|s| s.t_ms as f64 / 1_000.0 + step_s)
        .fold(step_s, f64::max);
    let y_max = offered
        .iter()
        .chain(admitted.iter().flatten())
        .chain(reference.iter().flat_map(|(_, counts)| counts))
        .copied()
        .max()
        .unwrap_or(1)
        .max(1);
    let y_desc = match measure {
        Measure::PerStep => format!("requests per {} ms", first.step_ms),
        Measure::Rolling(span) => format!("requests in the last {span:?}"),
        Measure::Limit { .. } => "concurrency limit".to_owned(),
    };
    let (grey_label, line_label) = match measure {
        Measure::Limit { .. } => ("the service's knee", ""),
        _ => ("offered", " (admitted)"),
    };
    let plot = |e: &dyn std::fmt::Display| SimError::Plot(e.to_string());
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(|e| plot(&e))?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..x_max, 0u64..y_max + y_max / 10 + 1)
            .map_err(|e| plot(&e))?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(y_desc)
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(|e| plot(&e))?;
        let grey = RGBColor(190, 190, 190);
        chart
            .draw_series(LineSeries::new(
                points(first, &offered, shift),
                grey.stroke_width(3),
            ))
            .map_err(|e| plot(&e))?
            .label(grey_label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], grey.stroke_width(3))
            });
        for (i, (s, counts)) in series.iter().zip(&admitted).enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(
                    points(s, counts, shift),
                    colour.stroke_width(2),
                ))
                .map_err(|e| plot(&e))?
                .label(format!("{}{line_label}", s.name))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        if let Some((r, counts)) = &reference {
            chart
                .draw_series(DashedLineSeries::new(
                    points(r, counts, shift).collect::<Vec<_>>(),
                    6,
                    4,
                    BLACK.stroke_width(2),
                ))
                .map_err(|e| plot(&e))?
                .label(r.name.clone())
                .legend(|(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 20, y)], 6, 4, BLACK.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.85))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| plot(&e))?;
        root.present().map_err(|e| plot(&e))?;
    }
    Ok(out)
}

/// A line's points: each step's time (plus `shift` seconds) and its count.
fn points<'a>(
    s: &'a Series,
    counts: &'a [u64],
    shift: f64,
) -> impl Iterator<Item = (f64, u64)> + 'a {
    s.steps
        .iter()
        .zip(counts)
        .map(move |(step, &n)| (step.t_ms as f64 / 1_000.0 + shift, n))
}

/// The time of every request offered, spread evenly within its step (a series keeps
/// only the admitted ones' times): the offered line's rolling count.
fn offered_times(s: &Series) -> Vec<u64> {
    let step_us = s.step_ms.saturating_mul(1_000).max(1);
    s.steps
        .iter()
        .flat_map(|step| {
            let start = step.t_ms.saturating_mul(1_000);
            (0..step.offered).map(move |k| start + k * step_us / step.offered.max(1))
        })
        .collect()
}
