//! The client's side of limits checked together, refunds and resets:
//! `Client::all` (and `all_within`, with the whole's wait and hold;
//! `ask_entries`, a batch with `all` entries),
//! `Client::refund` (`give_back`, to the limits above too), `Client::charge`
//! (`charge_with`: permits used, past the limit if need be) and `Client::reset`, each one round trip through
//! `wire`, failing over as every request does.

use super::{Client, ClientError};
use crate::wire::{self, AllReply, Ask, BatchAsk, Charge, ChargeReply, EntryReply, GoReply, Refund, Reply, Reset};

impl Client {
    /// Asks for every one of `asks` together (at most `wire::MAX_PARTS`):
    /// the reply's `ok` says whether all went; when any part says sorry,
    /// none is charged, and each part's own reply says which refused.
    ///
    /// ```
    /// # use std::sync::atomic::AtomicBool;
    /// # use locker::config::{FileConfig, Flags, ServeConfig};
    /// # let flags = Flags { bind: Some("tcp://127.0.0.1:*".into()), max_requests: Some(2), in_seconds: Some(86_400.0), ..Flags::default() };
    /// # let server = locker::daemon::Server::bind(&ServeConfig::resolve(flags, FileConfig::default())?)?;
    /// # let endpoint = server.endpoint().to_owned();
    /// # std::thread::spawn(move || server.run(&AtomicBool::new(false)));
    /// use std::time::Duration;
    /// use locker::{Ask, Client};
    ///
    /// let mut client = Client::new([endpoint.as_str()], Duration::from_secs(1))?;
    /// assert!(client.ask(&Ask::new().key("b").cost(2))?.ok, "b is spent");
    /// let refused = client.all(&[Ask::new().key("a"), Ask::new().key("b")])?;
    /// assert!(!refused.ok && refused.replies[0].ok && !refused.replies[1].ok);
    /// assert_eq!(client.ask(&Ask::new().key("a").cost(2))?.remaining, 0, "a was charged nothing");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn all(&mut self, asks: &[Ask]) -> Result<AllReply, ClientError> {
        self.all_within(asks, None, None)
    }

    /// `all`, accepting reservations of every part usable within
    /// `max_wait_ms` (each part's `wait_ms` says when; go after the
    /// longest), or held up to `hold_ms` for a go of the whole.
    pub fn all_within(
        &mut self,
        asks: &[Ask],
        max_wait_ms: Option<u64>,
        hold_ms: Option<u64>,
    ) -> Result<AllReply, ClientError> {
        let reply = self.send_with(|body| wire::encode_all(asks, max_wait_ms, hold_ms, body))?;
        match wire::decode_all_reply(&reply).map_err(ClientError::BadReply)? {
            Reply::Answer(all) => Ok(all),
            Reply::Refused(why) => Err(ClientError::Refused(why)),
        }
    }

    /// Asks a batch whose entries may be goes or limits checked together
    /// (at most `wire::MAX_BATCH_ASKS`): one round trip, and each entry's
    /// reply in order, an `all` entry's as an `all`'s (decided in its turn,
    /// never held), or the reason the locker refused that entry alone.
    pub fn ask_entries(&mut self, entries: &[BatchAsk]) -> Result<Vec<Result<EntryReply, String>>, ClientError> {
        let reply = self.send_with(|body| wire::encode_batch_entries(entries, body))?;
        match wire::decode_batch_entries_reply(&reply).map_err(ClientError::BadReply)? {
            Reply::Answer(replies) => Ok(replies),
            Reply::Refused(why) => Err(ClientError::Refused(why)),
        }
    }

    /// Gives back up to `cost` permits `key` took of `limit` (the default
    /// limit when `None`) that still count: the reply's `granted` is how
    /// many went back, `remaining` what is left after.
    pub fn refund(&mut self, limit: Option<&str>, key: Option<&str>, cost: u64) -> Result<GoReply, ClientError> {
        self.give_back(&Refund { limit, key, cost, parents: None })
    }

    /// Sends `refund` as it is: with `parents`, the permits go back to
    /// the limits above its limit too, each under the key named for it
    /// (as the ask that took them named them). The reply is the figures
    /// of the level with the fewest permits left after it.
    pub fn give_back(&mut self, refund: &Refund) -> Result<GoReply, ClientError> {
        self.send_map(&refund.to_map())
    }

    /// Charges `cost` permits `key` used of `limit` (the default limit
    /// when `None`) before it could know how many: taken whatever is left,
    /// past the limit if need be. The reply's `debt` is what is owed
    /// beyond the limit, which later asks of the key wait out; `ok` is
    /// always true. A semaphore, or a limit kept in a store, refuses it.
    pub fn charge(&mut self, limit: Option<&str>, key: Option<&str>, cost: u64) -> Result<ChargeReply, ClientError> {
        self.charge_with(&Charge { limit, key, cost, parents: None })
    }

    /// Sends `charge` as it is: with `parents`, the permits are charged
    /// to the limits above its limit too, each under the key named for it.
    /// The reply is the figures of the level with the fewest permits left
    /// and the largest debt of any level.
    pub fn charge_with(&mut self, charge: &Charge) -> Result<ChargeReply, ClientError> {
        self.send_map(&charge.to_map())
    }

    /// Clears `key`'s count of `limit` (the default limit when `None`);
    /// refused unless the limit says `allow_reset = true` and, with CURVE,
    /// this client's key is an admin's.
    pub fn reset(&mut self, limit: Option<&str>, key: Option<&str>) -> Result<GoReply, ClientError> {
        self.send_map(&Reset { limit, key }.to_map())
    }
}
