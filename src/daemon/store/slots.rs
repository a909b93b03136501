//! Which node of a Redis Cluster holds a key: the slot of its hash tag
//! (CRC16, as Redis computes it) and the cluster's map of slots to
//! masters, read from `CLUSTER SLOTS`.
//!
//! It only computes and parses: the store thread asks a node for the map
//! and routes each call by it.

use std::sync::Arc;

/// Slots in a Redis Cluster.
pub const SLOTS: usize = 16_384;

/// The slot of `key`: CRC16 (XMODEM) of its hash tag, the text inside
/// the first `{…}` when that is not empty, else of the whole key.
pub fn slot_of(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    (crc16(tagged.unwrap_or(key)) as usize % SLOTS) as u16
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

/// Which master holds each slot (`HOST:PORT`), as a node said.
#[derive(Debug, Clone)]
pub struct SlotMap {
    owners: Vec<Option<Arc<str>>>,
}

impl SlotMap {
    /// A map that names no master yet.
    pub fn empty() -> SlotMap {
        SlotMap { owners: vec![None; SLOTS] }
    }

    /// Reads `CLUSTER SLOTS` as answered by `asked` (`HOST:PORT`): entries
    /// `[start, end, [host, port, id, …], replicas…]`; an empty host means
    /// the node asked.
    pub fn parse(value: &redis::Value, asked: &str) -> Result<SlotMap, String> {
        let bad = || format!("CLUSTER SLOTS from {asked}: unexpected answer");
        let redis::Value::Array(entries) = value else { return Err(bad()) };
        let asked_host = asked.rsplit_once(':').map_or(asked, |(h, _)| h);
        let mut owners = vec![None; SLOTS];
        for entry in entries {
            let redis::Value::Array(fields) = entry else { return Err(bad()) };
            let [start, end, master, ..] = &fields[..] else { return Err(bad()) };
            let (start, end) = (int(start).ok_or_else(bad)?, int(end).ok_or_else(bad)?);
            let redis::Value::Array(master) = master else { return Err(bad()) };
            let (Some(host), Some(port)) = (master.first().and_then(text), master.get(1).and_then(int)) else {
                return Err(bad());
            };
            let host = if host.is_empty() || host == "?" { asked_host.to_owned() } else { host };
            let node: Arc<str> = format!("{host}:{port}").into();
            let (start, end) = (usize::try_from(start).map_err(|_| bad())?, usize::try_from(end).map_err(|_| bad())?);
            if start > end || end >= SLOTS {
                return Err(bad());
            }
            owners[start..=end].fill(Some(node));
        }
        Ok(SlotMap { owners })
    }

    /// The master that holds `slot`, when one does.
    pub fn owner(&self, slot: u16) -> Option<&Arc<str>> {
        self.owners.get(usize::from(slot)).and_then(Option::as_ref)
    }

    /// Notes that `slot` moved to `node` (a MOVED answer), until the next
    /// map is read.
    pub fn moved(&mut self, slot: u16, node: &str) {
        if let Some(owner) = self.owners.get_mut(usize::from(slot)) {
            *owner = Some(node.into());
        }
    }

    /// Every master in the map, once each.
    pub fn masters(&self) -> Vec<Arc<str>> {
        let mut all: Vec<Arc<str>> = self.owners.iter().flatten().cloned().collect();
        all.sort();
        all.dedup();
        all
    }
}

fn int(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(n) => Some(*n),
        _ => text(v)?.parse().ok(),
    }
}

fn text(v: &redis::Value) -> Option<String> {
    match v {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn a_keys_slot_is_its_hash_tags_as_redis_computes_it() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.0.
        assert_eq!(slot_of(b"foo"), 12182);
        assert_eq!(slot_of(b"123456789"), 12739);
        assert_eq!(slot_of(b"{user1000}.following"), slot_of(b"user1000"));
        assert_eq!(slot_of(b"foo{}{bar}"), slot_of(b"foo{}{bar}"), "an empty tag hashes the whole key");
        assert_ne!(slot_of(b"foo{}{bar}"), slot_of(b"bar"));
        assert_eq!(slot_of(b"locker:{7:default:k}:f"), slot_of(b"7:default:k"));
    }

    #[test]
    fn the_map_names_each_slots_master_and_an_empty_host_is_the_node_asked() {
        let node = |host: &str, port| Value::Array(vec![Value::BulkString(host.into()), Value::Int(port), Value::Nil]);
        let answer = Value::Array(vec![
            Value::Array(vec![Value::Int(0), Value::Int(8000), node("10.0.0.1", 7000), node("10.0.0.9", 7009)]),
            Value::Array(vec![Value::Int(8001), Value::Int(16383), node("", 7001)]),
        ]);
        let mut map = SlotMap::parse(&answer, "10.0.0.2:7001").unwrap();
        assert_eq!(map.owner(0).map(|n| &**n), Some("10.0.0.1:7000"));
        assert_eq!(map.owner(8001).map(|n| &**n), Some("10.0.0.2:7001"));
        assert_eq!(map.masters().len(), 2, "replicas are not masters");
        map.moved(5, "10.0.0.3:7002");
        assert_eq!(map.owner(5).map(|n| &**n), Some("10.0.0.3:7002"));
        assert!(SlotMap::parse(&Value::Int(1), "x:1").is_err());
    }
}
