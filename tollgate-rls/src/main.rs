//! `tollgate-rls`: see the crate's documentation (`tollgate_rls`).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    tollgate_rls::server::main()
}
