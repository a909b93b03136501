//! Lease ids: minting them, and telling whether a locker of this group
//! minted one.
//!
//! An id is the capability to touch a lease: whoever knows it may beat or
//! release the lease. So its random part is 128 bits of the caller's
//! entropy (a daemon passes the OS's CSPRNG), which no client can guess or
//! derive from an id it holds, by counting or by flipping bits.
//!
//! With a group secret (`--lease-secret`, one file shared by peered
//! lockers), an id also carries a MAC over its random part, its limit's name
//! and its count: HMAC-SHA256 under the secret, truncated to 128 bits. A
//! heartbeat that restores a lease this locker does not know (after a
//! restart, or on a peer after failover) must carry such an id, so a made-up
//! id, or a real one with a larger count or another limit, restores nothing.
//! Without a secret every restore is trusted, as Throttle trusts them.
//!
//! This module is pure: it reads no randomness and no file. The caller
//! supplies the entropy (an [`Entropy`]) and the secret's bytes.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of randomness in every id.
pub const RANDOM_BYTES: usize = 16;

/// Bytes of the MAC an id carries under a secret.
const MAC_BYTES: usize = 16;

/// The shortest secret accepted, in bytes: as long as SHA-256's output.
pub const MIN_SECRET_BYTES: usize = 32;

/// Separates the random part from the MAC in an id.
const MAC_SEPARATOR: char = '.';

/// Names what the MAC is for, so that it proves nothing anywhere else.
const MAC_CONTEXT: &[u8] = b"locker lease id v1\0";

/// A source of bytes for lease ids.
pub trait Entropy: std::fmt::Debug + Send {
    /// Fills `out` with bytes nobody can predict (or, in a test, known ones).
    fn fill(&mut self, out: &mut [u8; RANDOM_BYTES]);
}

/// Entropy that counts 1, 2, 3...: for deterministic tests, and for a locker
/// embedded in a program whose callers are all trusted. Anyone who sees one
/// id can name the next, so a daemon never uses it.
#[derive(Debug, Default, Clone)]
pub struct Counting(u128);

impl Entropy for Counting {
    fn fill(&mut self, out: &mut [u8; RANDOM_BYTES]) {
        self.0 = self.0.wrapping_add(1);
        *out = self.0.to_be_bytes();
    }
}

/// A group's secret for lease MACs; its bytes never appear in `Debug`.
#[derive(Clone)]
pub struct LeaseSecret(Vec<u8>);

/// A secret shorter than [`MIN_SECRET_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a lease secret must have at least {MIN_SECRET_BYTES} bytes, this one has {0}")]
pub struct ShortSecret(pub usize);

impl LeaseSecret {
    /// The secret `bytes`, at least [`MIN_SECRET_BYTES`] long.
    pub fn new(bytes: Vec<u8>) -> Result<LeaseSecret, ShortSecret> {
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(ShortSecret(bytes.len()));
        }
        Ok(LeaseSecret(bytes))
    }
}

impl std::fmt::Debug for LeaseSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeaseSecret({} bytes)", self.0.len())
    }
}

/// Mints lease ids, and vouches for ids minted under the same secret.
#[derive(Debug)]
pub struct LeaseMinter {
    /// Keyed once; cloned for each MAC.
    mac: Option<Keyed>,
    entropy: Box<dyn Entropy>,
}

/// HMAC-SHA256 keyed with the secret; its `Debug` shows no key.
#[derive(Clone)]
struct Keyed(Hmac<Sha256>);

impl std::fmt::Debug for Keyed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keyed(HMAC-SHA256)")
    }
}

impl Default for LeaseMinter {
    /// Counting ids without a secret: see [`Counting`].
    fn default() -> Self {
        LeaseMinter::new(Box::<Counting>::default(), None)
    }
}

impl LeaseMinter {
    /// Mints ids from `entropy`, with a MAC when `secret` is given.
    pub fn new(entropy: Box<dyn Entropy>, secret: Option<&LeaseSecret>) -> LeaseMinter {
        let mac = secret.map(|s| Keyed(Hmac::new_from_slice(&s.0).expect("HMAC takes a key of any length")));
        LeaseMinter { mac, entropy }
    }

    /// Whether ids carry a MAC, so that only they can be restored.
    pub fn has_secret(&self) -> bool {
        self.mac.is_some()
    }

    /// A new id for a lease of `count` on limit `limit`: 32 hex digits of
    /// randomness, then with a secret `.` and 32 hex digits of MAC.
    pub fn mint(&mut self, limit: &str, count: u32) -> String {
        let mut random = [0; RANDOM_BYTES];
        self.entropy.fill(&mut random);
        let mut id = hex(&random);
        if let Some(mac) = self.tag(&random, limit, count) {
            id.push(MAC_SEPARATOR);
            id.push_str(&hex(&mac.finalize().into_bytes()[..MAC_BYTES]));
        }
        id
    }

    /// Whether a locker holding this secret minted `id` for a lease of
    /// `count` on `limit`. Always true without a secret: restores are then
    /// trusted. The MAC is compared in constant time.
    pub fn vouches(&self, id: &str, limit: &str, count: u32) -> bool {
        if self.mac.is_none() {
            return true;
        }
        let Some((random, mac)) = id.split_once(MAC_SEPARATOR) else { return false };
        let (Some(random), Some(mac)) = (unhex::<RANDOM_BYTES>(random), unhex::<MAC_BYTES>(mac)) else {
            return false;
        };
        self.tag(&random, limit, count).is_some_and(|m| m.verify_truncated_left(&mac).is_ok())
    }

    /// The MAC under way over an id's random part, count and limit.
    fn tag(&self, random: &[u8; RANDOM_BYTES], limit: &str, count: u32) -> Option<Hmac<Sha256>> {
        let mut mac = self.mac.as_ref()?.0.clone();
        mac.update(MAC_CONTEXT);
        mac.update(random);
        mac.update(&count.to_be_bytes());
        // Last, so its length needs no prefix: everything before is fixed.
        mac.update(limit.as_bytes());
        Some(mac)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Exactly `N` bytes written as `2 * N` lowercase hex digits.
fn unhex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let nibble = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(fill: u8) -> LeaseSecret {
        LeaseSecret::new(vec![fill; MIN_SECRET_BYTES]).unwrap()
    }

    #[test]
    fn without_a_secret_ids_are_the_random_part_and_every_restore_is_trusted() {
        let mut m = LeaseMinter::default();
        assert_eq!(m.mint("db", 1), "00000000000000000000000000000001");
        assert_eq!(m.mint("db", 1), "00000000000000000000000000000002");
        assert!(!m.has_secret());
        assert!(m.vouches("anything", "db", 9));
    }

    #[test]
    fn with_a_secret_only_the_id_minted_for_that_limit_and_count_is_vouched_for() {
        let mut m = LeaseMinter::new(Box::<Counting>::default(), Some(&secret(7)));
        let id = m.mint("db", 2);
        assert_eq!(id.len(), 65, "{id}");
        assert!(m.vouches(&id, "db", 2));
        assert!(!m.vouches(&id, "db", 3), "another count");
        assert!(!m.vouches(&id, "dc", 2), "another limit");
        assert!(!m.vouches(&id[..32], "db", 2), "no MAC");
        assert!(!m.vouches(&id.to_uppercase(), "db", 2), "not as minted");
        let mut flipped = id.clone().into_bytes();
        for i in 0..flipped.len() {
            let was = flipped[i];
            flipped[i] = if was == b'0' { b'1' } else { b'0' };
            assert!(!m.vouches(std::str::from_utf8(&flipped).unwrap(), "db", 2), "digit {i} changed");
            flipped[i] = was;
        }
        let peer = LeaseMinter::new(Box::<Counting>::default(), Some(&secret(7)));
        assert!(peer.vouches(&id, "db", 2), "a locker with the same secret, or the same one restarted");
        let stranger = LeaseMinter::new(Box::<Counting>::default(), Some(&secret(8)));
        assert!(!stranger.vouches(&id, "db", 2), "another secret");
    }

    #[test]
    fn secrets_are_long_and_never_shown() {
        assert_eq!(LeaseSecret::new(vec![1; 31]).unwrap_err(), ShortSecret(31));
        let shown = format!("{:?}", LeaseMinter::new(Box::<Counting>::default(), Some(&secret(0x5a))));
        assert!(!shown.contains("90") && !shown.contains("5a"), "{shown}");
        assert_eq!(format!("{:?}", secret(1)), "LeaseSecret(32 bytes)");
    }
}
