//! The exchange of conserved permits between peers, written once for every
//! shared kind: per period and per node, what a node asked for and how much
//! of it was answered, what this locker gave each node and got from it;
//! what this locker itself asked for; and the one kept form a state file
//! holds of it.
//!
//! **Why a shared kind never grants more than its limit.** Each member
//! starts with a share of the limit, split by a rule every locker computes
//! alike (`Share::owns`, `Share::rolling_rights`, `Share::holds`), the
//! shares adding up to the limit. A locker grants only out of what it
//! holds. Afterwards permits move only by gifts, and a gift leaves only
//! after its giver has taken it off its own (`give` counts it as given
//! before the kind publishes it), so at every instant what the lockers
//! hold plus what is on its way adds up to no more than the shares did.
//! Every figure is cumulative per (period, node) and merged by maximum
//! (`raise`), so a late, lost or repeated message can delay permits but
//! never make one. A short locker asks (`want`, cumulative too, so an ask
//! decided again does not ask twice); each other member gives its part of
//! a want out of what it can *spare*, unless it asked itself lately (see
//! `give`).
//!
//! What *spare* means, and what a gift does on arrival, is each kind's:
//! - a fixed window's slot (`kinds::fixed::tally`): the permits it owns of
//!   the slot, its initial ones plus gifts less what it gave and granted;
//!   a gift is simply owned, for its slot only;
//! - a rolling window's rights (`kinds::rolling::rights`): a right is a
//!   permit that comes back when the grant made with it leaves the window,
//!   and a gift of window `k` is counted as lent by its giver in `k` and
//!   `k + 1`, so the grants of all lockers in any interval of length T
//!   never add up to more than the rights there are; a locker lends only
//!   rights of its own share, never what it was lent, so a right is with
//!   its member or with one receiver at a time;
//! - a token bucket's period (`kinds::bucket::ledger`): the tokens held; a
//!   gift moves as much room as tokens, and every gift ends with its
//!   period. With `S` the tokens held plus those in gifts still to be
//!   used, and `R` the room held plus the room in those gifts, `S <= R <=
//!   burst`, and `S` grows only by refill at `rate x R / burst <= rate`,
//!   so over any span `T` the group grants at most `burst + rate x T` (on
//!   the clocks of the group: a residual skew `e` between a giver and its
//!   receiver can add at most `rate x e`).
//!
//! A restart with its state file resumes its earlier runs' exchanges
//! (`KeptExchange`, written before a gift leaves) and owns what they gave
//! less and what they got more; without the file it owns nothing of the
//! period it joins in (`Share::owns_from`). Pure arithmetic: no clock, no
//! names, no wire format.

use crate::core::share::{raise, Counted, NodeIx, ME};
use crate::core::time::Nanos;

/// What this locker and one peer node traded in one period, each figure
/// cumulative: what the node asked its peers for and how much of that
/// this locker answered, what this locker gave it and what it gave this
/// locker.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Trade {
    pub period: u64,
    pub node: NodeIx,
    pub wanted: u32,
    pub answered: u32,
    pub gave: u32,
    pub got: u32,
}

/// One key's exchange of conserved permits: a trade per (period, node),
/// and what this locker asked its peers for.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Exchange {
    trades: Vec<Trade>,
    /// What this locker asked for, in the period given, and whether that
    /// grew since it was last noted for publishing.
    wanted: (u64, u32),
    wanted_new: bool,
    /// Until when this locker keeps what it owns rather than give it: set
    /// by its last want that grew (see `give`).
    keeps_until: Nanos,
}

/// A step of `Exchange::give`, for the kind to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Giving {
    /// A want of `node` is about to be answered (a rolling window renews
    /// what it lent the node first).
    Answering(NodeIx),
    /// `n` more were given to `node`, `total` in all in the period: the
    /// kind takes them off its own before it publishes `total`.
    Gave { node: NodeIx, n: u32, total: u32 },
}

impl Exchange {
    /// Empty again, keeping the memory.
    pub fn clear(&mut self) {
        self.trades.clear();
        (self.wanted, self.wanted_new, self.keeps_until) = ((0, 0), false, 0);
    }

    /// Forgets the trades of periods before `from`, and the wants of
    /// periods before `wants_from`.
    pub fn prune(&mut self, from: u64, wants_from: u64) {
        self.trades.retain(|t| t.period >= from);
        for t in self.trades.iter_mut().filter(|t| t.period < wants_from) {
            (t.wanted, t.answered) = (0, 0);
        }
        self.trades.retain(|t| t.wanted > 0 || t.gave > 0 || t.got > 0);
    }

    /// Whether no trade is kept.
    pub fn is_empty(&self) -> bool {
        self.trades.is_empty()
    }

    /// Every trade kept.
    pub fn trades(&self) -> impl Iterator<Item = &Trade> + '_ {
        self.trades.iter()
    }

    /// The trade with `node` in `period` (all 0 when there is none).
    pub fn trade(&self, period: u64, node: NodeIx) -> Trade {
        let found = self.trades.iter().find(|t| t.period == period && t.node == node);
        found.copied().unwrap_or(Trade { period, node, ..Trade::default() })
    }

    /// The trade with `node` in `period`, added when new.
    pub fn trade_mut(&mut self, period: u64, node: NodeIx) -> &mut Trade {
        let i = match self.trades.iter().position(|t| t.period == period && t.node == node) {
            Some(i) => i,
            None => {
                self.trades.push(Trade { period, node, ..Trade::default() });
                self.trades.len() - 1
            }
        };
        &mut self.trades[i]
    }

    /// What the peers gave this locker in `period`, in all.
    pub fn got_in(&self, period: u64) -> u32 {
        self.trades.iter().filter(|t| t.period == period).fold(0, |sum, t| sum.saturating_add(t.got))
    }

    /// What this locker gave the peers in `period`, in all.
    pub fn gave_in(&self, period: u64) -> u32 {
        self.trades.iter().filter(|t| t.period == period).fold(0, |sum, t| sum.saturating_add(t.gave))
    }

    /// What this locker asked its peers for in `period`.
    pub fn wanted_in(&self, period: u64) -> u32 {
        if self.wanted.0 == period {
            self.wanted.1
        } else {
            0
        }
    }

    /// Raises what this locker asks its peers for in `period` to `total`:
    /// what was asked is cumulative, so an ask decided again does not ask
    /// twice. When it grows, this locker keeps what it owns until
    /// `keep_until` (see `give`): its callers are still asking. Returns
    /// whether it grew.
    pub fn want(&mut self, period: u64, total: u32, keep_until: Nanos) -> bool {
        if self.wanted.0 != period {
            self.wanted = (period, 0);
        }
        let grew = raise(&mut self.wanted.1, total) > 0;
        self.wanted_new |= grew;
        if grew {
            self.keeps_until = keep_until;
        }
        grew
    }

    /// Whether this locker asked for permits in `period` and keeps what it
    /// owns at `now` (see `give`).
    pub fn keeps_own(&self, period: u64, now: Nanos) -> bool {
        self.wanted_in(period) > 0 && now < self.keeps_until
    }

    /// What this locker asked for, `(period, total)`, if that grew since
    /// the last call.
    pub fn take_wanted_new(&mut self) -> Option<(u64, u32)> {
        std::mem::take(&mut self.wanted_new).then_some(self.wanted)
    }

    /// Merges a peer's cumulative `count` of `what`, by `node` in
    /// `period`: a want of another node, a gift to this locker, or an echo
    /// of this locker's own gift (a snapshot after a pause); grants, and
    /// gifts between other nodes, change nothing here. Returns by how much
    /// the figure grew: a late or repeated one changes nothing.
    pub fn merge(&mut self, period: u64, node: NodeIx, what: Counted, count: u32) -> u32 {
        match what {
            Counted::Wanted if node != ME => raise(&mut self.trade_mut(period, node).wanted, count),
            Counted::Gave(ME) if node != ME => raise(&mut self.trade_mut(period, node).got, count),
            Counted::Gave(to) if node == ME && to != ME => raise(&mut self.trade_mut(period, to).gave, count),
            Counted::Granted | Counted::Wanted | Counted::Gave(_) => 0,
        }
    }

    /// Whether a want of `period` is not yet answered.
    pub fn unanswered(&self, period: u64) -> bool {
        self.trades.iter().any(|t| t.period == period && t.wanted > t.answered)
    }

    /// Answers the wants of `period` not yet answered at `now`: gives each
    /// its part (a share of what it lacks per other member, `others`, so
    /// that together they give about what was asked, not that many times),
    /// out of `spare`. Not while this locker itself asked lately (it keeps
    /// its own until the time its last want set, a round trip or two):
    /// its callers are asking too, and it keeps what it owns rather than
    /// pass permits back and forth. A want left unanswered then is
    /// answered when it is heard again (a short peer says so again at
    /// each sorry), so that once this locker's own demand has ended, what
    /// it was given and did not spend moves on to where the demand is.
    /// `step` hears each want answered and each gift, already counted as
    /// given.
    pub fn give(
        &mut self,
        period: u64,
        mut spare: u32,
        others: u32,
        now: Nanos,
        mut step: impl FnMut(&mut Exchange, Giving),
    ) {
        if self.keeps_own(period, now) {
            return;
        }
        for i in 0..self.trades.len() {
            let Trade { period: p, node, wanted, answered, .. } = self.trades[i];
            if p != period || wanted <= answered {
                continue;
            }
            self.trades[i].answered = wanted;
            step(self, Giving::Answering(node));
            let n = (wanted - answered).div_ceil(others.max(1)).min(spare);
            if n == 0 {
                continue;
            }
            spare -= n;
            let total = self.trade_mut(period, node).gave.saturating_add(n);
            self.trade_mut(period, node).gave = total;
            step(self, Giving::Gave { node, n, total });
        }
    }

    /// Calls `f` with the figure of every trade, as `(period, node,
    /// count, what)`: the peers' wants and their gifts to this locker, and
    /// this locker's gifts (as `ME`'s). Its own want is `wanted_in`'s.
    pub fn counts(&self, mut f: impl FnMut(u64, NodeIx, u32, Counted)) {
        for t in &self.trades {
            if t.wanted > 0 {
                f(t.period, t.node, t.wanted, Counted::Wanted);
            }
            if t.got > 0 {
                f(t.period, t.node, t.got, Counted::Gave(ME));
            }
            if t.gave > 0 {
                f(t.period, ME, t.gave, Counted::Gave(t.node));
            }
        }
    }
}

/// What a run's exchange for one key left in one period, as the state
/// file keeps it (`Kept::Exchange`), written before a gift leaves: the
/// period (a fixed window's slot, a rolling window's window, a token
/// bucket's period), what the run gave its peers and got from them in all,
/// and for a token bucket the share the gifts left (its own room before
/// gifts, the room held, and that room's fill as a TAT; 0 for the windows).
/// A restart with the file that resumes the run's share owns what it
/// gave less and what it got more (each kind says how: its `kept` module).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KeptExchange {
    pub period: u64,
    pub gave: u32,
    pub got: u32,
    pub base: u32,
    pub room: u32,
    pub tat: Nanos,
}
