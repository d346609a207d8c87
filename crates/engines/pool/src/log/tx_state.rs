//! The life of a transaction as one state, and the transitions between states, each
//! asserted (an engine bug that commits twice, aborts a committed transaction or dooms a
//! finished one stops at the transition, not later in the log).
//!
//! ```text
//! Idle --begin--> Running --doom--> Doomed
//!                 Running --commit--> Committed
//!       Running | Doomed --merge--> Merged          (a syncv member: the group commits it)
//!       Running | Doomed --abort--> Aborting --aborted--> Aborted
//! any finished state --reset--> Idle
//! ```
//!
//! `Aborting` is an abort whose DRAM follow-up has started (the transaction is out of the
//! table, its files unbound) and whose undo has not run yet.

/// Where a transaction is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum TxState {
    /// Reset: no id, nothing logged.
    #[default]
    Idle,
    /// Begun: operations may join it.
    Running,
    /// An operation failed after it had changed something: it must be aborted.
    Doomed,
    /// Merged into a group (syncv), which commits or aborts it.
    Merged,
    /// Past its commit point.
    Committed,
    /// Being aborted: out of the transaction table, its undo not applied yet.
    Aborting,
    /// Rolled back.
    Aborted,
}

impl TxState {
    /// Running or doomed: still to be committed or aborted.
    pub(crate) fn is_open(self) -> bool {
        matches!(self, TxState::Running | TxState::Doomed)
    }

    pub(crate) fn is_doomed(self) -> bool {
        self == TxState::Doomed
    }

    fn step(&mut self, to: TxState, allowed: bool) {
        assert!(allowed, "transaction state: {:?} -> {to:?}", *self);
        *self = to;
    }

    pub(crate) fn begin(&mut self) {
        self.step(TxState::Running, *self == TxState::Idle);
    }

    /// An error that changed something: the transaction can only be aborted now.
    pub(crate) fn doom(&mut self) {
        self.step(TxState::Doomed, self.is_open());
    }

    pub(crate) fn merge(&mut self) {
        self.step(TxState::Merged, self.is_open());
    }

    pub(crate) fn commit(&mut self) {
        self.step(TxState::Committed, *self == TxState::Running);
    }

    /// The abort starts (idempotent: an abort already started stays started).
    pub(crate) fn abort(&mut self) {
        let allowed = self.is_open() || *self == TxState::Aborting;
        self.step(TxState::Aborting, allowed);
    }

    pub(crate) fn aborted(&mut self) {
        self.step(TxState::Aborted, *self == TxState::Aborting);
    }

    pub(crate) fn reset(&mut self) {
        let finished = matches!(
            self,
            TxState::Idle | TxState::Merged | TxState::Committed | TxState::Aborted
        );
        self.step(TxState::Idle, finished);
    }
}

#[cfg(test)]
mod tests {
    use super::TxState;

    #[test]
    fn the_ordinary_lives() {
        let mut s = TxState::default();
        s.begin();
        assert!(s.is_open() && !s.is_doomed());
        s.commit();
        assert!(!s.is_open());
        s.reset();
        s.begin();
        s.doom();
        assert!(s.is_open() && s.is_doomed());
        s.abort();
        s.abort();
        assert!(!s.is_open());
        s.aborted();
        s.reset();
        assert_eq!(s, TxState::Idle);
    }

    #[test]
    #[should_panic(expected = "Doomed -> Committed")]
    fn a_doomed_transaction_never_commits() {
        let mut s = TxState::default();
        s.begin();
        s.doom();
        s.commit();
    }

    #[test]
    #[should_panic(expected = "Committed -> Aborting")]
    fn a_committed_transaction_never_aborts() {
        let mut s = TxState::default();
        s.begin();
        s.commit();
        s.abort();
    }

    #[test]
    #[should_panic(expected = "Running -> Idle")]
    fn a_running_transaction_is_never_recycled() {
        let mut s = TxState::default();
        s.begin();
        s.reset();
    }
}
