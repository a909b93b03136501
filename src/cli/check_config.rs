//! `locker check-config FILE`: whether `serve --config FILE` (and a reload
//! from it) would accept the file. It reads the file and any key files it
//! names; it binds nothing and talks to no locker.

use std::path::PathBuf;

use clap::Args;

use super::{fail, EXIT_GO};
use crate::config::{FileConfig, Flags, ServeConfig};

#[derive(Debug, Args)]
pub(crate) struct CheckConfigArgs {
    /// The TOML file to check.
    #[arg(value_name = "FILE")]
    file: PathBuf,
}

/// Exits 0 and names the limits when the file is valid; 2 with the error otherwise.
pub(crate) fn run(args: CheckConfigArgs) -> u8 {
    let config = match FileConfig::load(&args.file).and_then(|file| ServeConfig::resolve(Flags::default(), file)) {
        Ok(config) => config,
        Err(e) => return fail(e),
    };
    let names: Vec<&str> = std::iter::once(&config.default).chain(&config.limits).map(|l| l.name()).collect();
    let limits = if names.len() == 1 { "limit" } else { "limits" };
    println!("{}: ok, {} {limits}: {}", args.file.display(), names.len(), names.join(", "));
    EXIT_GO
}
