//! The binary as a user runs it: scenarios, rules files, traces, and bad input.

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tollgate-sim"))
        .args(args)
        .output()
        .expect("tollgate-sim runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const RULES: &str = "\
domain: sim
descriptors:
  - key: user
    rate_limit: { unit: second, requests_per_unit: 5 }
";

#[test]
fn the_same_seed_gives_byte_identical_output() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let mut outputs = Vec::new();
    for (run, seed) in [("a", "7"), ("b", "7"), ("c", "8")] {
        let out = dir.path().join(run);
        let args = [
            "run",
            "--rules",
            rules.to_str().unwrap(),
            "--pattern",
            "poisson",
            "--rate",
            "20",
            "--duration",
            "30",
            "--keys",
            "10",
            "--seed",
            seed,
            "--step-ms",
            "100",
            "--out",
            out.to_str().unwrap(),
        ];
        let output = sim(&args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        outputs.push((
            std::fs::read(out.join("run.csv")).unwrap(),
            std::fs::read(out.join("run.json")).unwrap(),
        ));
    }
    assert_eq!(outputs[0], outputs[1]);
    assert_ne!(outputs[0].0, outputs[2].0);
}

#[test]
fn a_fixed_window_never_admits_more_than_its_limit_in_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let out = dir.path().join("out");
    // One key, 20 a second offered against 5 a second, steps of one window.
    let output = sim(&[
        "run",
        "--rules",
        rules.to_str().unwrap(),
        "--rate",
        "20",
        "--duration",
        "60",
        "--step-ms",
        "1000",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let csv = std::fs::read_to_string(out.join("run.csv")).unwrap();
    let mut windows = 0;
    for line in csv.lines().skip(1) {
        let fields: Vec<u64> = line
            .split(',')
            .take(4)
            .map(|f| f.parse().unwrap())
            .collect();
        let (offered, admitted, denied) = (fields[1], fields[2], fields[3]);
        assert!(admitted <= 5, "{line}");
        assert_eq!(offered, admitted + denied);
        // A rate limit that never waits, without the service model: the other
        // columns are empty, not 0.
        assert!(line.ends_with(",,,,,,,,,"), "{line}");
        windows += 1;
    }
    assert_eq!(windows, 60);
}

#[test]
fn scenarios_are_listed_and_run() {
    let list = sim(&["list"]);
    assert!(text(&list.stdout).contains("boundary"));
    let run = sim(&["scenario", "boundary"]);
    assert!(run.status.success());
    let table = text(&run.stdout);
    let fixed = table
        .lines()
        .find(|l| l.starts_with("fixed_window"))
        .unwrap();
    assert!(fixed.trim_end().ends_with("200"), "{table}");
}

#[test]
fn bad_input_is_named_with_exit_code_2() {
    let unknown = sim(&["scenario", "nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no scenario \"nope\""));

    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let trace = dir.path().join("trace.csv");
    std::fs::write(&trace, "timestamp,key\n0.5,alice\n0.25,bob\n").unwrap();
    let out = sim(&[
        "run",
        "--rules",
        rules.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("trace line 3: 0.25 is earlier"),
        "{}",
        text(&out.stderr)
    );

    let zero = sim(&["run", "--rules", rules.to_str().unwrap(), "--rate", "0"]);
    assert_eq!(zero.status.code(), Some(2));
    assert!(
        text(&zero.stderr).contains("rate must be a positive"),
        "{}",
        text(&zero.stderr)
    );

    std::fs::write(&rules, "domain: sim\ndescriptors:\n  - key: user\n    rate_limit: { unit: fortnight, requests_per_unit: 5 }\n").unwrap();
    let bad_rules = sim(&["run", "--rules", rules.to_str().unwrap()]);
    assert_eq!(bad_rules.status.code(), Some(2));
    assert!(
        text(&bad_rules.stderr).contains("rules:"),
        "{}",
        text(&bad_rules.stderr)
    );
}

#[test]
fn the_report_holds_every_scenario_and_replays_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut pages = Vec::new();
    for run in ["a.html", "b.html"] {
        let out = dir.path().join(run);
        let output = sim(&["report", "--out", out.to_str().unwrap()]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        pages.push(std::fs::read_to_string(out).unwrap());
    }
    assert_eq!(pages[0], pages[1]);
    let page = &pages[0];
    assert!(page.starts_with("<!DOCTYPE html>"));
    for name in [
        "boundary", "blocked", "adaptive", "leaky", "surge", "warmup",
    ] {
        assert!(page.contains(&format!("<h2>{name}</h2>")), "{name}");
    }
    assert_eq!(page.matches("<svg").count(), 6);
    // Self-contained: nothing fetched from elsewhere.
    assert!(!page.contains("src=") && !page.contains("href="));

    let unknown = sim(&[
        "report",
        "boundary",
        "nope",
        "--out",
        dir.path().join("c.html").to_str().unwrap(),
    ]);
    assert_eq!(unknown.status.code(), Some(2));
}

/// The columns of a CSV written by the binary, by name, each row's cells.
fn columns(csv: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let mut lines = csv.lines();
    let header = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_owned)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect();
    (header, rows)
}

fn cell<'a>(header: &[String], row: &'a [String], name: &str) -> &'a str {
    &row[header.iter().position(|h| h == name).unwrap()]
}

#[test]
fn an_adaptive_limit_runs_on_the_users_traffic_in_front_of_the_service() {
    let dir = tempfile::tempdir().unwrap();
    let mut outputs = Vec::new();
    for run in ["a", "b"] {
        let out = dir.path().join(run);
        let output = sim(&[
            "run",
            "--adaptive",
            "gradient2",
            "--service",
            "base_ms=10,knee=10,max_in_flight=40",
            "--pattern",
            "poisson",
            "--rate",
            "2000",
            "--duration",
            "10",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        outputs.push(std::fs::read_to_string(out.join("run.csv")).unwrap());
        assert!(out.join("run.json").exists() && out.join("run.svg").exists());
        assert!(out.join("run-limit.svg").exists());
    }
    assert_eq!(outputs[0], outputs[1], "the same seed, the same bytes");
    let (header, rows) = columns(&outputs[0]);
    assert!(rows.len() >= 10);
    for row in &rows {
        let limit: u64 = cell(&header, row, "limit").parse().unwrap();
        assert!((1..=200).contains(&limit), "{row:?}");
        let _: u64 = cell(&header, row, "in_flight").parse().unwrap();
        let p50: u64 = cell(&header, row, "latency_p50_us").parse().unwrap();
        let p99: u64 = cell(&header, row, "latency_p99_us").parse().unwrap();
        assert!(p50 <= p99, "{row:?}");
        // Failing fast (the default): nothing queues.
        assert_eq!(cell(&header, row, "queued"), "", "{row:?}");
    }
}

#[test]
fn a_waiting_adaptive_limit_fills_the_queue_columns() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = sim(&[
        "run",
        "--adaptive",
        "vegas",
        "--when-limited",
        "fifo",
        "--wait-ms",
        "100",
        "--rate",
        "2000",
        "--duration",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let (header, rows) = columns(&std::fs::read_to_string(out.join("run.csv")).unwrap());
    for row in &rows {
        let _: u64 = cell(&header, row, "queued").parse().unwrap();
        if let Ok(wait) = cell(&header, row, "wait_p99_us").parse::<u64>() {
            assert!(wait <= 100_000, "{row:?}");
        }
    }
}

#[test]
fn a_shedder_serves_critical_work_from_a_trace_of_classes_or_a_mix() {
    let dir = tempfile::tempdir().unwrap();
    // A mix: a fifth critical, at 3,000 a second against 50 ms a request, 100 slots.
    let out = dir.path().join("mix");
    let output = sim(&[
        "run",
        "--shed",
        "fleet",
        "--capacity",
        "100",
        "--reserve",
        "0.2",
        "--mix",
        "critical=1,sheddable=4",
        "--service",
        "base_ms=50,knee=1000,max_in_flight=1000,jitter=0",
        "--rate",
        "3000",
        "--duration",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let denied = |file: &str| -> u64 {
        let (header, rows) = columns(&std::fs::read_to_string(out.join(file)).unwrap());
        rows.iter()
            .map(|r| cell(&header, r, "denied").parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(denied("run-critical.csv"), 0);
    assert!(denied("run-sheddable.csv") > 1_000);
    let (header, rows) = columns(&std::fs::read_to_string(out.join("run-sheddable.csv")).unwrap());
    for row in &rows {
        assert_eq!(cell(&header, row, "limit"), "80");
        assert!(cell(&header, row, "in_flight").parse::<u64>().unwrap() <= 80);
    }

    // A trace: its class column.
    let trace = dir.path().join("trace.csv");
    let mut lines = String::from("timestamp,key,cost,class\n");
    for i in 0..2_000 {
        let class = if i % 2 == 0 { "critical" } else { "sheddable" };
        lines.push_str(&format!("{:.4},k,1,{class}\n", f64::from(i) * 0.0002));
    }
    std::fs::write(&trace, lines).unwrap();
    let out = dir.path().join("trace");
    let output = sim(&[
        "run",
        "--shed",
        "fleet",
        "--capacity",
        "10",
        "--service",
        "base_ms=50,knee=1000,max_in_flight=1000,jitter=0",
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(out.join("run-critical.csv").exists() && out.join("run-sheddable.csv").exists());
}

#[test]
fn a_domain_directory_is_read_as_the_service_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config");
    std::fs::create_dir_all(config.join("nested")).unwrap();
    std::fs::write(
        config.join("api.yaml"),
        RULES.replace("domain: sim", "domain: api"),
    )
    .unwrap();
    std::fs::write(
        config.join("nested").join("web"),
        "domain: web\ndescriptors:\n  - key: site\n    value: shop\n    descriptors:\n      - key: user\n        rate_limit: { unit: second, requests_per_unit: 2 }\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--config",
            config.to_str().unwrap(),
            "--rate",
            "20",
            "--duration",
            "10",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        sim(&args)
    };
    // Two domains: one must be chosen.
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("several domains (api, web): choose one with --domain"),
        "{}",
        text(&output.stderr)
    );
    // A nested descriptor: a fixed entry, then the request's key.
    let output = run(&["--domain", "web", "--descriptor", "site=shop,user"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let (header, rows) = columns(&std::fs::read_to_string(out.join("run.csv")).unwrap());
    for row in &rows {
        assert!(
            cell(&header, row, "admitted").parse::<u64>().unwrap() <= 2,
            "{row:?}"
        );
    }
    let output = run(&["--domain", "nope"]);
    assert!(
        text(&output.stderr).contains("no domain \"nope\""),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn bad_limits_and_services_are_named() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["run", "--adaptive", "bbr"],
            "no adaptive algorithm \"bbr\" (known: aimd, vegas, gradient2, envoy-gradient)",
        ),
        (
            &["run", "--shed", "random"],
            "no shedder \"random\" (known: fleet, utilisation)",
        ),
        (&["run", "--shed", "fleet", "--capacity", "0"], "limiter:"),
        (
            &["run", "--adaptive", "aimd", "--service", "knee=0"],
            "service: knee must be",
        ),
        (
            &["run", "--service", "knee=10,max_in_flight=5"],
            "service: max_in_flight must be at least the knee",
        ),
        (
            &["run", "--adaptive", "aimd", "--rate", "0"],
            "rate must be a positive",
        ),
    ];
    for (args, message) in cases {
        let output = sim(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            text(&output.stderr).contains(message),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    let misplaced: [(&[&str], &str); 3] = [
        (
            &["run", "--adaptive", "aimd", "--capacity", "5"],
            "--capacity is for --shed",
        ),
        (
            &["run", "--adaptive", "aimd", "--wait-ms", "5"],
            "--wait-ms is for --when-limited fifo or lifo",
        ),
        (
            &["run", "--shed", "utilisation", "--reserve", "0.5"],
            "--reserve is for --shed fleet",
        ),
    ];
    for (args, message) in misplaced {
        let output = sim(args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            text(&output.stderr).contains(message),
            "{args:?}: {}",
            text(&output.stderr)
        );
    }
    let none = sim(&["run", "--rate", "5"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        text(&none.stderr).contains("run needs a limit"),
        "{}",
        text(&none.stderr)
    );
}

#[test]
fn descriptors_that_match_no_limit_are_pointed_out() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let output = sim(&[
        "run",
        "--rules",
        rules.to_str().unwrap(),
        "--descriptor",
        "client",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).contains("matched no limit of domain \"sim\" (descriptors: client)"),
        "{}",
        text(&output.stderr)
    );
    let output = sim(&["run", "--rules", rules.to_str().unwrap()]);
    assert!(
        !text(&output.stderr).contains("matched no limit"),
        "{}",
        text(&output.stderr)
    );
}
