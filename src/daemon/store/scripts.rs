//! The store's side of a claim: one Lua script per counting kind, and the
//! Redis key a limit and key count under.
//!
//! Each script touches exactly one key (so a Redis Cluster never answers
//! CROSSSLOT), reads the store's own clock (`TIME`, so every locker counts
//! by one clock), takes at most what the terms allow, and answers
//! `{got, valid_us, left, retry_us}` (see `core::claims::Grant`). Times are
//! microseconds since the Unix epoch, which a Lua number holds exactly.

use crate::core::claims::{ClaimAsk, Terms};

/// A fixed window: the key holds the slot it counts (`s`) and its count
/// (`n`); a new slot starts from 0. Claims live until the slot's end.
pub const FIXED: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want, max, slot_us = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local slot = math.floor(now / slot_us)
local held = redis.call('HMGET', KEYS[1], 's', 'n')
local n = 0
if tonumber(held[1]) == slot then n = tonumber(held[2]) end
local got = math.max(math.min(want, max - n), 0)
if got > 0 then
  redis.call('HSET', KEYS[1], 's', slot, 'n', n + got)
  redis.call('PEXPIREAT', KEYS[1], math.ceil((slot + 2) * slot_us / 1000))
end
local till = (slot + 1) * slot_us - now
return {got, till, max - n - got, till}
"#;

/// A token bucket by GCRA: the key holds the theoretical arrival time
/// (`tat`); a claim of k tokens moves it k intervals on. Claims live
/// `life_us`.
pub const BUCKET: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want, burst, interval, life = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local room = math.floor((now + burst * interval - tat) / interval)
local got = math.max(math.min(want, room), 0)
if got > 0 then
  tat = tat + got * interval
  redis.call('SET', KEYS[1], tat, 'PX', math.ceil((tat - now) / 1000) + 1)
end
local left = math.max(room - got, 0)
local retry = 0
if left == 0 then retry = math.max(math.ceil(tat + interval - burst * interval - now), 1) end
return {got, life, left, retry}
"#;

/// A rolling window in sub-slots: the key is a hash of sub-slot → count;
/// a claim counts the last `span` sub-slots (the window and a claim's
/// life), drops older ones, and adds to the current one. Claims live
/// `life_us`.
pub const ROLLING: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want, max, sub, span, life = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local i = math.floor(now / sub)
local all = redis.call('HGETALL', KEYS[1])
local n, oldest = 0, nil
for j = 1, #all, 2 do
  local ix = tonumber(all[j])
  if ix > i - span then
    n = n + tonumber(all[j + 1])
    if oldest == nil or ix < oldest then oldest = ix end
  else
    redis.call('HDEL', KEYS[1], all[j])
  end
end
local got = math.max(math.min(want, max - n), 0)
if got > 0 then
  redis.call('HINCRBY', KEYS[1], i, got)
  redis.call('PEXPIRE', KEYS[1], math.ceil(span * sub / 1000) + 1)
  if oldest == nil then oldest = i end
end
local left = math.max(max - n - got, 0)
local retry = 0
if left == 0 and oldest ~= nil then retry = math.max(math.ceil((oldest + span) * sub - now), 1) end
return {got, life, left, retry}
"#;

/// The Redis key `claim` counts under: the limit's name and the key,
/// length-prefixed so that no two pairs share it, inside a hash tag so a
/// cluster places each pair on one shard (and spreads pairs over all),
/// then the kind, so a limit whose kind changes starts afresh.
pub fn key_of(claim: &ClaimAsk) -> String {
    let kind = match claim.terms {
        Terms::Fixed { .. } => 'f',
        Terms::Bucket { .. } => 'b',
        Terms::Rolling { .. } => 'r',
    };
    format!("locker:{{{}:{}:{}}}:{kind}", claim.name.len(), claim.name, claim.key)
}

/// The `EVAL` command that makes `claim`.
pub fn command(claim: &ClaimAsk) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    let script = match claim.terms {
        Terms::Fixed { .. } => FIXED,
        Terms::Bucket { .. } => BUCKET,
        Terms::Rolling { .. } => ROLLING,
    };
    cmd.arg(script).arg(1).arg(key_of(claim)).arg(claim.want);
    match claim.terms {
        Terms::Fixed { max, slot_us } => cmd.arg(max).arg(slot_us),
        Terms::Bucket { burst, interval_us, life_us } => cmd.arg(burst).arg(interval_us).arg(life_us),
        Terms::Rolling { max, sub_us, span, life_us } => cmd.arg(max).arg(sub_us).arg(span).arg(life_us),
    };
    cmd
}
