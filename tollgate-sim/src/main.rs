//! `tollgate-sim`: see the crate's documentation (`tollgate_sim`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

/// `println!` that shrugs off a closed stdout (`tollgate-sim list | head`).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
use tollgate::adaptive::WhenLimited;
use tollgate::shed::Classes;
use tollgate::time::ManualClock;
use tollgate_sim::SimError;
use tollgate_sim::arrivals::{Pattern, Traffic};
use tollgate_sim::domains;
use tollgate_sim::replay::{RulesLimiter, Series, replay};
use tollgate_sim::scenarios::{SCENARIOS, run};
use tollgate_sim::service::{
    Gate, KNEE_SERVICE, Setup, adaptive_algorithm, draw_classes, parse_mix, parse_service, simulate,
};

#[derive(Parser)]
#[command(
    name = "tollgate-sim",
    about = "See what a limit does to your traffic before deploying it."
)]
struct Cli {
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
    /// Replays traffic against a limit: the rate limit service's domain file or
    /// directory, or an adaptive limiter or a shedder in front of the service model.
    Run(Box<RunArgs>),
}

/// `run`'s flags.
#[derive(Args)]
#[command(group(ArgGroup::new("limit").args(["rules", "config", "adaptive", "shed"])))]
struct RunArgs {
    /// A domain file of the rate limit service (every algorithm).
    #[arg(long)]
    rules: Option<PathBuf>,
    /// A directory of domain files, read as `tollgate-rls --config DIR` reads it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// With `--config`: the domain, when the directory holds several.
    #[arg(long, requires = "config")]
    domain: Option<String>,
    /// A descriptor each request carries, for `--rules` or `--config` (repeat for
    /// several): `KEY` (its value is the request's key) or `KEY=VALUE`, joined by
    /// commas for a nested one (`header_match=api,method=POST`). Default: `user`.
    #[arg(long = "descriptor")]
    descriptors: Vec<String>,
    /// An adaptive concurrency limit in front of the service model: `aimd`,
    /// `vegas`, `gradient2` or `envoy-gradient`.
    #[arg(long)]
    adaptive: Option<String>,
    /// With `--adaptive`: what a request does when every permit is held
    /// [default: fail-fast].
    #[arg(long, value_enum)]
    when_limited: Option<WhenLimitedName>,
    /// With `--when-limited fifo` or `lifo`: the longest wait, in milliseconds
    /// [default: 500].
    #[arg(long)]
    wait_ms: Option<u64>,
    /// With `--when-limited lifo`: the most requests waiting [default: 100].
    #[arg(long)]
    backlog: Option<usize>,
    /// A load shedder in front of the service model: `fleet` or `utilisation`.
    #[arg(long)]
    shed: Option<String>,
    /// With `--shed`: the requests in flight the service runs [default: 100].
    #[arg(long)]
    capacity: Option<u64>,
    /// With `--shed fleet`: the share of the capacity kept for critical work
    /// [default: 0.2].
    #[arg(long)]
    reserve: Option<f64>,
    /// The classes of pattern traffic, drawn with the seed: `critical=1,sheddable=4`
    /// (Google's classes; a trace's come from its class column).
    #[arg(long)]
    mix: Option<String>,
    /// The service model: `base_ms=10,knee=10,growth=0.2,max_in_flight=40,jitter=0.1`
    /// (the defaults), any of them, and `hang_ms=N` for a service that hangs past
    /// `max_in_flight` rather than refusing. Alone: the service unprotected.
    #[arg(long, conflicts_with_all = ["rules", "config"])]
    service: Option<String>,
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
    /// Permits each request asks for (a request to the service model is one in
    /// flight whatever its cost).
    #[arg(long, default_value_t = 1)]
    cost: u64,
    /// The seed of the traffic (and of the service's jitter).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Milliseconds per step of the series.
    #[arg(long, default_value_t = 1000)]
    step_ms: u64,
    /// A directory for the series, as CSV and JSON, and its plot.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WhenLimitedName {
    FailFast,
    Fifo,
    Lifo,
}

#[derive(Clone, Copy, ValueEnum)]
enum PatternName {
    Constant,
    Poisson,
    OnOff,
    Ramp,
}

fn main() -> ExitCode {
    let args = Cli::parse();
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
                let picture = tollgate_sim::plot::svg(
                    outcome.name,
                    &outcome.series,
                    outcome.measure,
                    outcome.reference.as_ref(),
                )?;
                let path = dir.join(format!("{}.svg", outcome.name));
                std::fs::write(&path, picture)?;
                say!("wrote {}", path.display());
            }
        }
        Command::Run(args) => {
            let RunArgs {
                rules,
                config,
                domain,
                descriptors,
                adaptive,
                when_limited,
                wait_ms,
                backlog,
                shed,
                capacity,
                reserve,
                mix,
                service,
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
            } = *args;
            let step = Duration::from_millis(step_ms);
            // A flag given where it does nothing is refused, not ignored.
            let mode = when_limited.unwrap_or(WhenLimitedName::FailFast);
            let misplaced = [
                (
                    when_limited.is_some() && adaptive.is_none(),
                    "--when-limited is for --adaptive",
                ),
                (
                    wait_ms.is_some() && mode == WhenLimitedName::FailFast,
                    "--wait-ms is for --when-limited fifo or lifo",
                ),
                (
                    backlog.is_some() && mode != WhenLimitedName::Lifo,
                    "--backlog is for --when-limited lifo",
                ),
                (
                    capacity.is_some() && shed.is_none(),
                    "--capacity is for --shed",
                ),
                (
                    reserve.is_some() && shed.as_deref() != Some("fleet"),
                    "--reserve is for --shed fleet",
                ),
            ];
            if let Some((_, message)) = misplaced.iter().find(|(wrong, _)| *wrong) {
                return Err((*message).into());
            }
            if !descriptors.is_empty() && rules.is_none() && config.is_none() {
                return Err("--descriptor is for --rules or --config".into());
            }
            if mix.is_some() && trace.is_some() {
                return Err(
                    "--mix is for pattern traffic: a trace's classes are its class column".into(),
                );
            }
            // The traffic: a trace, or a pattern (with classes drawn from `--mix`).
            let (arrivals, key_names, class_names) = match &trace {
                Some(path) => {
                    let text = std::fs::read_to_string(path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                    let trace = tollgate_sim::trace::read(&text)?;
                    (trace.arrivals, Keys::Named(trace.keys), Some(trace.classes))
                }
                None => {
                    let traffic = traffic(pattern, rate, duration, on, off, keys, zipf, cost)?;
                    (traffic.arrivals(seed)?, Keys::Pattern(traffic), None)
                }
            };
            let key_name = |k: u32| match &key_names {
                Keys::Named(names) => names[k as usize].clone(),
                Keys::Pattern(traffic) => traffic.key_name(k),
            };
            // The service's knee, for an adaptive limit's picture.
            let mut knee = None;
            let rule_set = match (&rules, &config) {
                (Some(file), _) => Some(domains::load_file(file)?),
                (None, Some(dir)) => Some(domains::load_dir(dir, domain.as_deref())?),
                (None, None) => None,
            };
            if rule_set.is_some() && mix.is_some() {
                return Err("--mix is for --adaptive, --shed or --service".into());
            }
            let (name, series) = if let Some(rule_set) = rule_set {
                let descriptors_given = descriptors.clone();
                let descriptors = if descriptors.is_empty() {
                    vec![vec![("user".to_owned(), None)]]
                } else {
                    descriptors
                        .iter()
                        .map(|d| domains::parse_descriptor(d))
                        .collect::<Result<_, _>>()?
                };
                let domain_name = rule_set.domain().to_owned();
                let mut limiter = RulesLimiter::with_rules(rule_set, descriptors)?;
                let name = if trace.is_some() { "trace" } else { "run" };
                let series = replay(name, &arrivals, &key_name, &mut limiter, step)?;
                if limiter.unmatched() > 0 {
                    let given = if descriptors_given.is_empty() {
                        "user".to_owned()
                    } else {
                        descriptors_given.join(" ")
                    };
                    eprintln!(
                        "tollgate-sim: note: {} requests matched no limit of domain {domain_name:?} \
                         (descriptors: {given}): admitted, as the service admits them",
                        limiter.unmatched()
                    );
                }
                (name, vec![series])
            } else if adaptive.is_some() || shed.is_some() || service.is_some() {
                let model = match &service {
                    Some(spec) => parse_service(spec)?,
                    None => KNEE_SERVICE,
                };
                let clock = ManualClock::new();
                let gate = match (&adaptive, &shed) {
                    (Some(name), _) => {
                        let algorithm = adaptive_algorithm(name, &model, &clock, seed)?;
                        let wait = Duration::from_millis(wait_ms.unwrap_or(500));
                        let mode = match mode {
                            WhenLimitedName::FailFast => WhenLimited::FailFast,
                            WhenLimitedName::Fifo => WhenLimited::fifo(wait)
                                .map_err(|e| SimError::Limiter(e.to_string()))?,
                            WhenLimitedName::Lifo => {
                                WhenLimited::lifo(backlog.unwrap_or(100), wait)
                                    .map_err(|e| SimError::Limiter(e.to_string()))?
                            }
                        };
                        Gate::adaptive(algorithm, mode, &clock)?
                    }
                    (_, Some(name)) => Gate::shedder(
                        name,
                        capacity.unwrap_or(100),
                        reserve.unwrap_or(0.2),
                        &clock,
                    )?,
                    _ => Gate::Unlimited,
                };
                let google = Classes::google();
                let classes: Vec<_> = match (&class_names, &mix) {
                    (Some(names), _) if names.iter().any(|n| !n.is_empty()) => {
                        names.iter().map(|n| google.parse(n)).collect()
                    }
                    (_, Some(spec)) => {
                        draw_classes(arrivals.len(), &parse_mix(spec)?, seed.wrapping_add(1))
                    }
                    _ => Vec::new(),
                };
                let setup = Setup {
                    service: model,
                    step,
                    tick: Duration::from_millis(10),
                    seed,
                };
                let served = simulate("run", &setup, &arrivals, &classes, &gate, &clock)?;
                if adaptive.is_some() {
                    knee = Some(model.knee);
                }
                let mut series = vec![served.total];
                series.extend(served.by_class);
                ("run", series)
            } else {
                return Err(
                    "run needs a limit: --rules FILE, --config DIR, --adaptive NAME, --shed NAME or --service SPEC"
                        .into(),
                );
            };
            let total = &series[0];
            say!(
                "{} requests, {} admitted, {} denied",
                total.steps.iter().map(|s| s.offered).sum::<u64>(),
                total.admitted(),
                total.steps.iter().map(|s| s.denied).sum::<u64>()
            );
            if let Some(dir) = out {
                write(&dir, name, total)?;
                // Per class, after the total: `run-critical.csv`, ...
                for class in &series[1..] {
                    write(&dir, &format!("{name}-{}", class.name), class)?;
                }
                let picture = tollgate_sim::plot::svg(
                    name,
                    &series,
                    tollgate_sim::plot::Measure::PerStep,
                    None,
                )?;
                std::fs::write(dir.join(format!("{name}.svg")), picture)?;
                say!("wrote {}/{name}.svg", dir.display());
                // An adaptive limit's own picture: where it settles against the knee.
                if let Some(knee) = knee {
                    let picture = tollgate_sim::plot::svg(
                        "run: the limit",
                        &series[..1],
                        tollgate_sim::plot::Measure::Limit { knee },
                        None,
                    )?;
                    std::fs::write(dir.join(format!("{name}-limit.svg")), picture)?;
                    say!("wrote {}/{name}-limit.svg", dir.display());
                }
            }
        }
    }
    Ok(())
}

/// How a run's keys are named: by its trace, or by its pattern.
enum Keys {
    Named(Vec<String>),
    Pattern(Traffic),
}

/// The traffic of the pattern flags.
#[allow(clippy::too_many_arguments)] // the command line's flags, one each
fn traffic(
    pattern: PatternName,
    rate: f64,
    duration: f64,
    on: f64,
    off: f64,
    keys: u32,
    zipf: f64,
    cost: u64,
) -> Result<Traffic, SimError> {
    let seconds = |name: &'static str, s: f64| {
        Duration::try_from_secs_f64(s).map_err(|_| SimError::Traffic {
            parameter: name,
            expected: "a finite, non-negative number of seconds",
        })
    };
    Ok(Traffic {
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
            tollgate_sim::arrivals::Keys::One
        } else {
            tollgate_sim::arrivals::Keys::Zipf {
                n: keys,
                exponent: zipf,
            }
        },
        cost,
        duration: seconds("duration", duration)?,
    })
}

/// `dir/name.csv` and `dir/name.json`.
fn write(dir: &Path, name: &str, series: &Series) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(format!("{name}.csv")), series.to_csv())?;
    std::fs::write(dir.join(format!("{name}.json")), series.to_json())?;
    say!("wrote {}/{name}.csv and .json", dir.display());
    Ok(())
}
