//! Claims: permits a locker has taken from a shared store (Redis) before
//! it grants them, so that any number of lockers can serve one limit
//! without ever granting more than the store allowed.
//!
//! A locker with a store never decides from its own counts. For each limit
//! and key it holds a *hand* of permits claimed atomically in the store,
//! each good until a deadline the store set (a fixed window's slot end, a
//! bucket's or rolling window's claim life). An ask is answered from the
//! hand; when the hand is short, `need` emits a claim (sized by the key's
//! recent demand, so steady traffic costs the store a small fraction of a
//! command per decision) and the caller waits for it; when the store said
//! the limit is spent, the hand answers sorry until the store's retry time.
//! A hand running low claims its next chunk while it still answers, so a
//! steady caller never waits. A charge (`charge`) claims what its hand
//! lacks past the limit, and the store keeps the debt.
//!
//! A store is one or more nodes (a cluster's masters), each answering for
//! its own keys. A failed claim puts only its own key aside for a while
//! (the failure policy answers it meanwhile), so one sick node never stops
//! the keys of the others; and the store reports each node's changes of
//! health, so this knows which nodes are failing now and why.
//!
//! Pure: it takes `now` and never touches a socket or a clock. It does not
//! know Redis either: `ClaimAsk` names what to claim and the terms to count
//! by, `Claimed` is the store's answer; the daemon's store thread turns
//! one into a script call and the reply into the other.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::core::ask::Verdict;
use crate::core::limit::{bucket_interval, Algorithm, Limit, LimitId};
use crate::core::time::{Nanos, NANOS_PER_MS};

mod charge;
#[cfg(test)]
mod tests;

/// Names one claim, to match its answer.
pub type ClaimId = u64;

/// The id of an answer that answers no claim and only says how its node
/// is: `Ok` (any grant) when it answers again, `Err` when it fails. The
/// store sends one at each change, with the answers that showed it, and
/// these reports alone tell the nodes' health (a claim's answer may come
/// late from a node already gone).
pub const NODE_REPORT: ClaimId = u64::MAX;

/// The id of an answer that says its node no longer holds keys (a
/// failover or resharding moved them): it is forgotten.
pub const NODE_GONE: ClaimId = u64::MAX - 1;

/// How long a bucket's or rolling window's claim may be spent, at most:
/// the bounds in docs/store.md grow with it.
const MAX_LIFE: Nanos = 1_000 * NANOS_PER_MS;

/// The least a claim lives, so that a claim still has a use when it comes
/// back from a store a round trip away.
const MIN_LIFE: Nanos = NANOS_PER_MS;

/// How many sub-slots a rolling window is counted in by the store.
pub const ROLLING_SUBSLOTS: u64 = 16;

/// How long a key is left alone after its claim failed, before a claim
/// tries the store again.
pub const RETRY_DOWN: Nanos = 100 * NANOS_PER_MS;

/// How often hands that ran out are forgotten.
const SWEEP_EVERY: Nanos = 1_000 * NANOS_PER_MS;

/// The terms the store counts a claim by, in microseconds (the store's
/// clock is read in microseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ClaimTerms {
    /// At most `max` per slot of `slot_us`, slots aligned to the Unix epoch
    /// by the store's clock.
    Fixed { max: u32, slot_us: u64 },
    /// At most `max` per calendar period (a day, week or month of a time
    /// zone), whose lengths differ: the locker names the period its clock
    /// is in (`slot`) and the bounds of the one before, that one and the
    /// one after (`bounds_us`, four instants), and the store counts in
    /// whichever of the three its own clock is in.
    Calendar { max: u32, slot: u64, bounds_us: [u64; 4] },
    /// GCRA: a token every `interval_us`, at most `burst` at once.
    Bucket { burst: u32, interval_us: f64, life_us: u64 },
    /// At most `max` claimed in any `span_us` sub-slots' worth of time,
    /// counted in sub-slots of `sub_us`: `span` covers the window and a
    /// claim's life, so permits spent late still count.
    Rolling { max: u32, sub_us: f64, span: u64, life_us: u64 },
}

impl ClaimTerms {
    /// The store terms of `limit` for a claim at `now`; `None` for a
    /// semaphore.
    pub fn of(limit: &Limit, now: Nanos) -> Option<ClaimTerms> {
        let quota = limit.quota();
        let slot = quota.slot_ns();
        let max = quota.max_requests();
        match limit.algorithm() {
            Algorithm::FixedWindow if quota.calendar().is_some() => {
                let slot = quota.slot_of(now);
                let starts = [slot.saturating_sub(1), slot, slot + 1, slot + 2].map(|s| quota.slot_start(s) / 1_000);
                Some(ClaimTerms::Calendar { max, slot, bounds_us: starts })
            }
            Algorithm::FixedWindow => Some(ClaimTerms::Fixed { max, slot_us: slot.div_ceil(1_000) }),
            Algorithm::TokenBucket { burst } => {
                let interval = bucket_interval(quota);
                // A claim lives as long as an eighth of the burst takes to
                // refill: what a late spend can add stays within that.
                let life = (interval.saturating_mul(u64::from(burst.get()) / 8)).clamp(MIN_LIFE, MAX_LIFE);
                Some(ClaimTerms::Bucket {
                    burst: burst.get(),
                    interval_us: interval as f64 / 1e3,
                    life_us: life / 1_000,
                })
            }
            Algorithm::RollingWindow => {
                let sub = slot as f64 / ROLLING_SUBSLOTS as f64;
                let life = (slot / ROLLING_SUBSLOTS).clamp(MIN_LIFE, MAX_LIFE);
                // Sub-slots far enough back that every claim made within
                // the window and a claim's life is still counted.
                let span = ((slot + life) as f64 / sub).ceil() as u64 + 1;
                Some(ClaimTerms::Rolling { max, sub_us: sub / 1e3, span, life_us: life / 1_000 })
            }
            Algorithm::Semaphore => None,
        }
    }
}

/// A claim for the store: `want` permits of `limit` for `key`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimAsk {
    pub id: ClaimId,
    pub limit: LimitId,
    /// The limit's name: the store's keys are named by it.
    pub name: Box<str>,
    /// The key; the empty key when the ask named none.
    pub key: Box<str>,
    pub want: u32,
    pub terms: ClaimTerms,
    /// A charge's claim: the store takes `want` whatever is left, past the
    /// limit if it must, and counts the excess as a debt that later claims
    /// wait out (see `charge`).
    pub force: bool,
}

/// What the store granted a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    /// Permits claimed, at most the claim's `want`.
    pub got: u32,
    /// How long from the store's now they may be spent, in microseconds.
    pub valid_us: u64,
    /// Permits the store still had after this claim.
    pub left: u32,
    /// When `left` is 0: microseconds until the store has one again.
    pub retry_us: u64,
    /// Permits the store counts beyond the limit after this claim (only a
    /// charge's claim takes past it), which later claims wait out.
    pub debt: u32,
}

/// The store's answer to a claim: a grant, or why the store could not be
/// asked.
#[derive(Debug, Clone, PartialEq)]
pub struct Claimed {
    pub id: ClaimId,
    /// The node that answered or failed (`HOST:PORT`); for a report
    /// (`NODE_REPORT`, `NODE_GONE`), the node it is about.
    pub node: Arc<str>,
    pub grant: Result<Grant, String>,
}

/// What an ask needs before it can be answered (see `Claims::need`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// It can be answered now: from the hand, or sorry.
    Ready,
    /// It waits for this claim's answer.
    Claim(ClaimId),
}

/// Permits of one limit and key on hand.
#[derive(Debug, Default)]
struct Hand {
    permits: u32,
    /// Permits a charge's claim brought, for the charges waiting for them
    /// alone: an ask never spends them (see `charge`).
    earmarked: u32,
    /// What the store counted beyond the limit at its last answer.
    debt: u32,
    /// When the permits may no longer be spent.
    until: Nanos,
    /// What the store had left at the last claim.
    left: u32,
    /// The store said the limit is spent: sorry until then.
    empty_until: Nanos,
    /// The claim on its way, if one is.
    claiming: Option<ClaimId>,
    /// Permits asks are waiting for, to add to the next claim.
    waiting: u32,
    /// Permits spent since the last claim: the demand the next one is sized by.
    spent: u32,
    /// The last claim failed: the failure policy answers, and no claim is
    /// sent before this time. Cleared when a claim works.
    failed: Option<Nanos>,
}

impl Hand {
    /// Forgets the permits whose time is up at `now`.
    fn expire(&mut self, now: Nanos) {
        if now >= self.until {
            self.permits = 0;
            self.earmarked = 0;
        }
    }

    /// Takes in what the store said of a claim sent as `flight`, answered
    /// with `grant` at `now` (its permits are the caller's to add): when
    /// they may be spent, what the store has left, and its debt.
    fn took(&mut self, now: Nanos, flight: &InFlight, grant: &Grant) {
        self.failed = None;
        let until = flight.sent.saturating_add(grant.valid_us.saturating_mul(1_000));
        if now >= self.until {
            self.permits = 0;
            self.earmarked = 0;
            self.until = until;
        } else {
            // Older permits keep the earlier deadline: none is spent later
            // than its own claim allows.
            self.until = self.until.min(until);
        }
        self.left = grant.left;
        self.debt = grant.debt;
        if grant.left == 0 {
            self.empty_until = now.saturating_add(grant.retry_us.saturating_mul(1_000));
        }
    }
}

/// A claim on its way to the store.
#[derive(Debug)]
struct InFlight {
    limit: LimitId,
    key: Box<str>,
    /// When it was asked for: its permits count from here, which is
    /// before the store's now, so they never outlive the store's deadline.
    sent: Nanos,
    /// The claim itself, for a follow-up with the same terms.
    ask: ClaimAsk,
}

/// Counts kept in the store, as this locker holds them.
#[derive(Debug, Default)]
pub struct Claims {
    /// One table of hands per limit, by `LimitId`.
    hands: Vec<HashMap<Box<str>, Hand>>,
    in_flight: HashMap<ClaimId, InFlight>,
    outbox: Vec<ClaimAsk>,
    next: ClaimId,
    /// The nodes that answered claims: why each is failing, if it is.
    nodes: BTreeMap<Arc<str>, Option<String>>,
    /// The failing nodes and why, in one line, while any is.
    down: Option<String>,
    /// When hands were last swept.
    swept: Nanos,
    /// Claims asked for, permits claimed, claims that failed.
    pub asked: u64,
    pub claimed: u64,
    pub failed: u64,
}

impl Claims {
    /// Claims for `limits` limits (ids 0 to limits − 1).
    pub fn new(limits: usize) -> Claims {
        Claims { hands: (0..limits).map(|_| HashMap::new()).collect(), ..Claims::default() }
    }

    /// Which nodes of the store are failing and why (`HOST:PORT: why`,
    /// `; ` between nodes), while any is: a node fails when a claim to it
    /// fails, and is back when a claim to it works.
    pub fn down(&self) -> Option<&str> {
        self.down.as_deref()
    }

    /// The nodes claims went to, each with why it is failing, if it is.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.nodes.iter().map(|(node, why)| (&**node, why.as_deref()))
    }

    /// Whether the last claim for `key` of `limit` failed, and none has
    /// worked since: its asks follow the limit's failure policy.
    pub fn failing(&self, id: LimitId, key: Option<&str>) -> bool {
        let hand = self.hands.get(id.0).and_then(|h| h.get(key.unwrap_or("")));
        hand.is_some_and(|h| h.failed.is_some())
    }

    /// Claims on their way.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Keys with a hand.
    pub fn keys(&self) -> usize {
        self.hands.iter().map(HashMap::len).sum()
    }

    /// The claims to send, taken out.
    pub fn take_outbox(&mut self) -> Vec<ClaimAsk> {
        std::mem::take(&mut self.outbox)
    }

    /// Whether an ask of `cost` permits of `limit` (`id`) for `key` can be
    /// answered at `now`, or must wait for a claim (which this emits when
    /// none is on its way). Also claims ahead when the hand runs low.
    pub fn need(&mut self, now: Nanos, id: LimitId, limit: &Limit, key: Option<&str>, cost: u32) -> Need {
        let key = key.unwrap_or("");
        let hand = self.hand(id, key);
        hand.expire(now);
        if let Some(claim) = hand.claiming {
            if hand.permits >= cost {
                return Need::Ready;
            }
            hand.waiting = hand.waiting.saturating_add(cost);
            // A claim not sent yet grows to cover every ask waiting for
            // it, so a burst costs one round trip, not one per ask.
            let want = hand.waiting.min(limit.capacity());
            if let Some(unsent) = self.outbox.iter_mut().rev().find(|a| a.id == claim) {
                unsent.want = unsent.want.max(want);
            }
            return Need::Claim(claim);
        }
        let left_alone = hand.failed.is_some_and(|retry| now < retry);
        if left_alone || now < hand.empty_until {
            return Need::Ready;
        }
        let capacity = limit.capacity();
        if hand.permits >= cost {
            // Claim the next chunk before this one runs out.
            let chunk = chunk(hand.spent, 0, capacity);
            if hand.permits - cost < chunk / 2 {
                self.claim(now, id, limit, key, chunk, 0);
            }
            return Need::Ready;
        }
        let short = cost - hand.permits;
        let want = chunk(hand.spent, short, capacity).max(short);
        Need::Claim(self.claim(now, id, limit, key, want, cost))
    }

    /// The hand of `key` of limit `id`, made empty if there is none.
    fn hand(&mut self, id: LimitId, key: &str) -> &mut Hand {
        if self.hands.len() <= id.0 {
            self.hands.resize_with(id.0 + 1, HashMap::new);
        }
        let table = &mut self.hands[id.0];
        if !table.contains_key(key) {
            table.insert(key.into(), Hand::default());
        }
        table.get_mut(key).expect("inserted")
    }

    /// Sends a claim for `want` permits, which `waiting` of asks wait for.
    fn claim(&mut self, now: Nanos, id: LimitId, limit: &Limit, key: &str, want: u32, waiting: u32) -> ClaimId {
        let Some(terms) = ClaimTerms::of(limit, now) else { return 0 };
        let claim = self.next;
        self.next += 1;
        let hand = self.hands[id.0].get_mut(key).expect("the hand was made before its claim");
        hand.claiming = Some(claim);
        hand.spent = 0;
        hand.waiting = waiting;
        let ask =
            ClaimAsk { id: claim, limit: id, name: limit.name().into(), key: key.into(), want, terms, force: false };
        self.send(now, ask);
        claim
    }

    fn send(&mut self, now: Nanos, ask: ClaimAsk) {
        let flight = InFlight { limit: ask.limit, key: ask.key.clone(), sent: now, ask: ask.clone() };
        self.in_flight.insert(ask.id, flight);
        self.outbox.push(ask);
        self.asked += 1;
    }

    /// Takes the store's answers in; returns the ids of the claims
    /// answered, for the asks waiting on them.
    pub fn settle(&mut self, now: Nanos, answers: Vec<Claimed>) -> Vec<ClaimId> {
        let mut settled = Vec::with_capacity(answers.len());
        for answer in answers {
            self.node_answered(&answer);
            let Some(flight) = self.in_flight.remove(&answer.id) else { continue };
            settled.push(answer.id);
            let Some(hand) = self.hands.get_mut(flight.limit.0).and_then(|h| h.get_mut(&flight.key)) else { continue };
            if flight.ask.force {
                charge::settle(hand, now, &flight, &answer.grant);
                self.failed += u64::from(answer.grant.is_err());
                self.claimed += answer.grant.as_ref().map_or(0, |g| u64::from(g.got));
                continue;
            }
            hand.claiming = None;
            let waiting = std::mem::take(&mut hand.waiting);
            match answer.grant {
                Ok(grant) => {
                    self.claimed += u64::from(grant.got);
                    hand.took(now, &flight, &grant);
                    hand.permits = hand.permits.saturating_add(grant.got);
                    if grant.left > 0 && waiting > hand.permits {
                        // More asks waited than this claim brought (they
                        // came after it left): claim the rest at once.
                        let want = (waiting - hand.permits).min(grant.left);
                        let claim = self.next;
                        self.next += 1;
                        hand.claiming = Some(claim);
                        self.send(now, ClaimAsk { id: claim, want, ..flight.ask });
                    }
                }
                Err(_) => {
                    self.failed += 1;
                    hand.failed = Some(now.saturating_add(RETRY_DOWN));
                }
            }
        }
        settled
    }

    /// Takes a report of a node's health in (other answers are not).
    fn node_answered(&mut self, answer: &Claimed) {
        let why = answer.grant.as_ref().err();
        if answer.id != NODE_REPORT && answer.id != NODE_GONE {
            return;
        } else if answer.id == NODE_GONE {
            if self.nodes.remove(&answer.node).is_none() {
                return;
            }
        } else if self.nodes.get(&answer.node).is_some_and(|was| was.as_ref() == why) {
            return;
        } else {
            self.nodes.insert(answer.node.clone(), why.cloned());
        }
        let failing: Vec<String> =
            self.nodes.iter().filter_map(|(node, why)| why.as_ref().map(|why| format!("{node}: {why}"))).collect();
        self.down = (!failing.is_empty()).then(|| failing.join("; "));
    }

    /// Answers an ask of `cost` permits (`up_to`: as many as are on hand,
    /// at least one) from the hand of `limit` and `key` at `now`. An ask
    /// the hand cannot cover gets sorry, with the store's retry time when
    /// the store said the limit is spent, else a short one (the claim for
    /// it is on its way, or the store is down).
    pub fn take(
        &mut self,
        now: Nanos,
        id: LimitId,
        limit: &Limit,
        key: Option<&str>,
        cost: u32,
        up_to: bool,
    ) -> Verdict {
        let capacity = limit.capacity();
        let Some(hand) = self.hands.get_mut(id.0).and_then(|h| h.get_mut(key.unwrap_or(""))) else {
            return Verdict::sorry(capacity, 0, NANOS_PER_MS, 0);
        };
        hand.expire(now);
        let granted = if up_to { cost.min(hand.permits) } else { cost };
        let reset = hand.until.saturating_sub(now);
        let remaining = |h: &Hand| h.permits.saturating_add(h.left).min(capacity);
        if granted == 0 && cost > 0 || granted > hand.permits {
            let store_back = hand.failed.unwrap_or(0).saturating_sub(now);
            let retry = hand.empty_until.saturating_sub(now).max(if hand.left == 0 { 0 } else { NANOS_PER_MS });
            let retry = retry.max(store_back);
            return Verdict::sorry(capacity, remaining(hand), retry.max(1), reset);
        }
        hand.permits -= granted;
        hand.spent = hand.spent.saturating_add(granted);
        Verdict::go(capacity, remaining(hand), reset, granted)
    }

    /// Gives back up to `n` of the permits `key` spent from the hand of
    /// `limit` since its last claim, while that claim may still be spent:
    /// never more than was claimed, so the store is never owed permits it
    /// did not give. A go verdict whose `granted` is how many went back.
    pub fn give_back(&mut self, now: Nanos, id: LimitId, limit: &Limit, key: Option<&str>, n: u32) -> Verdict {
        let capacity = limit.capacity();
        let Some(hand) = self.hands.get_mut(id.0).and_then(|h| h.get_mut(key.unwrap_or(""))) else {
            return Verdict::go(capacity, 0, 0, 0);
        };
        let back = if now < hand.until { n.min(hand.spent) } else { 0 };
        hand.permits += back;
        hand.spent -= back;
        let remaining = hand.permits.saturating_add(hand.left).min(capacity);
        Verdict::go(capacity, remaining, hand.until.saturating_sub(now), back)
    }

    /// Forgets hands whose permits have run out and that wait for nothing,
    /// so that keys seen once do not stay.
    /// Runs at most once a second, whatever the calls.
    pub fn sweep(&mut self, now: Nanos) {
        if now < self.swept.saturating_add(SWEEP_EVERY) {
            return;
        }
        self.swept = now;
        for table in &mut self.hands {
            let left_alone = |h: &Hand| h.failed.is_some_and(|retry| now < retry);
            table.retain(|_, h| h.claiming.is_some() || now < h.until || now < h.empty_until || left_alone(h));
        }
    }

    /// Makes room for `limits` limits after a reload, forgetting every hand
    /// (ids may have moved); claims on their way are answered into nothing.
    pub fn reset(&mut self, limits: usize) {
        self.hands = (0..limits).map(|_| HashMap::new()).collect();
    }

    /// Hands for `limits` limits, those of the limits already here kept:
    /// for a limit added after them (one sent with the ask).
    pub fn grow(&mut self, limits: usize) {
        self.hands.resize_with(limits.max(self.hands.len()), HashMap::new);
    }
}

/// The size of the next claim: twice what the hand spent since its last
/// claim (a steady caller then claims about once per half chunk), at least
/// `short`, at most a quarter of the capacity (so no locker takes a key's
/// whole quota on a guess), and at least 1.
fn chunk(spent: u32, short: u32, capacity: u32) -> u32 {
    spent.saturating_mul(2).min((capacity / 4).max(1)).max(short).max(1)
}
