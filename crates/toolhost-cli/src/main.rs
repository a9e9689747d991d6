//! The `host` binary: see the library, `toolhost_cli::main`.

fn main() -> std::process::ExitCode {
    toolhost_cli::main()
}
