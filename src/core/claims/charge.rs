//! Charges on a store's counts: permits a caller used before it knew how
//! many (`op: charge`), taken in the store whatever is left.
//!
//! A charge is paid from the hand first: those permits are the store's
//! already. What the hand lacks is claimed with `force`, which the store
//! takes past the limit, counting the excess as a debt; its answer's
//! `left` is then 0 and its `retry_us` the time until the debt is covered
//! (by the kind's own refill, as on a lone locker), so the hand answers
//! every ask sorry until then, as after a claim that found the store
//! spent. A charge's claim brings its permits *earmarked*: only a charge
//! spends them, so an ask decided between the claim's answer and the
//! charge's turn cannot take them.
//!
//! Pure, like the rest of `claims`: it takes `now` and knows no Redis.

use super::{ClaimAsk, ClaimTerms, Claims, Grant, Hand, InFlight, Need, RETRY_DOWN};
use crate::core::ask::{Charged, Verdict};
use crate::core::limit::{Limit, LimitId};
use crate::core::time::Nanos;

impl Claims {
    /// Whether a charge of `cost` permits of `limit` (`id`) for `key` can
    /// be taken at `now` from the hand, or must wait for the claim of what
    /// it lacks, which this sends. A key whose claims fail is not claimed
    /// for: the charge is then refused, or taken by the locker's own table
    /// when the limit fails open.
    pub fn need_charge(&mut self, now: Nanos, id: LimitId, limit: &Limit, key: Option<&str>, cost: u32) -> Need {
        let key = key.unwrap_or("");
        let hand = self.hand(id, key);
        hand.expire(now);
        let on_hand = hand.permits.saturating_add(hand.earmarked);
        let left_alone = hand.failed.is_some_and(|retry| now < retry);
        let terms = ClaimTerms::of(limit, now);
        let (Some(terms), false, false) = (terms, on_hand >= cost, left_alone) else { return Need::Ready };
        let claim = self.next;
        self.next += 1;
        let (name, key) = (limit.name().into(), key.into());
        self.send(now, ClaimAsk { id: claim, limit: id, name, key, want: cost - on_hand, terms, force: true });
        Need::Claim(claim)
    }

    /// Whether the hand of `key` of limit `id` holds the `cost` permits a
    /// charge takes at `now`.
    pub fn covers(&self, now: Nanos, id: LimitId, key: Option<&str>, cost: u32) -> bool {
        let hand = self.hands.get(id.0).and_then(|h| h.get(key.unwrap_or("")));
        hand.is_some_and(|h| now < h.until && h.permits.saturating_add(h.earmarked) >= cost)
    }

    /// Takes a charge of `cost` permits of `limit` (`id`) for `key` from
    /// the hand at `now`, earmarked permits first: the go, with the debt
    /// the store counted when the charge took past the limit. `None` when
    /// the hand is short (its claim failed, or the store could not be
    /// asked): then nothing is taken.
    pub fn charge(&mut self, now: Nanos, id: LimitId, limit: &Limit, key: Option<&str>, cost: u32) -> Option<Charged> {
        let hand = self.hands.get_mut(id.0)?.get_mut(key.unwrap_or(""))?;
        hand.expire(now);
        if hand.permits.saturating_add(hand.earmarked) < cost {
            return None;
        }
        let earmarked = cost.min(hand.earmarked);
        hand.earmarked -= earmarked;
        hand.permits -= cost - earmarked;
        // Permits from the hand alone were within the limit.
        let debt = if earmarked > 0 { hand.debt } else { 0 };
        let capacity = limit.capacity();
        let (remaining, whole_at) = match debt {
            0 => (hand.permits.saturating_add(hand.left).min(capacity), hand.until),
            _ => (0, hand.until.max(hand.empty_until)),
        };
        Some(Charged { verdict: Verdict::go(capacity, remaining, whole_at.saturating_sub(now), cost), debt })
    }
}

/// Takes the answer to a charge's claim (`flight`) into `hand` at `now`:
/// its permits earmarked for the charge, or the key left alone a while.
pub(super) fn settle(hand: &mut Hand, now: Nanos, flight: &InFlight, grant: &Result<Grant, String>) {
    match grant {
        Ok(g) => {
            hand.took(now, flight, g);
            hand.earmarked = hand.earmarked.saturating_add(g.got);
        }
        Err(_) => hand.failed = Some(now.saturating_add(RETRY_DOWN)),
    }
}
