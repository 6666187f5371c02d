//! The Wing–Gong–Lowe search over one part of a history.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

/// A sequential specification: the object the concurrent history must be equivalent to.
pub trait Model {
    /// The sequential object's state (memoized, so it must hash).
    type State: Clone + Eq + Hash + Debug;
    /// What a client asks.
    type Input: Clone + Debug;
    /// What the object answers.
    type Output: Clone + Debug;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// Operations of different parts never interact (e.g. the key of a key-value operation).
    fn partition(&self, input: &Self::Input) -> String;

    /// Applies `input` to `state`: `Some(next)` if the sequential object can produce `output`
    /// (any output when `output` is `None`: the outcome is unknown), `None` if it cannot.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Option<Self::State>;
}

/// One operation of a history. Times are any monotonic clock (e.g. nanoseconds since start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation<I, O> {
    /// Who issued it (for reports only).
    pub client: u64,
    /// When the call was sent.
    pub call: u64,
    /// When the response arrived. Ignored when `output` is `None`: an operation with an
    /// unknown outcome may take effect at any later time (or never).
    pub ret: u64,
    /// What was asked.
    pub input: I,
    /// `None` when the outcome is unknown (timeout, connection lost).
    pub output: Option<O>,
}

/// The answer of the checker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every partition has a valid order.
    Linearizable,
    /// No valid order exists for the operations of `part`.
    Violation {
        /// The partition.
        part: String,
        /// How many operations it has.
        ops: usize,
    },
    /// The step budget ran out before an answer.
    Unknown {
        /// The partition.
        part: String,
        /// How many operations it has.
        ops: usize,
    },
}

const NIL: usize = usize::MAX;

#[derive(Debug, Clone, Copy)]
struct Entry {
    time: u64,
    is_return: bool,
    op: usize,
    /// For a call: the index of its return entry.
    partner: usize,
}

/// A doubly linked list over the sorted entries; index `len` is the head sentinel.
struct Timeline {
    entries: Vec<Entry>,
    next: Vec<usize>,
    prev: Vec<usize>,
}

impl Timeline {
    fn new<I, O>(ops: &[Operation<I, O>]) -> Timeline {
        let mut entries = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            let ret = if op.output.is_some() {
                op.ret
            } else {
                u64::MAX
            };
            entries.push(Entry {
                time: op.call,
                is_return: false,
                op: i,
                partner: NIL,
            });
            entries.push(Entry {
                time: ret.max(op.call),
                is_return: true,
                op: i,
                partner: NIL,
            });
        }
        // Calls before returns at equal times: touching operations count as concurrent.
        entries.sort_by_key(|e| (e.time, e.is_return, e.op));
        let mut ret_at = vec![NIL; ops.len()];
        for (i, e) in entries.iter().enumerate() {
            if e.is_return {
                ret_at[e.op] = i;
            }
        }
        for e in entries.iter_mut() {
            if !e.is_return {
                e.partner = ret_at[e.op];
            }
        }
        let n = entries.len();
        let head = n;
        let mut next: Vec<usize> = (1..=n).collect();
        next[n - 1] = NIL;
        next.push(if n == 0 { NIL } else { 0 });
        let mut prev: Vec<usize> = (0..n).map(|i| if i == 0 { head } else { i - 1 }).collect();
        prev.push(NIL);
        Timeline {
            entries,
            next,
            prev,
        }
    }

    fn head(&self) -> usize {
        self.entries.len()
    }

    fn first(&self) -> usize {
        self.next[self.head()]
    }

    fn unlink(&mut self, x: usize) {
        let (p, n) = (self.prev[x], self.next[x]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, x: usize) {
        let (p, n) = (self.prev[x], self.next[x]);
        self.next[p] = x;
        if n != NIL {
            self.prev[n] = x;
        }
    }

    /// Takes a call and its return out of the list.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        self.unlink(self.entries[call].partner);
    }

    /// Undoes [`Timeline::lift`] (in reverse order).
    fn unlift(&mut self, call: usize) {
        self.relink(self.entries[call].partner);
        self.relink(call);
    }
}

/// Checks one part (all operations of one key): the search with memoization.
pub fn check_part<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    budget: u64,
) -> Verdict {
    let part = ops
        .first()
        .map(|o| model.partition(&o.input))
        .unwrap_or_default();
    if ops.is_empty() {
        return Verdict::Linearizable;
    }
    let mut line = Timeline::new(ops);
    let words = ops.len().div_ceil(64);
    let mut linearized = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, M::State)> = HashSet::new();
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut entry = line.first();
    let mut steps = 0u64;
    while line.first() != NIL {
        steps += 1;
        if steps > budget {
            return Verdict::Unknown {
                part,
                ops: ops.len(),
            };
        }
        let e = line.entries[entry];
        if !e.is_return {
            let op = &ops[e.op];
            if let Some(next) = model.step(&state, &op.input, op.output.as_ref()) {
                let mut with = linearized.clone();
                with[e.op / 64] |= 1 << (e.op % 64);
                if seen.insert((with.clone(), next.clone())) {
                    stack.push((entry, std::mem::replace(&mut state, next)));
                    linearized = with;
                    line.lift(entry);
                    entry = line.first();
                    continue;
                }
            }
            entry = line.next[entry];
        } else {
            // An operation returned before any order could place it: undo the last choice.
            let Some((call, before)) = stack.pop() else {
                return Verdict::Violation {
                    part,
                    ops: ops.len(),
                };
            };
            let op = line.entries[call].op;
            linearized[op / 64] &= !(1 << (op % 64));
            state = before;
            line.unlift(call);
            entry = line.next[call];
        }
    }
    Verdict::Linearizable
}
