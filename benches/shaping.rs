//! Placeholder replaced by the shaping benchmark.
fn main() {}
