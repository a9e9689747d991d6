//! The same command as `host`, under a name no other tool takes (`host` is
//! also bind9's DNS lookup tool on many machines).

fn main() -> std::process::ExitCode {
    toolhost_cli::main()
}
