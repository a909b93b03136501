//! What each request left behind, on its way to the state log: the
//! changes a request made are noted while it is decided, and turned into
//! records, read from the locker as it is then, before the call that
//! decided them returns.
//!
//! `Keep` is where the records go. Every call of the service that can
//! grant takes one, so no caller can answer a request and forget to record
//! it: the daemon hands its state file's keeper, a locker without a state
//! file hands `&mut ()`. This module neither reads a clock nor touches the
//! file: `now` comes in, records go out through `Keep`.

use crate::core::{LimitId, Locker, Nanos, Verdict};

use super::Record;

/// Where the records of what a request left behind go, before its reply
/// leaves: the state file, or nowhere (`()`).
pub trait Keep {
    /// The run the records belong to; `None` keeps nothing, and then the
    /// service notes nothing either.
    fn run(&self) -> Option<u32>;

    /// Takes one record of what the call being answered left behind.
    fn keep(&mut self, record: &Record);

    /// Called at `now` before each call's records: follows the limits
    /// `locker` serves now, if they changed (see `Keeper::follow`), so that
    /// the records' limit numbers say what they mean.
    fn follow_limits(&mut self, locker: &Locker, now: Nanos) {
        let _ = (locker, now);
    }

    /// Holds the records of one call together, from now until `release`:
    /// a process killed in between leaves none of them (an `all`'s parts,
    /// a batch's grants). Keeping nothing, there is nothing to hold.
    fn hold(&mut self) {}

    /// Ends `hold`: the held records count from now on, all together.
    fn release(&mut self) {}

    /// Called at `now` after each call's records: makes room for the next call's,
    /// or says why no grant may be made until there is room (a grant must
    /// be recorded before its reply, and a full disk could not record it).
    fn make_room(&mut self, now: Nanos) -> Result<(), &'static str> {
        let _ = now;
        Ok(())
    }
}

/// Keeps nothing: a locker without a state file.
impl Keep for () {
    fn run(&self) -> Option<u32> {
        None
    }

    fn keep(&mut self, _: &Record) {}
}

/// What the call being answered changed, until its records are kept: one
/// change for most requests, one per granted entry for a batch.
#[derive(Debug, Default)]
pub struct Journal {
    /// The run being noted for; `None` notes nothing.
    run: Option<u32>,
    /// Each change, with where its key (or lease id) lies in `names`, if
    /// it has one. Both are cleared, never shrunk, so a warmed-up locker
    /// notes without allocating.
    pending: Vec<(Change, Option<(usize, usize)>)>,
    names: String,
}

#[derive(Debug, Clone, Copy)]
enum Change {
    Go {
        id: LimitId,
        verdict: Verdict,
    },
    /// What a key holds in the slots after the current one: a charge's
    /// debt carried into them.
    Ahead {
        id: LimitId,
    },
    Lease {
        id: LimitId,
    },
}

impl Journal {
    /// Starts a call whose records go to `keep`: notes only if it keeps.
    #[inline]
    pub fn open(&mut self, keep: &impl Keep) {
        self.run = keep.run();
    }

    /// Notes a grant of `id` for `key`.
    #[inline]
    pub fn note_go(&mut self, id: LimitId, key: Option<&str>, verdict: &Verdict) {
        if self.run.is_some() && verdict.go && verdict.granted > 0 {
            self.note(Change::Go { id, verdict: *verdict }, key);
        }
    }

    /// Notes a charge of `id` for `key`, answered with `verdict`: its count
    /// now, and what it carried into the slots after (a fixed window's
    /// debt), so that a restart still waits the debt out.
    pub fn note_charge(&mut self, id: LimitId, key: Option<&str>, verdict: &Verdict) {
        if self.run.is_some() && verdict.granted > 0 {
            self.note(Change::Go { id, verdict: *verdict }, key);
            self.note(Change::Ahead { id }, key);
        }
    }

    /// Notes that `key`'s own count of `id` changed other than by a grant
    /// (a refund, a reset): its record says the count as it is now.
    pub fn note_count(&mut self, id: LimitId, key: Option<&str>) {
        if self.run.is_some() {
            // Read as a go's record is: the key's own count now.
            self.note(Change::Go { id, verdict: Verdict::go(0, 0, 0, 1) }, key);
        }
    }

    /// Notes a change to `lease` of semaphore `id` (taken, renewed, released).
    pub fn note_lease(&mut self, id: LimitId, lease: &str) {
        if self.run.is_some() {
            self.note(Change::Lease { id }, Some(lease));
        }
    }

    fn note(&mut self, change: Change, name: Option<&str>) {
        let span = name.map(|n| {
            let start = self.names.len();
            self.names.push_str(n);
            (start, self.names.len())
        });
        self.pending.push((change, span));
    }

    /// Hands `keep` the record of each change noted since `open`, read
    /// from `locker` at `now`, and lets it make room for the next call;
    /// returns why grants must be refused, if they must.
    #[inline]
    pub fn close(&mut self, locker: &Locker, now: Nanos, keep: &mut impl Keep) -> Result<(), &'static str> {
        if let Some(run) = self.run {
            self.write(run, locker, now, keep);
        }
        keep.make_room(now)
    }

    /// Hands `keep` the records of run `run`'s changes, and forgets them.
    fn write(&mut self, run: u32, locker: &Locker, now: Nanos, keep: &mut impl Keep) {
        keep.follow_limits(locker, now);
        // The records of one call are one record's worth on disk: an
        // `all` whose parts went is kept whole or not at all.
        let together = self.pending.len() > 1;
        if together {
            keep.hold();
        }
        for &(change, span) in &self.pending {
            let name = span.map(|(start, end)| &self.names[start..end]);
            records_of(locker, now, run, change, name, |record| keep.keep(&record));
        }
        if together {
            keep.release();
        }
        self.pending.clear();
        self.names.clear();
    }
}

/// The records of one change, read from the locker as it is now, each
/// handed to `keep`.
fn records_of<'a>(
    locker: &Locker,
    now: Nanos,
    run: u32,
    change: Change,
    name: Option<&'a str>,
    mut keep: impl FnMut(Record<'a>),
) {
    let (at, keeping) = (now, locker.keeping());
    let count = |id: LimitId, kept| Record::Count { at, run, limit: id.index() as u32, key: name, kept };
    match change {
        Change::Go { id, verdict } => {
            if let Some(kept) = keeping.kept_go(now, id, name, &verdict) {
                keep(count(id, kept));
            }
        }
        Change::Ahead { id } => keeping.kept_ahead(id, name, |kept| keep(count(id, kept))),
        Change::Lease { id } => {
            let lease = name.unwrap_or("");
            keep(Record::Lease { at, limit: id.index() as u32, lease, kept: keeping.kept_lease(id, lease) });
        }
    }
}
