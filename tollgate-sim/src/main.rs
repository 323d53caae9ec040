//! `tollgate-sim`: see the crate's documentation (`tollgate_sim`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

/// `println!` that shrugs off a closed stdout (`tollgate-sim list | head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
use tollgate_sim::SimError;
use tollgate_sim::arrivals::{Keys, Pattern, Traffic};
use tollgate_sim::replay::{RulesLimiter, Series, replay};
use tollgate_sim::scenarios::{SCENARIOS, run};

#[derive(Parser)]
#[command(
    name = "tollgate-sim",
    about = "See what a limit does to your traffic before deploying it."
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Names the built-in scenarios and what each shows.
    List,
    /// Runs a built-in scenario.
    Scenario {
        /// The scenario's name (`list` names them).
        name: String,
        /// The seed of its random traffic.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// A directory for each limit's series, as CSV and JSON.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Runs scenarios (every one by default) into one self-contained HTML page.
    Report {
        /// The scenarios, in order.
        names: Vec<String>,
        /// The seed of their random traffic.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where to write the page.
        #[arg(long, default_value = "tollgate-sim-report.html")]
        out: PathBuf,
    },
    /// Replays traffic against a rules file (a domain file of the rate limit service).
    Run {
        /// The rules file.
        #[arg(long)]
        rules: PathBuf,
        /// The descriptor key a request's key is the value of.
        #[arg(long, default_value = "user")]
        key: String,
        /// A recorded traffic (`timestamp,key,cost,class` lines) instead of a pattern.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// The arrival pattern.
        #[arg(long, value_enum, default_value = "poisson")]
        pattern: PatternName,
        /// Requests a second (the top rate for `ramp`, from 0).
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        /// Seconds of traffic.
        #[arg(long, default_value_t = 60.0)]
        duration: f64,
        /// For `on-off`: seconds on, then seconds off.
        #[arg(long, default_value_t = 1.0)]
        on: f64,
        #[arg(long, default_value_t = 4.0)]
        off: f64,
        /// Distinct keys, drawn with a Zipf popularity.
        #[arg(long, default_value_t = 1)]
        keys: u32,
        /// The Zipf exponent (0: uniform).
        #[arg(long, default_value_t = 1.0)]
        zipf: f64,
        /// Permits each request asks for.
        #[arg(long, default_value_t = 1)]
        cost: u64,
        /// The seed of the traffic.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Milliseconds per step of the series.
        #[arg(long, default_value_t = 1000)]
        step_ms: u64,
        /// A directory for the series, as CSV and JSON.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum PatternName {
    Constant,
    Poisson,
    OnOff,
    Ramp,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match execute(args.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tollgate-sim: {e}");
            ExitCode::from(2)
        }
    }
}

fn execute(command: Command) -> Result<(), Box<dyn std::error::Error>> {
    match command {
        Command::List => {
            for s in SCENARIOS {
                say!("{:<10} {}", s.name, s.shows);
            }
        }
        Command::Report { names, seed, out } => {
            let names: Vec<String> = if names.is_empty() {
                SCENARIOS.iter().map(|s| s.name.to_owned()).collect()
            } else {
                names
            };
            let outcomes = names
                .iter()
                .map(|name| run(name, seed))
                .collect::<Result<Vec<_>, _>>()?;
            std::fs::write(&out, tollgate_sim::report::html(&outcomes)?)?;
            say!("wrote {}", out.display());
        }
        Command::Scenario { name, seed, out } => {
            let outcome = run(&name, seed)?;
            say!(
                "{:<16} {:>9} {:>24}",
                "limit",
                "admitted",
                format!("most in any {:?}", outcome.span)
            );
            for s in &outcome.series {
                say!(
                    "{:<16} {:>9} {:>24}",
                    s.name,
                    s.admitted(),
                    s.most_admitted_text(outcome.span)
                );
            }
            if let Some(dir) = out {
                for s in &outcome.series {
                    // A file name from the limit's name: letters, digits, `_` and `-`.
                    let limit: String = s
                        .name
                        .chars()
                        .map(|c| {
                            if c.is_ascii_alphanumeric() || c == '-' {
                                c
                            } else {
                                '_'
                            }
                        })
                        .collect();
                    write(&dir, &format!("{}-{limit}", outcome.name), s)?;
                }
                let picture =
                    tollgate_sim::plot::svg(outcome.name, &outcome.series, outcome.measure)?;
                let path = dir.join(format!("{}.svg", outcome.name));
                std::fs::write(&path, picture)?;
                say!("wrote {}", path.display());
            }
        }
        Command::Run {
            rules,
            key,
            trace,
            pattern,
            rate,
            duration,
            on,
            off,
            keys,
            zipf,
            cost,
            seed,
            step_ms,
            out,
        } => {
            let yaml = std::fs::read_to_string(&rules)
                .map_err(|e| format!("cannot read {}: {e}", rules.display()))?;
            let mut limiter = RulesLimiter::new(&yaml, &key)?;
            let seconds = |name: &'static str, s: f64| {
                Duration::try_from_secs_f64(s).map_err(|_| SimError::Traffic {
                    parameter: name,
                    expected: "a finite, non-negative number of seconds",
                })
            };
            let step = Duration::from_millis(step_ms);
            let series = if let Some(path) = trace {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                let trace = tollgate_sim::trace::read(&text)?;
                let names = trace.keys.clone();
                replay(
                    "trace",
                    &trace.arrivals,
                    &move |k| names[k as usize].clone(),
                    &mut limiter,
                    step,
                )?
            } else {
                let traffic = Traffic {
                    pattern: match pattern {
                        PatternName::Constant => Pattern::Constant { rate },
                        PatternName::Poisson => Pattern::Poisson { rate },
                        PatternName::OnOff => Pattern::OnOff {
                            rate,
                            on: seconds("on", on)?,
                            off: seconds("off", off)?,
                        },
                        PatternName::Ramp => Pattern::Ramp {
                            from: 0.0,
                            to: rate,
                        },
                    },
                    keys: if keys <= 1 {
                        Keys::One
                    } else {
                        Keys::Zipf {
                            n: keys,
                            exponent: zipf,
                        }
                    },
                    cost,
                    duration: seconds("duration", duration)?,
                };
                let arrivals = traffic.arrivals(seed)?;
                replay(
                    "run",
                    &arrivals,
                    &|k| traffic.key_name(k),
                    &mut limiter,
                    step,
                )?
            };
            say!(
                "{} requests, {} admitted, {} denied",
                series.steps.iter().map(|s| s.offered).sum::<u64>(),
                series.admitted(),
                series.steps.iter().map(|s| s.denied).sum::<u64>()
            );
            if let Some(dir) = out {
                write(&dir, "run", &series)?;
                let picture = tollgate_sim::plot::svg(
                    "run",
                    std::slice::from_ref(&series),
                    tollgate_sim::plot::Measure::PerStep,
                )?;
                std::fs::write(dir.join("run.svg"), picture)?;
                say!("wrote {}/run.svg", dir.display());
            }
        }
    }
    Ok(())
}

/// `dir/name.csv` and `dir/name.json`.
fn write(dir: &Path, name: &str, series: &Series) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(format!("{name}.csv")), series.to_csv())?;
    std::fs::write(dir.join(format!("{name}.json")), series.to_json())?;
    say!("wrote {}/{name}.csv and .json", dir.display());
    Ok(())
}
