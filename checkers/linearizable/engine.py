"""The Wing-Gong / Lowe linearizability search (WGL), iterative, memoised, budgeted.

Why this shape:

- Calls and returns live in one doubly linked list (index arrays, dancing-links style), so
  linearizing an op is an O(1) "lift" of its call and return and backtracking an O(1)
  "unlift" (Lowe; Porcupine's ``checkSingle``).
- Lowe's memo: the (linearized set, model state) pairs already seen; reaching one again
  cannot lead anywhere new. Each pair is packed into one int (the set as a bitset, the
  state's number above it; equal states share one numbered copy): no tuple per entry, and
  a state built again by another path is not stored again.
- A completed *read-only* op (the model says it never changes the state wherever it is
  valid: a read, a cas whose compare failed) that is valid now may always be linearized at
  once: moving it to the front of any linearization of the rest keeps everything valid. So
  it is the only move tried from that configuration, and if it fails the configuration
  fails (a memo hit on it counts as a failure: a memoised configuration with more ops
  linearized is never an ancestor on the current path, so it was fully explored). A write of
  the current value is *not* read-only: elsewhere in the order it has an effect.
- Model transitions are cached per op as state number -> next state number while the
  states stay few (a register's values): a dict lookup instead of a call into the model.
- Open-ended (``info``) ops have no return entry. The search succeeds as soon as no return
  entry is left in the list, i.e. every completed op is linearized: an ``info`` op is never
  forced to take effect, which is exactly "at any later time, or never". An ``info`` op
  whose step would not change the state is never tried (taking effect or not is the same),
  and one whose effect nothing observed (the model says which: a register's write of a value
  no read returned and no cas compared) is left out before the search: otherwise k such ops
  are 2**k subsets to try at every dead end (a crash leaves dozens). A part with open ops
  left is first searched with its completed ops alone: if they are linearizable, the part is,
  with no open op taking effect; only if not does the full search run (which otherwise tries
  open ops first, as they come in the list, and meets "none of them" last).
- P-compositionality: the model may split the history into parts. Parts are searched
  interleaved in slices (round-robin), smallest first, so that one hard part cannot starve
  an easy failing one; the check stops at the first part that fails. This is Porcupine's
  "parallel, cancel at the first Illegal", made deterministic in one thread.
- Budgets: wall time over all parts, and an estimate of the memo's bytes over all parts.
  When memory runs out the part with the largest memo is abandoned as ``unknown`` (its memo
  freed) and the others go on; when time runs out every unfinished part is ``unknown``.
  Never a silent pass, never an out-of-memory crash.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from checkers.linearizable.history import LinHistory, Operation, from_ops
from checkers.linearizable.models import Model, get_model
from checkers.result import Validity

#: search steps per slice before the driver looks at budgets and switches parts
SLICE = 4000
#: cached model transitions per part (each ~100 bytes); beyond this the model is asked
TRANS_MAX = 200_000
#: the cache pays only when states recur (a register's few values); with more distinct
#: states than this (e.g. strings grown by appends) new transitions are not cached
TRANS_STATES = 2048
#: parts with more ops compute their one-bit ints on the fly (the table is n*n/16 bytes)
BITS_TABLE_MAX = 16384


class _Bits:
    """``bits[i] == 1 << i`` without a table."""

    def __getitem__(self, i: int) -> int:
        return 1 << i


@dataclass(frozen=True)
class Budget:
    """What one check may spend. ``None`` means unbounded."""

    time_s: float | None = 60.0
    memory_mb: float | None = 1024.0


@dataclass
class PartResult:
    """The verdict for one independent part (one key, or the whole history)."""

    key: Hashable
    valid: Validity
    ops: int
    explored: int = 0
    memo: int = 0
    elapsed_s: float = 0.0
    note: str = ""
    #: on False: the witness (see checkers.linearizable.witness)
    witness: dict[str, Any] | None = None
    #: the deepest partial linearization found: [(op, state after)], for drawing
    best: list[tuple[Operation, Any]] = field(default_factory=list)
    part_ops: list[Operation] = field(default_factory=list)
    #: open-ended ops left out of the search: nothing observed their effect
    unobserved: int = 0
    #: decided by the completed ops alone: no open-ended op needed to take effect
    open_never: bool = False


@dataclass
class LinResult:
    """A check's outcome: worst-wins over the parts, the first failing part's witness."""

    valid: Validity
    ops: int
    elapsed_s: float
    model: str
    parts: list[PartResult]
    timed: bool = False
    note: str = ""

    @property
    def failed(self) -> PartResult | None:
        return next((p for p in self.parts if p.valid is False), None)

    @property
    def witness(self) -> dict[str, Any] | None:
        p = self.failed
        return p.witness if p else None

    @property
    def explored(self) -> int:
        return sum(p.explored for p in self.parts)

    def stats(self) -> dict[str, Any]:
        return {
            "ops": self.ops, "elapsed_s": round(self.elapsed_s, 4), "explored": self.explored,
            "memo": sum(p.memo for p in self.parts), "parts": len(self.parts),
            "parts_checked": sum(1 for p in self.parts if p.valid is not None),
            "parts_unknown": sum(1 for p in self.parts if p.valid == "unknown"),
            "open_unobserved": sum(p.unobserved for p in self.parts),
            "parts_open_never": sum(1 for p in self.parts if p.open_never),
        }


class Search:
    """One part's WGL search, resumable: ``run(steps)`` returns a verdict or None (not yet)."""

    def __init__(self, ops: list[Operation], model: Model, key: Hashable = None,
                 timed: bool = False) -> None:
        norm = [model.normalize(op) for op in ops]
        gone = model.unobserved(norm, [op.ret is None for op in ops])
        if gone:  # open-ended ops no linearization needs: never searched
            ops = [op for i, op in enumerate(ops) if i not in gone]
            norm = [x for i, x in enumerate(norm) if i not in gone]
        #: open-ended ops left out because nothing observed their effect
        self.unobserved = len(gone)
        self.key, self.model, self.ops, self.timed = key, model, ops, timed
        n = len(ops)
        self.inp = [x[0] for x in norm]
        self.out = [x[1] for x in norm]
        self.info = [op.ret is None for op in ops]
        # one-bit ints per op, precomputed (faster) unless the table itself would be big
        self.bits: Any = [1 << i for i in range(n)] if n <= BITS_TABLE_MAX else _Bits()
        self.read_only = [op.ret is not None and model.read_only(i, o)
                          for op, (i, o) in zip(ops, norm, strict=True)]
        # entries: 0 is the head; call of op i is entry i+1; return of op i is entry n+1+i
        events: list[tuple[float, int, int]] = []
        for i, op in enumerate(ops):
            events.append((op.call, 0, i))
            if op.ret is not None:
                if op.ret < op.call:
                    raise ValueError(f"op {op.id} returns ({op.ret}) before its call ({op.call})")
                events.append((op.ret, 1, i))
        events.sort()  # on equal positions calls come first: ties count as concurrent
        size = 2 * n + 1
        self.nxt = [-1] * size
        self.prv = [-1] * size
        self.match = [-1] * size
        self.opof = [-1] * size
        self.is_call = [False] * size
        prev = 0
        for _, kind, i in events:
            e = i + 1 if kind == 0 else n + 1 + i
            self.opof[e] = i
            self.is_call[e] = kind == 0
            self.prv[e], self.nxt[prev] = prev, e
            prev = e
        for i, op in enumerate(ops):
            if op.ret is not None:
                self.match[i + 1] = n + 1 + i
        self.state: Any = model.init()
        self.lin = 0
        self.stack: list[tuple[int, Any, int, bool]] = []
        #: Lowe's memo, one int per (linearized set, state): the bitset | (state number << n)
        self.memo: set[int] = set()
        #: state -> its number, and the canonical copy of each state (equal states shared)
        self.sid_of: dict[Any, int] = {self.state: 0}
        self.states: list[Any] = [self.state]
        self.state_bytes = _state_bytes(self.state)
        #: per op, state number -> next state number (-1: not allowed): a dict lookup is
        #: cheaper than a call into the model; bounded by TRANS_MAX entries per part
        self.trans: list[dict[int, int]] = [{} for _ in range(n)]
        self.n_trans = 0
        self.entry = self.nxt[0]
        self.steps = 0
        self.best: list[tuple[int, Any, int, bool]] = []
        self.best_state: Any = self.state
        self.verdict: Validity | None = None
        self.elapsed = 0.0
        #: the completed ops alone, searched first when open ones remain: if they are
        #: linearizable, so is the part with no open op taking effect ("never" is allowed);
        #: otherwise the full search runs. Without it the full search tries open ops as
        #: they come in the list, and a crash's dozens of open writes of a few reused values
        #: are 2**k subsets before "none of them" (a real run: 200M steps, no verdict in 60 s)
        self.first: Search | None = None
        #: the part was decided by ``first``: no open op needed to take effect
        self.open_never = False
        if any(self.info) and not all(self.info):
            self.first = Search([op for op in ops if op.ret is not None], model, key, timed)

    def run(self, max_steps: int) -> Validity | None:
        """Search for up to ``max_steps`` steps; True/False when decided, else None."""
        if self.verdict is not None:
            return self.verdict
        if self.first is not None:
            first = self.first
            before, spent = first.steps, first.elapsed
            v = first.run(max_steps)
            self.steps += first.steps - before
            self.elapsed += first.elapsed - spent
            if v is None:
                return None
            if v is True:
                self.verdict, self.open_never = True, True
                return True
            max_steps = max(1, max_steps - (first.steps - before))
            first.release()
            self.first = None  # the completed ops alone fail: open ones must take effect
        t0 = time.perf_counter()
        nxt, prv, match, opof, is_call = self.nxt, self.prv, self.match, self.opof, self.is_call
        inp, out, info, ro = self.inp, self.out, self.info, self.read_only
        bits = self.bits
        step = self.model.step
        memo, stack = self.memo, self.stack
        sid_of, states, n = self.sid_of, self.states, len(self.ops)
        trans, n_trans = self.trans, self.n_trans
        state, lin, e = self.state, self.lin, self.entry
        cur = sid_of[state]
        best_len = len(self.best)
        peak = False
        steps = 0
        verdict: Validity | None = None
        while steps < max_steps:
            steps += 1
            if e == -1:  # no return entry left: every completed op is linearized
                verdict = True
                break
            if is_call[e]:
                o = opof[e]
                tr = trans[o]
                sid = tr.get(cur)
                if sid is None:  # not cached: ask the model
                    ok, ns = step(state, inp[o], out[o])
                    if ok:
                        sid = sid_of.get(ns)
                        if sid is None:  # a state never seen: number it
                            sid = sid_of[ns] = len(states)
                            states.append(ns)
                            self.state_bytes += _state_bytes(ns)
                    else:
                        sid = -1
                    if n_trans < TRANS_MAX and len(states) <= TRANS_STATES:
                        tr[cur] = sid
                        n_trans += 1
                if sid < 0:
                    e = nxt[e]
                    continue
                same = sid == cur  # equal states share one number
                if same and info[o]:  # an info op that changes nothing is never needed
                    e = nxt[e]
                    continue
                nl = lin | bits[o]
                key = nl | (sid << n)
                forced = same and ro[o]
                if key not in memo:
                    memo.add(key)
                    # ``forced``: a read-only op can always go first; if that fails, so does
                    # every other choice here (see module doc)
                    stack.append((e, state, cur, forced))
                    state, cur, lin = states[sid], sid, nl
                    # lift the call and its return out of the list
                    p, q = prv[e], nxt[e]
                    nxt[p] = q
                    if q != -1:
                        prv[q] = p
                    m = match[e]
                    if m != -1:
                        p, q = prv[m], nxt[m]
                        nxt[p] = q
                        if q != -1:
                            prv[q] = p
                    if len(stack) > best_len:  # a new deepest prefix: copied on backtrack
                        best_len = len(stack)
                        peak = True
                    e = nxt[0]
                    continue
                if not forced:
                    e = nxt[e]
                    continue
                # the forced successor was already explored and failed: so does this config
            # backtrack: a return entry whose op is not linearized yet, or a failed forced move
            if peak:
                self.best, self.best_state, peak = stack[:], state, False
            while True:
                if not stack:
                    verdict = False
                    break
                e, state, cur, forced = stack.pop()
                lin ^= bits[opof[e]]
                m = match[e]
                if m != -1:
                    nxt[prv[m]] = m
                    if nxt[m] != -1:
                        prv[nxt[m]] = m
                nxt[prv[e]] = e
                if nxt[e] != -1:
                    prv[nxt[e]] = e
                if not forced:
                    break
            if verdict is False:
                break
            e = nxt[e]
        if peak:
            self.best, self.best_state = stack[:], state
        self.state, self.lin, self.entry, self.n_trans = state, lin, e, n_trans
        self.steps += steps
        self.elapsed += time.perf_counter() - t0
        self.verdict = verdict
        return verdict

    def memory_bytes(self) -> int:
        """An estimate of the search's bytes, erring high (the safe side for a budget).

        The memo's table as allocated, counted twice (a resize holds old and new table at
        once); each entry as the largest possible key int (every op linearized, the newest
        state number); the distinct states and their index; the stack.
        """
        if self.first is not None:
            return self.first.memory_bytes()
        if not self.memo:
            return 0
        biggest = ((1 << len(self.ops)) - 1) | (len(self.states) << len(self.ops))
        return (2 * sys.getsizeof(self.memo) + len(self.memo) * sys.getsizeof(biggest)
                + self.state_bytes + len(self.states) * 120 + len(self.stack) * 80
                + self.n_trans * 100)

    def memo_entries(self) -> int:
        return len(self.first.memo) if self.first is not None else len(self.memo)

    def release(self) -> None:
        """Drop the memo and stack (the part was abandoned)."""
        if self.first is not None:
            self.first.release()
        self.memo = set()
        self.stack = []
        self.sid_of = {}
        self.states = []
        self.trans = []

    def best_linearization(self) -> list[tuple[Operation, Any]]:
        """The deepest partial linearization: [(op, state after it)]."""
        if self.first is not None:
            return self.first.best_linearization()
        seq = self.best
        out = []
        for k, (e, _, _, _) in enumerate(seq):
            after = seq[k + 1][1] if k + 1 < len(seq) else self.best_state
            out.append((self.ops[self.opof[e]], after))
        return out


def _state_bytes(state: Any) -> int:
    if state is None or isinstance(state, bool | int):
        return 0  # small ints, None and bools are shared
    size = sys.getsizeof(state)
    if isinstance(state, tuple | frozenset):
        size += sum(sys.getsizeof(x) for x in state)
    return size


def check(history: LinHistory | list[Operation] | list[dict[str, Any]], model: Model | str,
          budget: Budget | None = None) -> LinResult:
    """Is the history linearizable with respect to the model?

    ``history`` is a parsed :class:`LinHistory`, a list of :class:`Operation`, or a harness
    history (list of op dicts, paired here). Returns ``valid`` True, False (with a witness
    on the failing part) or "unknown" (a budget ran out before a verdict; the parts
    explored are reported).
    """
    from checkers.linearizable.witness import build_witness

    budget = budget or Budget()
    model = get_model(model)
    t0 = time.perf_counter()
    if isinstance(history, list) and history and isinstance(history[0], dict):
        history = from_ops(history)  # type: ignore[arg-type]
    ops = history.ops if isinstance(history, LinHistory) else list(history)  # type: ignore[arg-type]
    timed = history.timed if isinstance(history, LinHistory) else False
    parts_map = model.partition(ops)
    if parts_map is None:
        parts_map = {None: ops}
    searches = sorted((Search(list(p), model, k, timed) for k, p in parts_map.items()),
                      key=lambda s: len(s.ops))
    results: dict[int, PartResult] = {}
    active = list(searches)
    deadline = None if budget.time_s is None else t0 + budget.time_s
    limit = None if budget.memory_mb is None else budget.memory_mb * 1024 * 1024
    failed = False
    note = ""
    while active and not failed:
        for s in list(active):
            v = s.run(SLICE)
            if v is not None:
                active.remove(s)
                results[id(s)] = _part(s, v)
                if v is False:
                    results[id(s)].witness = build_witness(s, model)
                s.release()  # a decided part's memo is of no further use
                if v is False:
                    failed = True
                    break
            if deadline is not None and time.perf_counter() > deadline:
                break
        if failed:
            break
        if deadline is not None and time.perf_counter() > deadline:
            note = f"time budget of {budget.time_s} s ran out"
            for s in active:
                results[id(s)] = _part(s, "unknown", note)
            active = []
            break
        if limit is not None and active:
            while active and sum(s.memory_bytes() for s in active) > limit:
                worst = max(active, key=lambda s: s.memo_entries())
                active.remove(worst)
                msg = (f"memory budget of {budget.memory_mb} MiB ran out "
                       f"({worst.memo_entries()} memo entries)")
                results[id(worst)] = _part(worst, "unknown", msg)
                worst.release()
                note = note or msg
    parts: list[PartResult] = []
    for s in searches:
        r = results.get(id(s))
        if r is None:  # not finished because another part failed first
            r = _part(s, None, "not decided: stopped at the first failing part")
        parts.append(r)
    valid: Validity = True
    if any(p.valid is False for p in parts):
        valid = False
    elif any(p.valid == "unknown" for p in parts):
        valid = "unknown"
    return LinResult(valid=valid, ops=len(ops), elapsed_s=time.perf_counter() - t0,
                     model=model.name, parts=parts, timed=timed, note=note)


def _part(s: Search, valid: Validity | None, note: str = "") -> PartResult:
    return PartResult(key=s.key, valid=valid, ops=len(s.ops), explored=s.steps,  # type: ignore[arg-type]
                      memo=s.memo_entries(), elapsed_s=s.elapsed, note=note,
                      best=s.best_linearization(), part_ops=s.ops, unobserved=s.unobserved,
                      open_never=s.open_never)
