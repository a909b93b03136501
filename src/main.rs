//! The `locker` binary: everything lives in the library; see `locker::cli`.

fn main() -> std::process::ExitCode {
    locker::cli::main()
}
