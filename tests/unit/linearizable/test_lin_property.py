"""Property tests: histories produced by a real sequential object (a cas register, a FIFO
queue) with random, real-time consistent overlap are linearizable; corrupting one read (or
dequeue) is caught.

How "detectable" is decided: a read corrupted to a value no operation ever wrote (or
enqueued) can never be explained, so the engine must say False. A read corrupted to another
value that *was* written may still be explainable by a different order (or may not, e.g. a
value already overwritten); there the verdict is compared with a
brute-force oracle that tries every real-time-consistent order (info ops optional), written
independently of the engine from the definition of linearizability.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkers.linearizable import check, from_ops

VALUES = st.integers(0, 2)


@dataclass
class Gen:
    process: int
    f: str
    value: Any
    call: int
    ret: int | None  # None: info (the client gave up at ``gave_up``)
    gave_up: int | None
    lp: float | None  # when it took effect (None: never)
    output: Any = None
    ok: bool = True  # False: a cas whose compare failed -> "fail" in the history


class RegisterSpec:
    """The sequential cas register the histories are produced by (independent of models.py)."""

    model = "cas-register"
    fresh = 1000  # a value no op ever writes

    def draw_op(self, draw: st.DrawFn, uid: int) -> tuple[str, Any]:
        f = draw(st.sampled_from(["read", "write", "cas"]))
        return f, {"read": None, "write": draw(VALUES), "cas": [draw(VALUES), draw(VALUES)]}[f]

    def init(self) -> Any:
        return None

    def apply(self, state: Any, op: Gen) -> Any:
        """Run ``op`` for real: set its output / ok, return the new state."""
        if op.f == "read":
            op.output = state
        elif op.f == "write":
            state = op.value
        elif state == op.value[0]:
            state = op.value[1]
        else:
            op.ok = False
        return state

    def valid(self, state: Any, op: Gen) -> tuple[bool, Any]:
        """Could ``op`` (with its recorded output) happen in ``state``; the state after."""
        if op.f == "read":
            return op.ret is None or op.output == state, state
        if op.f == "write":
            return True, op.value
        return state == op.value[0], op.value[1]

    def observers(self) -> tuple[str, ...]:
        return ("read",)

    def others(self, op: Gen) -> list[Any]:
        return [v for v in (None, 0, 1, 2) if v != op.output]


class QueueSpec(RegisterSpec):
    """A FIFO queue with unique enqueued values; a dequeue on empty returns None."""

    model = "queue"

    def draw_op(self, draw: st.DrawFn, uid: int) -> tuple[str, Any]:
        f = draw(st.sampled_from(["enqueue", "dequeue"]))
        return f, (uid if f == "enqueue" else None)

    def init(self) -> Any:
        return ()

    def apply(self, state: Any, op: Gen) -> Any:
        if op.f == "enqueue":
            return state + (op.value,)
        op.output = state[0] if state else None
        return state[1:]

    def valid(self, state: Any, op: Gen) -> tuple[bool, Any]:
        if op.f == "enqueue":
            return True, state + (op.value,)
        head = state[0] if state else None
        return op.ret is None or op.output == head, state[1:]

    def observers(self) -> tuple[str, ...]:
        return ("dequeue",)

    def others(self, op: Gen) -> list[Any]:
        return [v for v in (None, 0, 1, 2, 3) if v != op.output]


SPECS = [RegisterSpec(), QueueSpec()]


@st.composite
def histories(draw: st.DrawFn, spec: RegisterSpec) -> list[Gen]:
    n_procs = draw(st.integers(1, 4))
    n_ops = draw(st.integers(1, 9))
    free = [0] * n_procs  # when each worker may invoke next
    pid = list(range(n_procs))  # its current process id (fresh after an info)
    ops: list[Gen] = []
    for uid in range(n_ops):
        w = draw(st.integers(0, n_procs - 1))
        f, value = spec.draw_op(draw, uid)
        call = free[w] + draw(st.integers(0, 6))
        dur = draw(st.integers(0, 12))
        crashed = draw(st.integers(0, 5)) == 0
        frac = draw(st.floats(0.01, 0.99))
        if crashed:
            took = draw(st.booleans())
            late = draw(st.integers(0, 40))  # an info op may take effect long after giving up
            lp = call + frac * (dur + late) if took else None
            ops.append(Gen(pid[w], f, value, call, None, call + dur, lp))
            pid[w] += n_procs
        else:
            ops.append(Gen(pid[w], f, value, call, call + dur, None, call + frac * dur))
        free[w] = call + dur + 1
    state = spec.init()
    for op in sorted((o for o in ops if o.lp is not None), key=lambda o: o.lp):
        state = spec.apply(state, op)
    return ops


def to_history(ops: list[Gen]) -> list[dict[str, Any]]:
    ev = []
    for op in ops:
        ev.append((op.call, 0, {"process": op.process, "type": "invoke", "f": op.f,
                                "value": op.value}))
        if op.ret is None:
            ev.append((op.gave_up, 1, {"process": op.process, "type": "info", "f": op.f,
                                       "value": op.value}))
        else:
            out = op.output if op.f in ("read", "dequeue") else op.value
            ev.append((op.ret, 1, {"process": op.process, "type": "ok" if op.ok else "fail",
                                   "f": op.f, "value": out}))
    ev.sort(key=lambda e: (e[0], e[1]))
    return [{**d, "index": i, "time": t} for i, (t, _, d) in enumerate(ev)]


def oracle(ops: list[Gen], spec: RegisterSpec) -> bool:
    """Brute force: some order respecting real time (a before b iff a.ret < b.call) in which
    every completed op takes effect, with each info op taking effect somewhere or never."""
    live = [o for o in ops if o.ok or o.ret is None]  # fail ops certainly did not happen

    def go(rest: list[Gen], state: Any) -> bool:
        done = [o for o in rest if o.ret is not None]
        if not done:
            return True
        horizon = min(o.ret for o in done)
        for o in rest:
            if o.call > horizon:  # some completed op must come first
                continue
            ok, ns = spec.valid(state, o)
            if ok and go([x for x in rest if x is not o], ns):
                return True
        return False

    return go(live, spec.init())


FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


SPEC = st.sampled_from(SPECS)


@FAST
@given(SPEC.flatmap(lambda spec: st.tuples(st.just(spec), histories(spec))))
def test_histories_from_a_real_sequential_object_are_linearizable(case):
    spec, ops = case
    r = check(from_ops(to_history(ops)), spec.model)
    assert r.valid is True, r.witness and r.witness["text"]


def _observers(ops, spec):
    return [i for i, o in enumerate(ops) if o.f in spec.observers() and o.ret is not None]


@FAST
@given(SPEC.flatmap(lambda spec: st.tuples(st.just(spec), histories(spec))), st.data())
def test_an_observation_of_a_value_never_written_is_caught(case, data):
    spec, ops = case
    seen = _observers(ops, spec)
    if not seen:
        return
    ops[data.draw(st.sampled_from(seen))].output = spec.fresh  # no op ever writes it
    r = check(from_ops(to_history(ops)), spec.model)
    assert r.valid is False
    # the witness names a completed op that is impossible from the deepest state reached
    failed = r.witness["failed_op"]
    assert failed["status"] == "ok" and failed["from_state"]["ok"] is False


@FAST
@given(SPEC.flatmap(lambda spec: st.tuples(st.just(spec), histories(spec))), st.data())
def test_an_observation_corrupted_to_another_value_agrees_with_brute_force(case, data):
    spec, ops = case
    seen = _observers(ops, spec)
    if not seen:
        return
    op = ops[data.draw(st.sampled_from(seen))]
    op.output = data.draw(st.sampled_from(spec.others(op)))
    assert check(from_ops(to_history(ops)), spec.model).valid is oracle(ops, spec)


@FAST
@given(SPEC.flatmap(lambda spec: st.tuples(st.just(spec), histories(spec))))
def test_oracle_agrees_on_uncorrupted_histories(case):
    spec, ops = case
    assert oracle(ops, spec) is True
