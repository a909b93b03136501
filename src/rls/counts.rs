//! How many rate-limit calls each domain got, by outcome: what
//! `locker_rls_requests_total{domain,code}` shows. Only configured domains
//! have series of their own (the others share one, `(unconfigured)`), so
//! the series are bounded by the config whatever domains callers send.
//! Per descriptor, the limits' own series (`locker_go_total{limit}` …)
//! already count each rule.
//!
//! Written by the gRPC side, read by the loop when it builds a metrics
//! snapshot; a lock held for one map update. It decides nothing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The label of every domain the config does not define.
pub const UNCONFIGURED: &str = "(unconfigured)";

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// `overall_code` OK.
    Ok,
    /// `overall_code` OVER_LIMIT.
    OverLimit,
    /// A gRPC error: a bad request, or the locker could not answer.
    Error,
}

/// One domain's calls, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DomainCalls {
    pub ok: u64,
    pub over_limit: u64,
    pub error: u64,
}

/// Every domain's tally, shared by the gRPC side and the loop.
#[derive(Debug, Clone, Default)]
pub struct Counts(Arc<Mutex<BTreeMap<String, DomainCalls>>>);

impl Counts {
    /// Counts a call to `domain` (configured or not, as `configured` says).
    pub fn record(&self, domain: &str, configured: bool, outcome: CallOutcome) {
        let label = if configured { domain } else { UNCONFIGURED };
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let tally = match map.get_mut(label) {
            Some(t) => t,
            None => map.entry(label.to_owned()).or_default(),
        };
        match outcome {
            CallOutcome::Ok => tally.ok += 1,
            CallOutcome::OverLimit => tally.over_limit += 1,
            CallOutcome::Error => tally.error += 1,
        }
    }

    /// Every domain's tally so far, in name order.
    pub fn read(&self) -> Vec<(String, DomainCalls)> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.iter().map(|(d, t)| (d.clone(), *t)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unconfigured_domains_share_one_series() {
        let counts = Counts::default();
        counts.record("a", true, CallOutcome::Ok);
        counts.record("a", true, CallOutcome::OverLimit);
        counts.record("x", false, CallOutcome::Ok);
        counts.record("y", false, CallOutcome::Error);
        assert_eq!(
            counts.read(),
            [
                (UNCONFIGURED.to_owned(), DomainCalls { ok: 1, over_limit: 0, error: 1 }),
                ("a".to_owned(), DomainCalls { ok: 1, over_limit: 1, error: 0 }),
            ]
        );
    }
}
