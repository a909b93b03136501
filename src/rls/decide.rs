//! One ShouldRateLimit, from the request to the reply, around the locker's
//! own decisions: `plan` matches each descriptor against the config and
//! writes one batch of asks (one per descriptor that has a limit to
//! count: its limit, its key, `hits_addend` as the cost); `answer` turns
//! the batch's replies into Envoy's statuses.
//!
//! As envoyproxy/ratelimit does: a descriptor that matches nothing, or
//! whose rule another matched rule `replaces`, is OK with no limit; an
//! unlimited one is OK with `limit_remaining` at its largest; a rule of 0
//! requests per unit is always over; `shadow_mode` counts and answers OK;
//! the request is over when any descriptor is. Unlike it, a descriptor
//! that is refused is not charged (the locker never counts past a limit),
//! and a check (`hits_addend` 0 on a descriptor) is never over.
//!
//! This module is pure: bytes and values in, bytes and values out.

use super::config::{Rule, Table};
use super::proto::{Code, DescriptorStatus, Duration, RateLimit, RateLimitRequest, RateLimitResponse};
use crate::wire::{self, Ask, GoReply, Reply, MAX_BATCH_ASKS};

/// Why a request is refused as a whole (gRPC `INVALID_ARGUMENT`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    #[error("the domain is empty")]
    NoDomain,
    #[error("a request needs at least one descriptor")]
    NoDescriptors,
    #[error("a request carries at most {MAX_BATCH_ASKS} descriptors, this one has {0}")]
    TooManyDescriptors(usize),
    #[error("descriptor {0} has no entries")]
    NoEntries(usize),
    #[error("descriptor {0} has an entry with an empty key")]
    EmptyKey(usize),
    #[error("the request's asks take {0} bytes, above the locker's --max-message-size")]
    TooLarge(usize),
}

/// What one descriptor comes to.
#[derive(Debug, PartialEq)]
enum Step<'a> {
    /// No rule: OK, no limit.
    Free,
    /// An unlimited rule: OK, the most remaining.
    Unlimited,
    /// Decided without asking: over (0 per unit, or more hits than the
    /// limit holds), or a check of a rule of 0.
    Over(&'a Rule),
    /// Asked of the locker, as the batch's `index`th ask.
    Asked { rule: &'a Rule, index: usize, check: bool },
}

/// A request matched against the config, and its batch of asks.
#[derive(Debug)]
pub struct Plan<'a> {
    steps: Vec<Step<'a>>,
    /// The encoded batch; empty when nothing needs the locker.
    pub body: Vec<u8>,
}

/// Checks `request`, matches each descriptor in `table` and writes the
/// asks: a batch no larger than `max_size`.
pub fn plan<'a>(table: &'a Table, request: &RateLimitRequest, max_size: usize) -> Result<Plan<'a>, BadRequest> {
    check(request)?;
    let found: Vec<_> = request
        .descriptors
        .iter()
        .map(|d| table.find(&request.domain, d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()))))
        .collect();
    // A rule named by another matched rule's `replaces` does not apply.
    let replaced: Vec<&str> = found.iter().flatten().flat_map(|f| f.rule.replaces.iter().map(String::as_str)).collect();
    let mut asks = Vec::new();
    let mut steps = Vec::with_capacity(found.len());
    for (d, f) in request.descriptors.iter().zip(&found) {
        let cost = d.hits_addend.map_or(u64::from(request.hits_addend.max(1)), |h| h.value);
        let step = match f {
            None => Step::Free,
            Some(f) if !f.rule.name.is_empty() && replaced.contains(&f.rule.name.as_str()) => Step::Free,
            Some(f) if f.rule.unlimited => Step::Unlimited,
            Some(f) => match &f.rule.limit {
                Some(limit) if cost <= f.rule.capacity() => {
                    asks.push(Ask::new().limit(limit.name()).key(&f.key).cost(cost));
                    Step::Asked { rule: f.rule, index: asks.len() - 1, check: cost == 0 }
                }
                _ if cost == 0 => Step::Asked { rule: f.rule, index: usize::MAX, check: true },
                _ => Step::Over(f.rule),
            },
        };
        steps.push(step);
    }
    let mut body = Vec::new();
    if !asks.is_empty() {
        wire::encode_batch(&asks, &mut body);
    }
    if body.len() > max_size {
        return Err(BadRequest::TooLarge(body.len()));
    }
    Ok(Plan { steps, body })
}

fn check(request: &RateLimitRequest) -> Result<(), BadRequest> {
    if request.domain.is_empty() {
        return Err(BadRequest::NoDomain);
    }
    match request.descriptors.len() {
        0 => return Err(BadRequest::NoDescriptors),
        n if n > MAX_BATCH_ASKS => return Err(BadRequest::TooManyDescriptors(n)),
        _ => {}
    }
    for (i, d) in request.descriptors.iter().enumerate() {
        if d.entries.is_empty() {
            return Err(BadRequest::NoEntries(i));
        }
        if d.entries.iter().any(|e| e.key.is_empty()) {
            return Err(BadRequest::EmptyKey(i));
        }
    }
    Ok(())
}

/// Why the locker's reply could not be read into statuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unanswered {
    #[error("the locker refused the asks: {0}")]
    Refused(String),
    #[error("the locker refused an ask: {0}")]
    Entry(String),
    #[error("the locker's reply could not be read: {0}")]
    Unreadable(String),
}

/// The response to a planned request, from the locker's `reply` to its
/// batch (ignored when the plan asked nothing).
pub fn answer(plan: &Plan, reply: &[u8]) -> Result<RateLimitResponse, Unanswered> {
    let replies = if plan.body.is_empty() {
        Vec::new()
    } else {
        match wire::decode_batch_reply(reply).map_err(|e| Unanswered::Unreadable(e.to_string()))? {
            Reply::Refused(why) => return Err(Unanswered::Refused(why)),
            Reply::Answer(replies) => replies,
        }
    };
    let mut statuses = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let status = match step {
            Step::Free => DescriptorStatus { code: Code::Ok as i32, ..DescriptorStatus::default() },
            Step::Unlimited => {
                DescriptorStatus { code: Code::Ok as i32, limit_remaining: u32::MAX, ..DescriptorStatus::default() }
            }
            Step::Over(rule) => status(rule, false, 0, None),
            Step::Asked { rule, index, check } => match replies.get(*index) {
                Some(Ok(go)) => status(rule, go.ok || *check, go.remaining, Some(go)),
                Some(Err(why)) => return Err(Unanswered::Entry(why.clone())),
                // A check of a rule that counts nothing (0 per unit).
                None if *index == usize::MAX => status(rule, true, 0, None),
                None => return Err(Unanswered::Unreadable("fewer replies than asks".to_owned())),
            },
        };
        statuses.push(status);
    }
    let over = statuses.iter().any(|s| s.code == Code::OverLimit as i32);
    let overall_code = if over { Code::OverLimit } else { Code::Ok } as i32;
    Ok(RateLimitResponse { overall_code, statuses })
}

/// The status of a descriptor under `rule`: over unless `ok`, OK whatever
/// it is in shadow mode.
fn status(rule: &Rule, ok: bool, remaining: u32, go: Option<&GoReply>) -> DescriptorStatus {
    let code = if ok || rule.shadow_mode { Code::Ok } else { Code::OverLimit };
    DescriptorStatus {
        code: code as i32,
        current_limit: Some(RateLimit {
            name: rule.name.clone(),
            requests_per_unit: rule.requests_per_unit,
            unit: rule.unit as i32,
        }),
        limit_remaining: if ok { remaining } else { 0 },
        duration_until_reset: go.map(|g| Duration::from_millis(g.reset_after_ms)),
    }
}

#[cfg(test)]
mod tests;
