//! Putting an earlier run's records back into a locker, before it serves:
//! the latest live record of each thing, each as its kind's kept form.
//!
//! A peered locker puts an earlier run's count in the current slot back
//! as that run's node, so that a peer's snapshot of the same run merges
//! with it by maximum; alone, the count is simply this run's own, which
//! costs no more memory per key than a grant does. Which records are live
//! is `Liveness`'s to say; this module reads no clock and no file.

use std::collections::HashMap;

use super::{collapse, Liveness, Record};
use crate::core::kinds::{Kept, Owner, Saved};
use crate::core::{Locker, Nanos, NodeIx, NodeKey, Nodes};

/// What a restore put back.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Restored {
    /// Fixed-window counts of earlier runs in the current slot, and
    /// rolling-window counts of sub-slots that still count.
    pub counts: usize,
    /// Reservations in later slots.
    pub reservations: usize,
    /// Token bucket keys.
    pub buckets: usize,
    /// Held leases.
    pub leases: usize,
    /// Fixed-window ledgers of conserved permits (gifts given and got) of
    /// earlier runs in the current slot, rolling windows' rights that
    /// still count, and token buckets' shares of the current or the
    /// previous period.
    pub ledgers: usize,
    /// Records that could not be put back: a key beyond `max_keys`, a
    /// limit that is not of the recorded kind, a run that was not named.
    pub skipped: usize,
}

/// Puts back into `locker` the records of earlier runs at `now`: the
/// latest live record of each thing. `nodes` is the peer node table when
/// peered. Returns what was put back and the records the new state file
/// starts with: those read, except that counts this run now holds as its
/// own (reservations, and every count of a locker that is not peered)
/// become records of run `run`.
pub fn restore<'a>(
    locker: &mut Locker,
    nodes: Option<&mut Nodes>,
    now: Nanos,
    run: u32,
    records: impl Iterator<Item = Record<'a>>,
) -> (Restored, Vec<Record<'a>>) {
    let liveness = Liveness::of(locker);
    // Every earlier run that wrote to the file, live records or not: a
    // peered restart that knows them all resumes their ledgers.
    let mut named = Vec::new();
    let records = records.inspect(|r| {
        if let Record::Run { incarnation, node, .. } = *r {
            named.push((node.to_owned(), incarnation));
        }
    });
    let live = collapse(records, |r| liveness.is_live(now, r));
    let peered = nodes.is_some();
    let run_nodes = match nodes {
        Some(n) => {
            n.kept_runs(named.iter().map(|(node, incarnation)| (node.as_str(), *incarnation)));
            run_nodes(n, now, &live)
        }
        None => HashMap::new(),
    };
    let runs = live.iter().filter(|r| matches!(r, Record::Run { .. })).count();
    let mut done = Restored::default();
    let mut rewrite = Vec::with_capacity(live.len());
    for r in live {
        let id = r.limit().and_then(|i| locker.keeping().limit_at(i as usize));
        let (Some(id), Some((kept, key))) = (id, r.kept()) else {
            match r {
                Record::Run { .. } => rewrite.push(r),
                // An earlier run's: this run writes its own.
                Record::Clock { .. } => {}
                _ => done.skipped += 1,
            }
            continue;
        };
        // An earlier run's exchange: carried into what this run owns when
        // peered, and kept for the next restart (see each kind's `kept`).
        if let Kept::Exchange(_) = kept {
            if !peered {
                done.skipped += 1;
                continue;
            }
        }
        let node = r.run().and_then(|run| run_nodes.get(&run).copied());
        // When peered, a run's counts go back as its node, so that a
        // peer's snapshot of the same run merges with them by maximum;
        // alone, or reserved ahead in a fixed window, they become this
        // run's own: nobody else will ever count them.
        let limit = locker.limit(id);
        let later = kept.is_reservation(limit.algorithm(), limit.quota(), now);
        let owner = match node {
            Some(node) if !later => Owner::Node(node),
            _ => Owner::Own,
        };
        let held = locker.keeping_mut().restore(
            now,
            id,
            key,
            Saved { kept, written: r.at(), owner, run: r.run().unwrap_or(0) },
        );
        *tally(&mut done, kept, later) += usize::from(held.is_some());
        match (held, kept, owner) {
            (None, Kept::Exchange(_), _) => rewrite.push(r),
            (None, _, _) => done.skipped += 1,
            // A count made this run's own: the sum of every earlier run's,
            // written when they wrote it (before this run started), so that
            // a later restart tells it from this run's own grants (see
            // `Liveness::retimed`).
            (Some(count), Kept::Window { slot, .. }, Owner::Own) => {
                let kept = Kept::Window { slot, count };
                rewrite.push(Record::Count { at: r.at().min(now), run, limit: id.index() as u32, key, kept });
            }
            (Some(_), _, _) => rewrite.push(r),
        }
    }
    // Several earlier runs may have counted the same key and slot, each
    // adding to this run's own: the last record of each says the sum.
    let rewrite = if runs > 1 { collapse(rewrite.into_iter(), |_| true) } else { rewrite };
    (done, rewrite)
}

/// The tally of `done` that a restored `kept` counts in.
fn tally(done: &mut Restored, kept: Kept, later: bool) -> &mut usize {
    match kept {
        Kept::Window { .. } if later => &mut done.reservations,
        Kept::Window { .. } => &mut done.counts,
        Kept::Bucket { .. } => &mut done.buckets,
        Kept::Lease(_) | Kept::Released => &mut done.leases,
        Kept::Exchange(_) => &mut done.ledgers,
    }
}

/// A node for every earlier run named in `records`: the run's own node
/// key, held in the node table (as if the first configured peer had named
/// it), so that a peer's snapshot of that run merges with what is
/// restored. When the table has no room, a run gets none and its counts
/// become this run's own.
fn run_nodes(nodes: &mut Nodes, now: Nanos, records: &[Record]) -> HashMap<u32, NodeIx> {
    let mut out = HashMap::new();
    for r in records {
        if let Record::Run { run, incarnation, node } = *r {
            if let Some(ix) = nodes.resolve(now, 0, &NodeKey { id: node.into(), incarnation }) {
                out.insert(run, ix);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::share::exchange::KeptExchange;
    use crate::core::{Algorithm, Limit, Quota, DEFAULT_LIMIT};

    const SEC: Nanos = 1_000_000_000;

    /// The bytes an earlier build wrote for a ledger of record kind `kind`
    /// of limit `limit` in `period`: run 1, written at `at`, key "k".
    fn old_record(kind: u8, at: Nanos, limit: u32, period: u64, figures: &[u32]) -> Vec<u8> {
        let head = [&at.to_le_bytes()[..], &1u32.to_le_bytes(), &limit.to_le_bytes(), &period.to_le_bytes()].concat();
        let figures: Vec<u8> = figures.iter().flat_map(|f| f.to_le_bytes()).collect();
        [&[kind][..], &head, &figures, &[1, b'k']].concat()
    }

    #[test]
    fn an_earlier_builds_ledger_rights_and_fill_records_restore_and_are_written_again_as_exchanges() {
        let quota = Quota::new(10, 1.0).unwrap();
        let limit = |name, algorithm| Limit::with_algorithm(name, quota, algorithm).unwrap();
        let burst = Algorithm::token_bucket(10).unwrap();
        let limits = vec![limit("rolling", Algorithm::RollingWindow), limit("bucket", burst)];
        let mut locker = Locker::new(limit(DEFAULT_LIMIT, Algorithm::FixedWindow), limits, 100);
        let mut nodes = Nodes::new(NodeKey { id: "a".into(), incarnation: 20 * SEC }, &["b".into()], SEC);
        let (now, at) = (20 * SEC + SEC / 2, 20 * SEC + SEC / 4);
        // Kinds 18, 19 and 20: a fixed window's ledger, a rolling window's
        // rights, a bucket's fill (base, room, then a TAT of two words).
        let old = [
            old_record(18, at, 0, 20, &[2, 1]),
            old_record(19, at, 1, 20, &[3, 0]),
            old_record(20, at, 2, 20, &[5, 4, (at + SEC) as u32, ((at + SEC) >> 32) as u32]),
        ];
        let run = Record::Run { run: 1, incarnation: 10 * SEC, node: "a" };
        let records = std::iter::once(run).chain(old.iter().map(|b| Record::decode(b).expect("an old record")));
        let (done, rewrite) = restore(&mut locker, Some(&mut nodes), now, 2, records);
        assert_eq!((done.ledgers, done.skipped), (3, 0), "{done:?}");
        let exchanges: Vec<_> = rewrite
            .iter()
            .filter_map(|r| match *r {
                Record::Count { limit, kept: Kept::Exchange(e), .. } => Some((limit, e)),
                _ => None,
            })
            .collect();
        let exchange = |gave, got| KeptExchange { period: 20, gave, got, ..KeptExchange::default() };
        let fill = KeptExchange { period: 20, base: 5, room: 4, tat: at + SEC, ..KeptExchange::default() };
        assert_eq!(exchanges, [(0, exchange(2, 1)), (1, exchange(3, 0)), (2, fill)]);
        let mut bytes = vec![0; rewrite[1].encoded_len()];
        rewrite[1].encode(&mut bytes);
        assert_eq!(bytes[0], 21, "written again in this build's one kind");
    }
}
