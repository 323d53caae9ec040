//! Starting, serving and draining. (Skeleton: parses nothing yet.)

use std::process::ExitCode;

/// The binary's entry point.
pub fn main() -> ExitCode {
    eprintln!("tollgate-rls: not yet wired");
    ExitCode::FAILURE
}
