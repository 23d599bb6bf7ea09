//! A search-based linearizability checker: Wing & Gong's depth-first search for a sequential
//! order, with Lowe's memoization of (linearized set, model state) pairs, as in Porcupine
//! (Athalye, `porcupine/checker.go`, `checkSingle`).
//!
//! The checker is meant for one partition of a history at a time. Linearizability is
//! P-compositional (Herlihy & Wing, "locality"): a history is linearizable iff the
//! sub-history of every object is, and an operation touching several keys may be projected
//! onto each key it touches when checking that key (a necessary condition for the whole). So
//! the callers split a key-value history per key and check each part, which keeps every
//! search small.
//!
//! It trusts nothing the system under test says about order (no sequence numbers): only the
//! invocation and response times, the inputs and the outputs.
//!
//! The search, over the history's call and return entries kept in a doubly linked list
//! sorted by time:
//! - Walk the list from its head. At a call entry, try to linearize that operation next: if
//!   the model accepts it in the current state and the resulting (linearized set, state)
//!   pair has not been seen before, push it on a stack, remove its call and return entries
//!   from the list and start again from the head.
//! - Reaching a return entry means that operation must be linearized before anything still
//!   in the list after it (it responded before they were invoked), yet every candidate before
//!   it failed: undo the last choice (pop, put its entries back) and try the entry after its
//!   call.
//! - An empty list is a linearization; an empty stack at a return entry is a proof that none
//!   exists.
//!
//! Walking from the head means only operations invoked before the earliest response among
//! the operations not yet linearized are candidates, which is exactly the real-time
//! constraint.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

/// A sequential specification.
pub trait Model {
    type State: Clone + Eq + Hash + Debug;
    type Operation: Debug;
    fn initial(&self) -> Self::State;
    /// The state after `operation` if its recorded output is what the specification allows
    /// in `state`; None otherwise.
    fn step(&self, state: &Self::State, operation: &Self::Operation) -> Option<Self::State>;
}

/// One completed operation: its interval on a logical clock shared by all clients, and the
/// operation with its input and output.
#[derive(Debug, Clone)]
pub struct Timed<Operation> {
    pub invoke: u64,
    pub response: u64,
    pub operation: Operation,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// No linearization exists; the text names the operation the deepest attempt stalled on.
    Violation(String),
    /// The step budget ran out before the search finished: neither a proof nor a
    /// counterexample, so the caller must not count it as a pass.
    Inconclusive,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub verdict: Verdict,
    /// List entries visited; the measure of search work the budget limits.
    pub steps: u64,
    /// Distinct (linearized set, state) pairs memoized.
    pub cache_entries: usize,
}

/// The set of linearized operations, indexed by invocation order, stored as a bitset.
///
/// The memo key is its canonical compact form: the number of leading all-ones words and the
/// words after them up to the last nonzero one. Operations are numbered in invocation order
/// and an operation can only be linearized while every earlier-responding one has been, so
/// the set is a long full prefix plus a short ragged window; hashing the whole bitset would
/// make each memo entry O(n) and the memo O(n²) on long per-key histories.
struct LinearizedSet {
    words: Vec<u64>,
    /// Number of leading words equal to `u64::MAX`.
    full_words: usize,
    /// An upper bound on the index of the last nonzero word (exact after every update).
    last_nonzero_word: usize,
}

impl LinearizedSet {
    fn new(operation_count: usize) -> Self {
        LinearizedSet {
            words: vec![0; operation_count.div_ceil(64).max(1)],
            full_words: 0,
            last_nonzero_word: 0,
        }
    }

    fn insert(&mut self, index: usize) {
        let word = index / 64;
        self.words[word] |= 1 << (index % 64);
        self.last_nonzero_word = self.last_nonzero_word.max(word);
        while self.full_words < self.words.len() && self.words[self.full_words] == u64::MAX {
            self.full_words += 1;
        }
    }

    fn remove(&mut self, index: usize) {
        let word = index / 64;
        self.words[word] &= !(1 << (index % 64));
        self.full_words = self.full_words.min(word);
        while self.last_nonzero_word > 0 && self.words[self.last_nonzero_word] == 0 {
            self.last_nonzero_word -= 1;
        }
    }

    fn compact(&self) -> CompactSet {
        let window = if self.full_words > self.last_nonzero_word {
            &[][..]
        } else {
            &self.words[self.full_words..=self.last_nonzero_word]
        };
        CompactSet {
            full_words: self.full_words,
            window: window.into(),
        }
    }
}

/// The canonical form of a `LinearizedSet`: equal sets give equal values.
#[derive(PartialEq, Eq, Hash)]
struct CompactSet {
    full_words: usize,
    window: Box<[u64]>,
}

/// Entries of the doubly linked list; index 0 is the head sentinel, `2n + 1` the tail.
struct EntryList {
    next: Vec<usize>,
    previous: Vec<usize>,
    /// For each list entry: the operation (index in invocation order) and whether it is the
    /// call (true) or the return.
    operation: Vec<usize>,
    is_call: Vec<bool>,
    call_entry: Vec<usize>,
    return_entry: Vec<usize>,
}

const HEAD: usize = 0;

impl EntryList {
    fn new<Operation>(operations: &[&Timed<Operation>]) -> Self {
        let count = operations.len();
        // (time, 0 for a call or 1 for a return, operation): at equal times calls sort
        // first, so operations whose intervals touch are treated as concurrent, the
        // permissive reading (as Porcupine does).
        let mut entries: Vec<(u64, u8, usize)> = Vec::with_capacity(2 * count);
        for (index, timed) in operations.iter().enumerate() {
            entries.push((timed.invoke, 0, index));
            entries.push((timed.response, 1, index));
        }
        entries.sort_unstable();
        let tail = 2 * count + 1;
        let mut list = EntryList {
            next: (1..=tail + 1).collect(),
            previous: (0..=tail).map(|entry| entry.saturating_sub(1)).collect(),
            operation: vec![usize::MAX; tail + 1],
            is_call: vec![false; tail + 1],
            call_entry: vec![0; count],
            return_entry: vec![0; count],
        };
        for (position, &(_, kind, index)) in entries.iter().enumerate() {
            let entry = position + 1;
            list.operation[entry] = index;
            list.is_call[entry] = kind == 0;
            if kind == 0 {
                list.call_entry[index] = entry;
            } else {
                list.return_entry[index] = entry;
            }
        }
        list
    }

    fn tail(&self) -> usize {
        self.next.len() - 1
    }

    fn unlink(&mut self, entry: usize) {
        let (previous, next) = (self.previous[entry], self.next[entry]);
        self.next[previous] = next;
        self.previous[next] = previous;
    }

    /// Undoes `unlink(entry)`: valid only in reverse order of the unlinks (dancing links),
    /// which the search's stack discipline guarantees.
    fn relink(&mut self, entry: usize) {
        let (previous, next) = (self.previous[entry], self.next[entry]);
        self.next[previous] = entry;
        self.previous[next] = entry;
    }

    fn lift(&mut self, operation: usize) {
        self.unlink(self.call_entry[operation]);
        self.unlink(self.return_entry[operation]);
    }

    fn unlift(&mut self, operation: usize) {
        self.relink(self.return_entry[operation]);
        self.relink(self.call_entry[operation]);
    }
}

/// Searches for a linearization of `history` under `model`, visiting at most `step_budget`
/// list entries.
pub fn check<M: Model>(model: &M, history: &[Timed<M::Operation>], step_budget: u64) -> Outcome {
    for timed in history {
        assert!(
            timed.invoke <= timed.response,
            "operation responded before it was invoked: {timed:?}"
        );
    }
    let mut operations: Vec<&Timed<M::Operation>> = history.iter().collect();
    operations.sort_by_key(|timed| (timed.invoke, timed.response));
    let mut list = EntryList::new(&operations);
    let tail = list.tail();
    let mut linearized = LinearizedSet::new(operations.len());
    let mut state = model.initial();
    // The choices made so far: the operation linearized and the state before it.
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut cache: HashSet<(CompactSet, M::State)> = HashSet::new();
    // Where the search got furthest, for the report: depth, stalled operation, state.
    let mut deepest: Option<(usize, usize, M::State)> = None;
    let mut steps = 0u64;
    let mut entry = list.next[HEAD];
    while list.next[HEAD] != tail {
        // The last entry in the list is always a return, so the walk meets one first.
        debug_assert_ne!(entry, tail);
        steps += 1;
        if steps > step_budget {
            return Outcome {
                verdict: Verdict::Inconclusive,
                steps: steps - 1,
                cache_entries: cache.len(),
            };
        }
        let operation = list.operation[entry];
        if list.is_call[entry] {
            if let Some(next_state) = model.step(&state, &operations[operation].operation) {
                linearized.insert(operation);
                if cache.insert((linearized.compact(), next_state.clone())) {
                    stack.push((operation, std::mem::replace(&mut state, next_state)));
                    list.lift(operation);
                    entry = list.next[HEAD];
                    continue;
                }
                // Seen before: every continuation from here was already explored.
                linearized.remove(operation);
            }
            entry = list.next[entry];
        } else {
            if deepest
                .as_ref()
                .is_none_or(|(depth, _, _)| stack.len() > *depth)
            {
                deepest = Some((stack.len(), operation, state.clone()));
            }
            let Some((undone, previous_state)) = stack.pop() else {
                let (depth, stalled, stalled_state) =
                    deepest.unwrap_or((0, operation, state.clone()));
                let timed = operations[stalled];
                return Outcome {
                    verdict: Verdict::Violation(format!(
                        "no linearization: at most {depth} of {} operations could be ordered; \
                         then {:?} [{}, {}] could not take effect in state {stalled_state:?}",
                        operations.len(),
                        timed.operation,
                        timed.invoke,
                        timed.response
                    )),
                    steps,
                    cache_entries: cache.len(),
                };
            };
            state = previous_state;
            linearized.remove(undone);
            list.unlift(undone);
            entry = list.next[list.call_entry[undone]];
        }
    }
    Outcome {
        verdict: Verdict::Linearizable,
        steps,
        cache_entries: cache.len(),
    }
}

/// An operation on one key of a key-value store whose values are strings and whose
/// increments treat the value as a decimal integer (absent = 0).
#[derive(Debug, Clone)]
pub enum KeyOperation {
    Put(Arc<str>),
    Delete,
    /// A read and the value it returned.
    Get(Option<Arc<str>>),
    /// An atomic increment by one and the new value it returned (kept also as text, the form
    /// the store holds, so the model compares states without formatting numbers).
    Increment {
        returned: i64,
        text: Arc<str>,
    },
    /// Stores the value if the key is absent (`stored`), else leaves it (and saw it present).
    PutIfAbsent {
        value: Arc<str>,
        stored: bool,
    },
    /// Replaces the value with `new` (None deletes) iff it equals `expected` (None: absent);
    /// `swapped` is what the operation reported.
    CompareAndSwap {
        expected: Option<Arc<str>>,
        new: Option<Arc<str>>,
        swapped: bool,
    },
}

impl KeyOperation {
    pub fn put(value: &str) -> Self {
        KeyOperation::Put(value.into())
    }

    /// A put of `value`, or a delete for None.
    pub fn from_value(value: Option<&str>) -> Self {
        value.map_or(KeyOperation::Delete, KeyOperation::put)
    }

    pub fn get(value: Option<&str>) -> Self {
        KeyOperation::Get(value.map(Arc::from))
    }

    pub fn increment(returned: i64) -> Self {
        KeyOperation::Increment {
            returned,
            text: returned.to_string().into(),
        }
    }
}

/// The sequential specification of one key: a register (put sets, delete clears, get
/// returns the current value, compare-and-swap sets iff the current value is the expected
/// one) that is also a counter (increment adds one and returns the new value).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyModel;

impl Model for KeyModel {
    type State = Option<Arc<str>>;
    type Operation = KeyOperation;

    fn initial(&self) -> Self::State {
        None
    }

    fn step(&self, state: &Self::State, operation: &KeyOperation) -> Option<Self::State> {
        match operation {
            KeyOperation::Put(value) => Some(Some(Arc::clone(value))),
            KeyOperation::Delete => Some(None),
            KeyOperation::Get(value) => (value == state).then(|| state.clone()),
            KeyOperation::Increment { returned, text } => {
                let current: i64 = match state {
                    None => 0,
                    Some(value) => value.parse().ok()?,
                };
                (current.checked_add(1) == Some(*returned)).then(|| Some(Arc::clone(text)))
            }
            KeyOperation::PutIfAbsent { value, stored } => match (state, stored) {
                (None, true) => Some(Some(Arc::clone(value))),
                (Some(_), false) => Some(state.clone()),
                _ => None,
            },
            KeyOperation::CompareAndSwap {
                expected,
                new,
                swapped,
            } => {
                // Succeeds iff the current value is the expected one; a failure changes nothing.
                let matches = expected == state;
                (matches == *swapped).then(|| if matches { new.clone() } else { state.clone() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDGET: u64 = 1_000_000;

    fn timed(invoke: u64, response: u64, operation: KeyOperation) -> Timed<KeyOperation> {
        Timed {
            invoke,
            response,
            operation,
        }
    }

    fn verdict(history: &[Timed<KeyOperation>]) -> Verdict {
        check(&KeyModel, history, BUDGET).verdict
    }

    fn assert_violation(history: &[Timed<KeyOperation>]) {
        let verdict = verdict(history);
        assert!(
            matches!(verdict, Verdict::Violation(_)),
            "expected a violation, got {verdict:?}"
        );
    }

    #[test]
    fn empty_history_is_linearizable() {
        assert_eq!(verdict(&[]), Verdict::Linearizable);
    }

    #[test]
    fn concurrent_linearizable_history_passes() {
        // Three clients. The get at [3, 8] overlaps both puts and may see either; the get
        // at [9, 12] must see b, which only works if put(b) is ordered after put(a) even
        // though put(b) was invoked first: the search has to find that order.
        let history = [
            timed(1, 10, KeyOperation::put("b")),
            timed(2, 6, KeyOperation::put("a")),
            timed(3, 8, KeyOperation::get(Some("a"))),
            timed(11, 12, KeyOperation::get(Some("b"))),
            timed(13, 16, KeyOperation::Delete),
            timed(14, 15, KeyOperation::get(None)),
            timed(17, 18, KeyOperation::get(None)),
        ];
        assert_eq!(verdict(&history), Verdict::Linearizable);
    }

    #[test]
    fn concurrent_increments_pass_in_either_order() {
        let history = [
            timed(1, 6, KeyOperation::increment(2)),
            timed(2, 5, KeyOperation::increment(1)),
            timed(3, 4, KeyOperation::get(Some("1"))),
            timed(7, 8, KeyOperation::get(Some("2"))),
        ];
        assert_eq!(verdict(&history), Verdict::Linearizable);
    }

    #[test]
    fn stale_read_after_a_completed_write_fails() {
        let history = [
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 4, KeyOperation::put("b")),
            timed(5, 6, KeyOperation::get(Some("a"))),
        ];
        assert_violation(&history);
    }

    #[test]
    fn two_increments_both_returning_one_fail() {
        let history = [
            timed(1, 4, KeyOperation::increment(1)),
            timed(2, 3, KeyOperation::increment(1)),
        ];
        assert_violation(&history);
    }

    #[test]
    fn put_if_absent_that_saw_a_value_then_a_read_of_nothing_fails() {
        // The keep saw the key present, finished, and only then did a read find it absent,
        // with no delete anywhere: there is no order for it.
        let history = [
            timed(1, 10, KeyOperation::put("a")),
            timed(
                2,
                3,
                KeyOperation::PutIfAbsent {
                    value: "b".into(),
                    stored: false,
                },
            ),
            timed(4, 5, KeyOperation::get(None)),
        ];
        assert_violation(&history);
    }

    #[test]
    fn put_if_absent_stores_only_over_nothing() {
        let stored = |value: &str| KeyOperation::PutIfAbsent {
            value: value.into(),
            stored: true,
        };
        assert_violation(&[
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 4, stored("b")),
        ]);
        let history = [
            timed(1, 2, stored("a")),
            timed(3, 4, KeyOperation::get(Some("a"))),
            timed(5, 6, KeyOperation::Delete),
            timed(7, 8, stored("b")),
            timed(9, 10, KeyOperation::get(Some("b"))),
        ];
        assert!(matches!(
            check(&KeyModel, &history, BUDGET).verdict,
            Verdict::Linearizable
        ));
    }

    fn cas(expected: Option<&str>, new: Option<&str>, swapped: bool) -> KeyOperation {
        KeyOperation::CompareAndSwap {
            expected: expected.map(Arc::from),
            new: new.map(Arc::from),
            swapped,
        }
    }

    #[test]
    fn compare_and_swap_succeeds_iff_the_value_matches() {
        let history = [
            timed(1, 2, cas(None, Some("a"), true)),
            timed(3, 4, cas(None, Some("b"), false)),
            timed(5, 6, cas(Some("a"), None, true)),
            timed(7, 8, KeyOperation::get(None)),
        ];
        assert_eq!(verdict(&history), Verdict::Linearizable);
        // A swap reported as done although the value had changed.
        assert_violation(&[
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 4, cas(None, Some("b"), true)),
        ]);
        // A swap reported as failed although the value matched, and nothing raced it.
        assert_violation(&[
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 4, cas(Some("a"), Some("b"), false)),
        ]);
        // A failed swap must leave the value alone.
        assert_violation(&[
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 4, cas(Some("z"), Some("b"), false)),
            timed(5, 6, KeyOperation::get(Some("b"))),
        ]);
    }

    #[test]
    fn concurrent_compare_and_swaps_from_one_value_cannot_both_win() {
        let history = [
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 6, cas(Some("a"), Some("b"), true)),
            timed(4, 5, cas(Some("a"), Some("c"), true)),
        ];
        assert_violation(&history);
        // One of them may fail, in either order against the racing winner.
        let history = [
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 6, cas(Some("a"), Some("b"), false)),
            timed(4, 5, cas(Some("a"), Some("c"), true)),
            timed(7, 8, KeyOperation::get(Some("c"))),
        ];
        assert_eq!(verdict(&history), Verdict::Linearizable);
    }

    #[test]
    fn read_of_a_value_never_written_fails() {
        let history = [
            timed(1, 4, KeyOperation::put("a")),
            timed(2, 3, KeyOperation::get(Some("z"))),
        ];
        assert_violation(&history);
    }

    #[test]
    fn read_going_back_in_time_fails() {
        // Both reads overlap the put, so each alone is fine; but the second read starts
        // after the first, which saw the new value, finished.
        let history = [
            timed(1, 2, KeyOperation::put("old")),
            timed(3, 10, KeyOperation::put("new")),
            timed(4, 5, KeyOperation::get(Some("new"))),
            timed(6, 7, KeyOperation::get(Some("old"))),
        ];
        assert_violation(&history);
    }

    #[test]
    fn deleted_value_does_not_come_back() {
        let history = [
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 4, KeyOperation::Delete),
            timed(5, 6, KeyOperation::get(Some("a"))),
        ];
        assert_violation(&history);
    }

    #[test]
    fn exhausted_budget_is_inconclusive_not_a_pass() {
        let history = [
            timed(1, 2, KeyOperation::put("a")),
            timed(3, 4, KeyOperation::get(Some("a"))),
        ];
        // Linearizing the put takes one step, the get a second.
        let outcome = check(&KeyModel, &history, 1);
        assert_eq!(outcome.verdict, Verdict::Inconclusive);
        assert_eq!(outcome.steps, 1);
        assert_eq!(check(&KeyModel, &history, 2).verdict, Verdict::Linearizable);
    }

    #[test]
    fn long_sequential_history_is_cheap() {
        // 100 000 increments one after another: the compact memo keys keep this linear.
        let history: Vec<_> = (0..100_000)
            .map(|index| {
                timed(
                    2 * index,
                    2 * index + 1,
                    KeyOperation::increment(index as i64 + 1),
                )
            })
            .collect();
        let outcome = check(&KeyModel, &history, BUDGET);
        assert_eq!(outcome.verdict, Verdict::Linearizable);
        assert_eq!(outcome.steps, 100_000);
        assert_eq!(outcome.cache_entries, 100_000);
    }

    #[test]
    fn violation_deep_in_a_wide_history_is_found() {
        // Four clients interleaved for 400 rounds of puts and reads of their own writes
        // (all linearizable), then one read of a value overwritten long ago.
        let mut history = Vec::new();
        let mut clock = 0;
        for round in 0..400 {
            let start = clock;
            for client in 0..4 {
                history.push(timed(
                    start + client,
                    start + 8 + client,
                    KeyOperation::put(&format!("{round}-{client}")),
                ));
            }
            clock += 12;
            history.push(timed(clock, clock + 1, KeyOperation::Delete));
            clock += 2;
        }
        history.push(timed(clock, clock + 1, KeyOperation::get(Some("3-1"))));
        let outcome = check(&KeyModel, &history, BUDGET);
        assert!(
            matches!(outcome.verdict, Verdict::Violation(_)),
            "{outcome:?}"
        );
    }
}
