//! The CURVE flags of the client commands (`ask`, `stats`, `lease`, `bench`):
//! which server key to expect and which key pair to present. This module
//! only turns flags into a `ClientCurve`; it sends nothing.

use std::path::PathBuf;

use clap::Args;

use super::ConnectArgs;
use crate::client::{Client, ClientError};
use crate::curve::{self, ClientCurve, KeyPair};

#[derive(Debug, Args)]
pub(crate) struct CurveArgs {
    /// Speak CURVE to a locker with this public key: its `.pub` file, or the key in Z85.
    #[arg(long, value_name = "FILE|Z85", requires = "client_key")]
    server_key: Option<String>,
    /// This client's secret key file (`PREFIX` or `PREFIX.key` from `locker keygen --out PREFIX`).
    #[arg(long, value_name = "PREFIX|FILE", requires = "server_key")]
    client_key: Option<PathBuf>,
}

impl CurveArgs {
    /// The CURVE settings, when the flags ask for CURVE.
    pub(crate) fn load(&self) -> Result<Option<ClientCurve>, curve::KeyError> {
        let (Some(server), Some(client)) = (&self.server_key, &self.client_key) else { return Ok(None) };
        Ok(Some(ClientCurve { server: curve::public_key(server, "--server-key")?, keys: KeyPair::load(client)? }))
    }
}

impl ConnectArgs {
    /// A client for these flags, speaking CURVE when they ask for it.
    pub(crate) fn client(&self) -> Result<Client, ClientError> {
        let client = Client::new(self.connect.clone(), self.timeout)?;
        Ok(match self.curve.load()? {
            Some(c) => client.with_curve(c),
            None => client,
        })
    }
}
