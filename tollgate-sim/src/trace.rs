//! A recorded traffic, from CSV: `timestamp,key,cost,class`, one request a line.

use std::collections::HashMap;
use std::time::Duration;

use crate::arrivals::Arrival;
use crate::error::SimError;

/// A trace read: its arrivals and the names of their keys.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The requests, in time order.
    pub arrivals: Vec<Arrival>,
    /// Key names, by [`Arrival::key`].
    pub keys: Vec<String>,
    /// Each request's class (the shedders' criticality), by arrival.
    pub classes: Vec<String>,
}

/// Reads a trace: lines of `timestamp,key[,cost[,class]]`, the timestamp in seconds
/// (a decimal) from the trace's start, times never going back, the cost 1 when left
/// out. A first line starting with `timestamp` is a header; blank lines and lines
/// starting with `#` are skipped.
///
/// # Errors
///
/// [`SimError::Trace`] naming the line: a timestamp that is not a finite,
/// non-negative number, one earlier than the line before, an empty key, or a cost
/// that is not a whole number of at least 1 (a negative one included).
///
/// # Examples
///
/// ```
/// use tollgate_sim::trace::read;
///
/// let trace = read("timestamp,key,cost,class\n0.0,alice,1,critical\n0.5,bob,2,sheddable\n")?;
/// assert_eq!(trace.arrivals.len(), 2);
/// assert_eq!(trace.keys, ["alice", "bob"]);
/// assert_eq!(trace.arrivals[1].cost, 2);
///
/// let err = read("1.0,alice\n0.5,bob\n").unwrap_err();
/// assert_eq!(err.to_string(), "trace line 2: 0.5 is earlier than the line before (1.0)");
/// # Ok::<(), tollgate_sim::SimError>(())
/// ```
pub fn read(text: &str) -> Result<Trace, SimError> {
    let mut trace = Trace::default();
    let mut by_name: HashMap<String, u32> = HashMap::new();
    let mut last: Option<(f64, &str)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let row = raw.trim();
        if row.is_empty() || row.starts_with('#') || (i == 0 && row.starts_with("timestamp")) {
            continue;
        }
        let bad = |message: String| SimError::Trace { line, message };
        let mut fields = row.split(',').map(str::trim);
        let stamp = fields.next().unwrap_or_default();
        let seconds: f64 = stamp
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s < 1e12)
            .ok_or_else(|| bad(format!("{stamp:?} is not a time in seconds (like 1.25)")))?;
        if let Some((before, text)) = last {
            if seconds < before {
                return Err(bad(format!(
                    "{stamp} is earlier than the line before ({text})"
                )));
            }
        }
        last = Some((seconds, stamp));
        let key = fields.next().unwrap_or_default();
        if key.is_empty() {
            return Err(bad("the key is empty".to_owned()));
        }
        let cost =
            match fields.next() {
                None | Some("") => 1,
                Some(c) => c.parse::<u64>().ok().filter(|&c| c >= 1).ok_or_else(|| {
                    bad(format!("cost {c:?} is not a whole number of at least 1"))
                })?,
            };
        let class = fields.next().unwrap_or_default().to_owned();
        let next = u32::try_from(trace.keys.len()).map_err(|_| bad("too many keys".into()))?;
        let index = *by_name.entry(key.to_owned()).or_insert_with(|| {
            trace.keys.push(key.to_owned());
            next
        });
        trace.arrivals.push(Arrival {
            at: Duration::from_secs_f64(seconds),
            key: index,
            cost,
        });
        trace.classes.push(class);
    }
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(text: &str) -> String {
        read(text).unwrap_err().to_string()
    }

    #[test]
    fn each_bad_line_is_named() {
        assert_eq!(
            error_of("0,a\nsoon,b\n"),
            "trace line 2: \"soon\" is not a time in seconds (like 1.25)"
        );
        assert!(error_of("-1,a\n").starts_with("trace line 1:"));
        assert!(error_of("NaN,a\n").starts_with("trace line 1:"));
        assert!(error_of("# comment\n0,a,-3\n").contains("line 2: cost \"-3\""));
        assert!(error_of("0,a,0\n").contains("at least 1"));
        assert!(error_of("0,\n").contains("the key is empty"));
    }

    #[test]
    fn keys_are_numbered_in_order_of_appearance() {
        let trace = read("0,b\n0,a\n1,b,3\n").unwrap();
        assert_eq!(trace.keys, ["b", "a"]);
        let keys: Vec<u32> = trace.arrivals.iter().map(|a| a.key).collect();
        assert_eq!(keys, [0, 1, 0]);
        assert_eq!(trace.arrivals[2].cost, 3);
    }
}
