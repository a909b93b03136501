//! The store's side of a claim: one Lua script per counting kind, and the
//! Redis key a limit and key count under.
//!
//! Each script touches exactly one key (so a Redis Cluster never answers
//! CROSSSLOT), reads the store's own clock (`TIME`, so every locker counts
//! by one clock), takes at most what the terms allow (a charge's claim,
//! `force`, takes all it wants and counts the excess as a debt), and
//! answers `{got, valid_us, left, retry_us, debt}` (see
//! `core::claims::Grant`). Times are microseconds since the Unix epoch,
//! which a Lua number holds exactly.
//! A semaphore's leases are one script too (`SEMAPHORE`), on two keys that
//! share one hash tag, so one shard holds them.

use crate::core::claims::{ClaimAsk, ClaimTerms};
use crate::core::store_lease::{LeaseCall, LeaseOp};

/// A fixed window: the key holds the slot it last counted (`s`) and its
/// count (`n`). A count past `max` (a charge's, `force`) is a debt carried
/// into the following slots, each filled up to `max`: a later slot starts
/// from what is left of it, `n - max` for each slot since. Claims live
/// until the slot's end.
///
/// Slots are `slot_us` long from the Unix epoch, or, when `slot_us` is 0,
/// calendar periods: the locker sends the number of its period (`p`) and
/// the bounds of periods `p - 1` to `p + 1`, and the store's clock picks
/// one (a store clock outside all three is an error, never a guess). A
/// debt of more than a period waits by the shortest of their lengths, so
/// that an ask is never told to wait past the period with room.
pub const FIXED: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want, force, max, slot_us = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3]), tonumber(ARGV[4])
local slot, till, short, long
if slot_us > 0 then
  slot = math.floor(now / slot_us)
  till, short, long = (slot + 1) * slot_us - now, slot_us, slot_us
else
  local p = tonumber(ARGV[5])
  local b = {tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])}
  if now < b[1] or now >= b[4] then
    return redis.error_reply('the store clock is outside the calendar periods the locker sent')
  end
  local i = 3
  if now < b[2] then i = 1 elseif now < b[3] then i = 2 end
  slot, till = p + i - 2, b[i + 1] - now
  short = math.min(b[2] - b[1], b[3] - b[2], b[4] - b[3])
  long = math.max(b[2] - b[1], b[3] - b[2], b[4] - b[3])
end
local held = redis.call('HMGET', KEYS[1], 's', 'n')
local n = 0
if tonumber(held[1]) ~= nil then n = math.max(tonumber(held[2]) - (slot - tonumber(held[1])) * max, 0) end
local got = math.max(math.min(want, max - n), 0)
if force then got = want end
n = n + got
local debt = math.max(n - max, 0)
if got > 0 then
  redis.call('HSET', KEYS[1], 's', slot, 'n', n)
  redis.call('PEXPIREAT', KEYS[1], math.ceil((now + till + (1 + math.ceil(debt / max)) * long) / 1000))
end
return {got, till, math.max(max - n, 0), till + math.floor(debt / max) * short, debt}
"#;

/// A token bucket by GCRA: the key holds the theoretical arrival time
/// (`tat`); a claim of k tokens moves it k intervals on. A charge
/// (`force`) moves it past the burst: the tokens owed are the debt, which
/// the refill pays before the next token. Claims live `life_us`.
pub const BUCKET: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want, force, burst, interval, life = tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local room = math.floor((now + burst * interval - tat) / interval)
local got = math.max(math.min(want, room), 0)
if force then got = want end
if got > 0 then
  tat = tat + got * interval
  redis.call('SET', KEYS[1], tat, 'PX', math.ceil((tat - now) / 1000) + 1)
end
local left = math.max(room - got, 0)
local retry = 0
if left == 0 then retry = math.max(math.ceil(tat + interval - burst * interval - now), 1) end
return {got, life, left, retry, math.max(got - room, 0)}
"#;

/// A rolling window in sub-slots: the key is a hash of sub-slot → count;
/// a claim counts the last `span` sub-slots (the window and a claim's
/// life), drops older ones, and adds to the current one, past `max` for a
/// charge (`force`): the window then has room again once enough of its
/// oldest sub-slots have left it. Claims live `life_us`.
pub const ROLLING: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local want, force = tonumber(ARGV[1]), ARGV[2] == '1'
local max, sub, span, life = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local i = math.floor(now / sub)
local all = redis.call('HGETALL', KEYS[1])
local n, counts, ixs = 0, {}, {}
for j = 1, #all, 2 do
  local ix = tonumber(all[j])
  if ix > i - span then
    n = n + tonumber(all[j + 1])
    counts[ix] = tonumber(all[j + 1])
    table.insert(ixs, ix)
  else
    redis.call('HDEL', KEYS[1], all[j])
  end
end
local got = math.max(math.min(want, max - n), 0)
if force then got = want end
if got > 0 then
  redis.call('HINCRBY', KEYS[1], i, got)
  redis.call('PEXPIRE', KEYS[1], math.ceil(span * sub / 1000) + 1)
  if counts[i] == nil then
    counts[i] = 0
    table.insert(ixs, i)
  end
  counts[i] = counts[i] + got
end
n = n + got
local left = math.max(max - n, 0)
local retry = 0
if left == 0 then
  table.sort(ixs)
  local rest = n
  for _, ix in ipairs(ixs) do
    rest = rest - counts[ix]
    if rest < max then
      retry = math.max(math.ceil((ix + span) * sub - now), 1)
      break
    end
  end
end
return {got, life, left, retry, math.max(n - max, 0)}
"#;

/// The Redis key `claim` counts under: the limit's name and the key,
/// length-prefixed so that no two pairs share it, inside a hash tag so a
/// cluster places each pair on one shard (and spreads pairs over all),
/// then the kind, so a limit whose kind changes starts afresh.
pub fn key_of(claim: &ClaimAsk) -> String {
    let kind = match claim.terms {
        ClaimTerms::Fixed { .. } => 'f',
        ClaimTerms::Calendar { .. } => 'c',
        ClaimTerms::Bucket { .. } => 'b',
        ClaimTerms::Rolling { .. } => 'r',
    };
    format!("locker:{{{}:{}:{}}}:{kind}", claim.name.len(), claim.name, claim.key)
}

/// The `EVAL` command that makes `claim`.
pub fn command(claim: &ClaimAsk) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    let script = match claim.terms {
        ClaimTerms::Fixed { .. } | ClaimTerms::Calendar { .. } => FIXED,
        ClaimTerms::Bucket { .. } => BUCKET,
        ClaimTerms::Rolling { .. } => ROLLING,
    };
    cmd.arg(script).arg(1).arg(key_of(claim)).arg(claim.want).arg(u8::from(claim.force));
    match claim.terms {
        ClaimTerms::Fixed { max, slot_us } => cmd.arg(max).arg(slot_us),
        ClaimTerms::Calendar { max, slot, bounds_us } => cmd.arg(max).arg(0).arg(slot).arg(&bounds_us[..]),
        ClaimTerms::Bucket { burst, interval_us, life_us } => cmd.arg(burst).arg(interval_us).arg(life_us),
        ClaimTerms::Rolling { max, sub_us, span, life_us } => cmd.arg(max).arg(sub_us).arg(span).arg(life_us),
    };
    cmd
}

/// A semaphore's leases, by the rules of `core::kinds::semaphore`: `KEYS[1]`
/// is a hash of lease id → "count ttl until pending", `KEYS[2]` the list of
/// pending ids in arrival order. Every call first ends what is due, in
/// deadline order (held leases at a deadline free their count before the
/// waits ending there are dropped; the queue's head is granted whenever it
/// fits), then acquires (`a`), beats (`h`) or releases (`r`) lease
/// `ARGV[2]` against capacity `ARGV[3]`. Answers `{state, left_us,
/// capacity, free}`, the state coded as `core::store_lease::StoreLease`
/// reads it. A semaphore holds at most its capacity's leases and a queue,
/// so reading the whole record on each call stays small.
pub const SEMAPHORE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local op, id, cap = ARGV[1], ARGV[2], tonumber(ARGV[3])
local count, ttl, wait, restore = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local L, held = {}, 0
local all = redis.call('HGETALL', KEYS[1])
for j = 1, #all, 2 do
  local c, tt, u, p = string.match(all[j + 1], '^(%d+) (%d+) (%d+) (%d)$')
  if c ~= nil then
    local l = {count = tonumber(c), ttl = tonumber(tt), till = tonumber(u), pending = p == '1'}
    L[all[j]] = l
    if not l.pending then held = held + l.count end
  end
end
local Q = redis.call('LRANGE', KEYS[2], 0, -1)
local function free() return math.max(cap - held, 0) end
local function promote(at)
  while #Q > 0 do
    local l = L[Q[1]]
    if l == nil or not l.pending then
      table.remove(Q, 1)
    elseif l.count > free() then
      break
    else
      table.remove(Q, 1)
      l.pending, l.till = false, at + l.ttl
      held = held + l.count
    end
  end
end
local function forget(k)
  local l = L[k]
  if l == nil then return end
  L[k] = nil
  if l.pending then
    for i = #Q, 1, -1 do if Q[i] == k then table.remove(Q, i) end end
  else
    held = held - l.count
  end
end
while true do
  local due = nil
  for _, l in pairs(L) do
    if l.till <= now and (due == nil or l.till < due) then due = l.till end
  end
  if due == nil then break end
  local waits, holds = {}, {}
  for k, l in pairs(L) do
    if l.till == due then
      if l.pending then table.insert(waits, k) else table.insert(holds, k) end
    end
  end
  for _, k in ipairs(holds) do forget(k) end
  promote(due)
  for _, k in ipairs(waits) do
    if L[k] ~= nil and L[k].pending then forget(k) end
  end
  promote(due)
end
promote(now)
local state = 5
if op == 'a' then
  if #Q == 0 and free() >= count then
    L[id] = {count = count, ttl = ttl, till = now + ttl, pending = false}
    held = held + count
    state = 1
  elseif wait > 0 then
    L[id] = {count = count, ttl = ttl, till = now + wait, pending = true}
    table.insert(Q, id)
    state = 2
  else
    state = 3
  end
elseif op == 'h' then
  local l = L[id]
  if l ~= nil and l.pending then
    state = 2
  elseif l ~= nil then
    l.ttl, l.till = ttl, now + ttl
    state = 1
  elseif restore > 0 then
    if free() >= restore then
      L[id] = {count = restore, ttl = ttl, till = now + ttl, pending = false}
      held = held + restore
      state = 1
    else
      state = 6
    end
  end
elseif op == 'r' then
  if L[id] ~= nil then
    forget(id)
    promote(now)
    state = 4
  end
end
redis.call('DEL', KEYS[1], KEYS[2])
local last = 0
for k, l in pairs(L) do
  local p = 0
  if l.pending then p = 1 end
  redis.call('HSET', KEYS[1], k, string.format('%.0f %.0f %.0f %d', l.count, l.ttl, l.till, p))
  if l.till > last then last = l.till end
end
for _, k in ipairs(Q) do redis.call('RPUSH', KEYS[2], k) end
if last > 0 then
  local at = math.ceil(last / 1000) + 1
  redis.call('PEXPIREAT', KEYS[1], at)
  if #Q > 0 then redis.call('PEXPIREAT', KEYS[2], at) end
end
local left = 0
if (state == 1 or state == 2) and L[id] ~= nil then left = L[id].till - now end
return {state, left, cap, free()}
"#;

/// The Redis keys a semaphore's leases live under: its hash of leases and
/// its queue, sharing the hash tag of the limit's name.
pub fn lease_keys(call: &LeaseCall) -> [String; 2] {
    let tag = format!("locker:{{{}:{}:}}", call.name.len(), call.name);
    [format!("{tag}:s"), format!("{tag}:q")]
}

/// The `EVAL` command that makes lease `call`.
pub fn lease_command(call: &LeaseCall) -> redis::Cmd {
    let (op, count, ttl, wait, restore) = match call.op {
        LeaseOp::Acquire(hold) => ("a", hold.count, hold.ttl, hold.max_wait, 0),
        LeaseOp::Heartbeat { ttl, restore } => ("h", 0, ttl, 0, restore.unwrap_or(0)),
        LeaseOp::Release => ("r", 0, 0, 0, 0),
    };
    let [leases, queue] = lease_keys(call);
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(SEMAPHORE).arg(2).arg(leases).arg(queue);
    cmd.arg(op).arg(&*call.lease).arg(call.capacity).arg(count).arg(ttl / 1_000).arg(wait / 1_000).arg(restore);
    cmd
}
