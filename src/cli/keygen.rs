//! `locker keygen`: a new CURVE key pair, written as Z85 text files or
//! printed. It only generates and writes keys; it talks to no locker.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::{fail, EXIT_GO};
use crate::curve::KeyPair;

#[derive(Debug, Args)]
pub(crate) struct KeygenArgs {
    /// Write PREFIX.key (the secret key, mode 0600) and PREFIX.pub (the public
    /// key) instead of printing both; an existing PREFIX.key is never overwritten.
    #[arg(long, value_name = "PREFIX")]
    out: Option<PathBuf>,
}

pub(crate) fn run(args: KeygenArgs) -> u8 {
    let pair = match KeyPair::generate() {
        Ok(pair) => pair,
        Err(e) => return fail(e),
    };
    let Some(prefix) = args.out else {
        // Printed so that it can be piped into a secret store.
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "public: {}\nsecret: {}", pair.public, pair.secret.to_z85());
        return EXIT_GO;
    };
    match pair.write(&prefix) {
        Ok((secret, public)) => {
            println!("wrote {} and {}", secret.display(), public.display());
            println!("public key: {}", pair.public);
            EXIT_GO
        }
        Err(e) => fail(e),
    }
}
