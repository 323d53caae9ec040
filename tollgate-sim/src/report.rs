//! One self-contained HTML page comparing scenarios: each one's plot (inline SVG),
//! what it shows, and a table of its limits side by side.

use crate::error::SimError;
use crate::plot::svg;
use crate::scenarios::{Outcome, SCENARIOS};

/// The page for `outcomes`: no script, no external file, so it opens anywhere and
/// renders the same in a headless browser.
///
/// # Errors
///
/// [`SimError::Plot`] when a plot cannot be drawn.
///
/// # Examples
///
/// ```
/// use tollgate_sim::report::html;
/// use tollgate_sim::scenarios::run;
///
/// let page = html(&[run("boundary", 1)?, run("blocked", 1)?])?;
/// assert!(page.starts_with("<!DOCTYPE html>"));
/// assert_eq!(page.matches("<svg").count(), 2);
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn html(outcomes: &[Outcome]) -> Result<String, SimError> {
    let mut page = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>tollgate-sim report</title>\n<style>\n\
         body { font-family: sans-serif; margin: 2em auto; max-width: 960px; color: #222; }\n\
         h2 { margin-top: 2em; }\n\
         table { border-collapse: collapse; margin: 1em 0; }\n\
         th, td { border: 1px solid #ccc; padding: 0.3em 0.8em; text-align: right; }\n\
         th:first-child, td:first-child { text-align: left; }\n\
         </style>\n</head>\n<body>\n<h1>tollgate-sim: the same traffic, several limits</h1>\n",
    );
    for outcome in outcomes {
        let shows = SCENARIOS
            .iter()
            .find(|s| s.name == outcome.name)
            .map_or("", |s| s.shows);
        page.push_str(&format!(
            "<section>\n<h2>{}</h2>\n<p>{}</p>\n",
            escape(outcome.name),
            escape(shows)
        ));
        page.push_str(&svg(
            outcome.name,
            &outcome.series,
            outcome.measure,
            outcome.reference.as_ref(),
        )?);
        page.push_str(&format!(
            "\n<table>\n<tr><th>limit</th><th>offered</th><th>admitted</th><th>most admitted in any {:?}</th></tr>\n",
            outcome.span
        ));
        for s in &outcome.series {
            let offered: u64 = s.steps.iter().map(|s| s.offered).sum();
            page.push_str(&format!(
                "<tr><td>{}</td><td>{offered}</td><td>{}</td><td>{}</td></tr>\n",
                escape(&s.name),
                s.admitted(),
                s.most_admitted_text(outcome.span)
            ));
        }
        page.push_str("</table>\n</section>\n");
    }
    page.push_str("</body>\n</html>\n");
    Ok(page)
}

/// Text made safe for HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
