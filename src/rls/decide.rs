//! One ShouldRateLimit, from the request to the reply, around the locker's
//! own decisions: `plan` matches each descriptor against the config and
//! writes one batch of asks (one per descriptor that has a limit to
//! count: its limit, its key, `hits_addend` as the cost); `answer` turns
//! the batch's replies into Envoy's statuses.
//!
//! As envoyproxy/ratelimit does: a descriptor that matches nothing, or
//! whose rule another matched rule `replaces`, is OK with no limit; an
//! unlimited one is OK with `limit_remaining` at its largest; a rule of 0
//! requests per unit is always over; `shadow_mode` asks in shadow (the
//! locker counts its would-be refusal in `locker_shadow_sorry_total` and
//! charges nothing) and answers OK with nothing remaining;
//! the request is over when any descriptor is. Unlike it, a descriptor
//! that is refused is not charged (the locker never counts past a limit),
//! and a check (`hits_addend` 0 on a descriptor) is never over. In a
//! domain that is `all_or_nothing` the asks go as one `all`: a refused
//! request charges nothing to any descriptor. In a domain that is
//! `charge_refused`, as in envoyproxy/ratelimit, a refused descriptor's
//! hits are counted all the same: `charges` writes a `charge` of each,
//! sent after the batch, which takes them past the limit (a debt later
//! requests wait out).
//!
//! This module is pure: bytes and values in, bytes and values out.

use std::borrow::Cow;

use super::config::{limit_name, push_escaped, unit_seconds, DescriptorRule, Table};
use super::headers::{self, HeaderStyle, Labelled};
use super::proto::{
    Code, DescriptorStatus, Duration, RateLimit, RateLimitDescriptor, RateLimitOverride, RateLimitRequest,
    RateLimitResponse, Unit,
};
use crate::wire::{self, Ask, GoReply, Reply, Terms, MAX_BATCH_ASKS, MAX_PARTS};

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
    #[error("the domain is all_or_nothing, which asks at most {MAX_PARTS} limits together; this request has {0}")]
    TooManyForAll(usize),
    #[error("descriptor {0} has a limit override of unit {1}, which is none of second, minute, hour and day")]
    OverrideUnit(usize, i32),
    #[error(
        "descriptor {0} has a limit override of one {1}, longer than a locker's longest window, a day \
         (a unit of day, or a config rule with in_seconds, counts exactly)"
    )]
    OverrideTooLong(usize, String),
    /// Not the request's fault but the locker's setting: gRPC
    /// `FAILED_PRECONDITION`.
    #[error(
        "descriptor {0} has a limit override, which this locker applies only when started with \
         --runtime-limits N (runtime_limits in the file): see docs/envoy.md"
    )]
    NoRuntimeLimits(usize),
}

/// What one descriptor comes to.
#[derive(Debug, PartialEq)]
enum DescriptorStep<'a> {
    /// No rule: OK, no limit.
    Free,
    /// An unlimited rule: OK, the most remaining.
    Unlimited,
    /// Decided without asking: over (0 per unit, or more hits than the
    /// limit holds), or a check of a rule of 0.
    Over(Cow<'a, DescriptorRule>),
    /// Asked of the locker, as the batch's `index`th ask.
    Asked { rule: Cow<'a, DescriptorRule>, index: usize, check: bool },
}

/// One ask a plan sends: the limit's name, the key, the cost and, for a
/// descriptor's `limit` override, the terms the limit is created with.
#[derive(Debug)]
struct PlannedAsk {
    limit: String,
    key: String,
    cost: u64,
    terms: Option<Terms<'static>>,
    /// The rule is in `shadow_mode`: the ask goes in shadow.
    shadow: bool,
}

/// How the service answers, the same for every call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answering {
    /// The largest batch the locker takes (`--max-message-size`).
    pub max_message_size: usize,
    /// Whether the locker creates limits from the terms asks send
    /// (`--runtime-limits` above 0): a `limit` override needs it.
    pub runtime_limits: bool,
    /// The response headers a reply carries (`--rls-headers`), if any.
    pub headers: Option<HeaderStyle>,
}

/// A request matched against the config, and its batch of asks.
#[derive(Debug)]
pub struct Plan<'a> {
    steps: Vec<DescriptorStep<'a>>,
    /// The asks go as one `all` (an all-or-nothing domain), not a batch.
    all: bool,
    headers: Option<HeaderStyle>,
    /// The encoded batch or `all`; empty when nothing needs the locker.
    /// The call moves it out to send it (`take_body`).
    pub body: Vec<u8>,
    /// Whether anything was asked of the locker (the body was not empty).
    asked: bool,
    /// Each ask's limit, key and cost, when the domain charges refused
    /// descriptors (`charges`); empty otherwise.
    charged: Vec<(String, String, u64)>,
}

/// Checks `request`, matches each descriptor in `table` (or takes its
/// `limit` override) and writes the asks: a batch no larger than
/// `answering.max_message_size`.
pub fn plan<'a>(table: &'a Table, request: &RateLimitRequest, answering: &Answering) -> Result<Plan<'a>, BadRequest> {
    check(request)?;
    let found: Vec<_> = request
        .descriptors
        .iter()
        .map(|d| table.find(&request.domain, d.entries.iter().map(|e| (e.key.as_str(), e.value.as_str()))))
        .collect();
    // A rule named by another matched rule's `replaces` does not apply.
    let replaced: Vec<&str> = found.iter().flatten().flat_map(|f| f.rule.replaces.iter().map(String::as_str)).collect();
    let mut counted = Vec::new();
    let mut steps = Vec::with_capacity(found.len());
    for (i, (d, f)) in request.descriptors.iter().zip(found).enumerate() {
        let cost = d.hits_addend.map_or(u64::from(request.hits_addend.max(1)), |h| h.value);
        // An override applies in a configured domain, whatever the
        // descriptor matches there, as envoyproxy/ratelimit applies it.
        let sent = match d.limit {
            Some(o) if table.has_domain(&request.domain) => Some(overridden(i, &request.domain, d, o, answering)?),
            _ => None,
        };
        let step = match (sent, f) {
            (Some((rule, counted_as)), _) => {
                let terms = Terms::new("fixed-window", u64::from(rule.requests_per_unit), unit_seconds(rule.unit));
                let limit = (rule.requests_per_unit > 0).then_some((counted_as, Some(terms)));
                ask(Cow::Owned(rule), limit, cost, &mut counted)
            }
            (None, None) => DescriptorStep::Free,
            (None, Some(f)) if !f.rule.name.is_empty() && replaced.contains(&f.rule.name.as_str()) => {
                DescriptorStep::Free
            }
            (None, Some(f)) if f.rule.unlimited => DescriptorStep::Unlimited,
            (None, Some(f)) => {
                let limit = f.rule.limit.as_ref().map(|l| ((l.name().to_owned(), f.key), None));
                ask(Cow::Borrowed(f.rule), limit, cost, &mut counted)
            }
        };
        steps.push(step);
    }
    let mut all = table.all_or_nothing(&request.domain) && !counted.is_empty();
    if all && counted.len() > MAX_PARTS {
        return Err(BadRequest::TooManyForAll(counted.len()));
    }
    if all && steps.iter().any(|s| matches!(s, DescriptorStep::Over(_))) {
        // Refused before anything is asked: nothing may be charged, so
        // the others are only looked at, as a batch of checks.
        all = false;
        counted.iter_mut().for_each(|c| c.cost = 0);
        for step in &mut steps {
            if let DescriptorStep::Asked { check, .. } = step {
                *check = true;
            }
        }
    }
    let asks: Vec<Ask> = counted
        .iter()
        .map(|c| {
            let ask = Ask { shadow: c.shadow, ..Ask::new().limit(&c.limit).key(&c.key).cost(c.cost) };
            c.terms.map_or(ask, |t| ask.terms(t))
        })
        .collect();
    let mut body = Vec::new();
    match () {
        _ if asks.is_empty() => {}
        _ if all => wire::encode_all(&asks, None, None, &mut body),
        _ => wire::encode_batch(&asks, &mut body),
    }
    if body.len() > answering.max_message_size {
        return Err(BadRequest::TooLarge(body.len()));
    }
    let charged = match table.charge_refused(&request.domain) {
        true => counted.into_iter().map(|c| (c.limit, c.key, c.cost)).collect(),
        false => Vec::new(),
    };
    let asked = !body.is_empty();
    Ok(Plan { steps, all, headers: answering.headers, body, asked, charged })
}

impl Plan<'_> {
    /// The body to send, moved out rather than copied; empty when nothing
    /// needs the locker.
    pub fn take_body(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.body)
    }
}

/// The charges a domain that is `charge_refused` sends after the batch's
/// `reply`: one for each descriptor the locker refused, of its hits (a
/// check charges nothing), each one request's bytes. None in any other
/// domain, or when the reply cannot be read (`answer` says why).
pub fn charges(plan: &Plan, reply: &[u8]) -> Vec<Vec<u8>> {
    if plan.charged.is_empty() {
        return Vec::new();
    }
    let Ok(Reply::Answer(replies)) = wire::decode_batch_reply(reply) else { return Vec::new() };
    let mut bodies = Vec::new();
    for step in &plan.steps {
        let DescriptorStep::Asked { index, check: false, .. } = step else { continue };
        let (Some(Ok(go)), Some((limit, key, cost))) = (replies.get(*index), plan.charged.get(*index)) else {
            continue;
        };
        if go.ok {
            continue;
        }
        let charge = wire::Charge { limit: Some(limit), key: Some(key), cost: *cost, parents: None };
        let mut body = Vec::new();
        wire::encode(&charge.to_map(), &mut body);
        bodies.push(body);
    }
    bodies
}

/// The step of a descriptor of `cost` under `rule`, counted by `limit`
/// (its name and key within it, and the terms sent) when it has one: an
/// ask added to `counted`, or over at once when the cost is more than the
/// rule holds.
fn ask<'a>(
    rule: Cow<'a, DescriptorRule>,
    limit: Option<((String, String), Option<Terms<'static>>)>,
    cost: u64,
    counted: &mut Vec<PlannedAsk>,
) -> DescriptorStep<'a> {
    match limit {
        Some(((limit, key), terms)) if cost <= rule.capacity() => {
            counted.push(PlannedAsk { limit, key, cost, terms, shadow: rule.shadow_mode });
            DescriptorStep::Asked { rule, index: counted.len() - 1, check: cost == 0 }
        }
        _ if cost == 0 => DescriptorStep::Asked { rule, index: usize::MAX, check: true },
        _ => DescriptorStep::Over(rule),
    }
}

/// The rule a `limit` override on the `i`th descriptor `d` makes, and the
/// locker limit and key it counts under: a fixed window of one unit, as
/// envoyproxy/ratelimit counts an override, with no name and no shadow
/// mode. The limit is named after the domain, the entries' keys and the
/// unit (`messaging/to_number/minute`), the key is made of the entries'
/// values, so every descriptor of the same keys and unit shares one limit
/// (one of `--runtime-limits`) and each set of values has its own count.
fn overridden(
    i: usize,
    domain: &str,
    d: &RateLimitDescriptor,
    o: RateLimitOverride,
    answering: &Answering,
) -> Result<(DescriptorRule, (String, String)), BadRequest> {
    let unit = match Unit::try_from(o.unit) {
        Ok(u @ (Unit::Second | Unit::Minute | Unit::Hour | Unit::Day)) => u,
        Ok(Unit::Unknown) | Err(_) => return Err(BadRequest::OverrideUnit(i, o.unit)),
        Ok(long) => return Err(BadRequest::OverrideTooLong(i, format!("{long:?}").to_lowercase())),
    };
    if !answering.runtime_limits && o.requests_per_unit > 0 {
        return Err(BadRequest::NoRuntimeLimits(i));
    }
    let mut path = domain.to_owned();
    for e in &d.entries {
        path.push('/');
        path.push_str(&e.key);
    }
    path.push('/');
    path.push_str(&format!("{unit:?}").to_lowercase());
    let rule = DescriptorRule {
        limit: None,
        name: String::new(),
        label: limit_name(&path),
        replaces: Vec::new(),
        unit,
        requests_per_unit: o.requests_per_unit,
        unlimited: false,
        shadow_mode: false,
    };
    let mut key = String::new();
    for (n, e) in d.entries.iter().enumerate() {
        if n > 0 {
            key.push('|');
        }
        push_escaped(&mut key, &e.value);
    }
    let label = rule.label.clone();
    Ok((rule, (label, key)))
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
    let unreadable = |e: wire::WireError| Unanswered::Unreadable(e.to_string());
    let replies = match () {
        _ if !plan.asked => Vec::new(),
        _ if plan.all => match wire::decode_all_reply(reply).map_err(unreadable)? {
            Reply::Refused(why) => return Err(Unanswered::Refused(why)),
            // A refused whole: each part says whether it would have gone.
            Reply::Answer(all) => all.replies.into_iter().map(Ok).collect(),
        },
        _ => match wire::decode_batch_reply(reply).map_err(unreadable)? {
            Reply::Refused(why) => return Err(Unanswered::Refused(why)),
            Reply::Answer(replies) => replies,
        },
    };
    let mut statuses = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let status = match step {
            DescriptorStep::Free => DescriptorStatus { code: Code::Ok as i32, ..DescriptorStatus::default() },
            DescriptorStep::Unlimited => {
                DescriptorStatus { code: Code::Ok as i32, limit_remaining: u32::MAX, ..DescriptorStatus::default() }
            }
            DescriptorStep::Over(rule) => status(rule, false, 0, None),
            DescriptorStep::Asked { rule, index, check } => match replies.get(*index) {
                // A shadow ask's go that would have been sorry is over
                // here, and answered OK by its rule's shadow_mode.
                Some(Ok(go)) => status(rule, (go.ok && !go.shadow_sorry) || *check, go.remaining, Some(go)),
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
    let response_headers_to_add = plan.headers.map_or_else(Vec::new, |style| {
        let labelled: Vec<Labelled> = plan
            .steps
            .iter()
            .zip(&statuses)
            .filter_map(|(step, status)| match step {
                DescriptorStep::Over(rule) | DescriptorStep::Asked { rule, .. } => {
                    Some(Labelled { status, name: rule.shown_name(), window_s: rule.window_s() })
                }
                DescriptorStep::Free | DescriptorStep::Unlimited => None,
            })
            .collect();
        headers::write(style, &labelled)
    });
    Ok(RateLimitResponse { overall_code, statuses, response_headers_to_add })
}

/// The status of a descriptor under `rule`: over unless `ok`, OK whatever
/// it is in shadow mode.
fn status(rule: &DescriptorRule, ok: bool, remaining: u32, go: Option<&GoReply>) -> DescriptorStatus {
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
