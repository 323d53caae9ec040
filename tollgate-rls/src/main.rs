//! `tollgate-rls`: see the crate's documentation (`tollgate_rls`).

fn main() -> std::process::ExitCode {
    tollgate_rls::server::main()
}
