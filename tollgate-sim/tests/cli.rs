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
        let fields: Vec<u64> = line.split(',').map(|f| f.parse().unwrap()).collect();
        let (offered, admitted, denied) = (fields[1], fields[2], fields[3]);
        assert!(admitted <= 5, "{line}");
        assert_eq!(offered, admitted + denied);
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
