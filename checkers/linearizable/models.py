"""Sequential specifications the engine checks histories against.

A model is the Porcupine-sized interface: ``init``, ``step(state, input, output) ->
(ok, new_state)``, an optional ``partition`` into independent parts, and ``describe_*`` for
people. ``normalize`` turns an operation's raw values into the compact, hashable
``(input, output)`` the hot loop uses, once per operation. States must be hashable: the
engine memoises (linearized-set, state) pairs.

Output ``UNKNOWN`` means the op is open-ended (``info``): ``step`` answers "could it take
effect here, and what would the state be". The engine itself handles "it never took
effect", so a model never has to.

Adding a model: subclass :class:`Model`, implement ``normalize`` and ``step``, and (for
the command line) register it in :data:`MODELS`. The engine is not touched.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from checkers.linearizable.history import UNKNOWN, Operation

State = Hashable


class ModelError(ValueError):
    """An operation the model does not understand (wrong ``f`` or value shape)."""


def freeze(v: Any) -> Hashable:
    """A hashable copy of a JSON value (lists -> tuples, dicts -> sorted item tuples)."""
    if isinstance(v, list | tuple):
        return tuple(freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    if isinstance(v, set | frozenset):
        return frozenset(freeze(x) for x in v)
    return v


class Model:
    """Base class: override ``normalize`` and ``step``; the rest has useful defaults."""

    name = "model"

    def init(self) -> State:
        return None

    def normalize(self, op: Operation) -> tuple[Any, Any]:
        return (op.f, freeze(op.value)), (UNKNOWN if op.output is UNKNOWN else freeze(op.output))

    def step(self, state: State, input: Any, output: Any) -> tuple[bool, State]:
        raise NotImplementedError

    def partition(self, ops: list[Operation]) -> dict[Hashable, list[Operation]] | None:
        """Independent parts (e.g. per key), or None when the history is one part."""
        return None

    def read_only(self, input: Any, output: Any) -> bool:
        """True if this completed op leaves *every* state it is valid in unchanged.

        Optional (default False); saying True lets the engine prune: such an op is
        linearized as soon as it can be, no other order is tried around it. A write is not
        read-only even when it writes the current value.
        """
        return False

    def unobserved(self, norm: list[tuple[Any, Any]], open_: list[bool]) -> set[int]:
        """Open-ended ops that no linearization needs: dropped before the search.

        ``norm`` holds each op's ``normalize``d (input, output), ``open_`` whether it is
        open-ended.

        Optional (default: none). Each such op must be one whose taking effect could never be
        what makes a history linearizable, so leaving it out changes no verdict; the search
        then never tries the 2**k subsets of k such ops taking effect or not.
        """
        return set()

    def describe_op(self, input: Any, output: Any) -> str:
        f, *args = input if isinstance(input, tuple) else (input,)
        arg = " ".join(repr(a) for a in args)
        return f"{f}({arg}) -> {output!r}"

    def describe_state(self, state: State) -> str:
        return repr(state)


def _unkey(value: Any) -> Any:
    """``[key, v]`` -> ``v``; anything else unchanged (registers accept both shapes)."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return value[1]
    return value


class CasRegister(Model):
    """One register: ``read`` -> value, ``write v``, ``cas [old, new]`` (ok only if it was old).

    Values may carry a key (``[k, v]``, ``[k, [old, new]]``): it is ignored, so this model is
    also the per-key model of :class:`KV`. A cas output is ``True`` (swapped), ``False``
    (compare failed: the value was not ``old``) or ``UNKNOWN``; any other ``ok`` output
    (e.g. the harness echoing the value) counts as ``True``.
    """

    name = "cas-register"
    allow_cas = True

    def __init__(self, initial: Any = None) -> None:
        self.initial = freeze(initial)

    def init(self) -> State:
        return self.initial

    def normalize(self, op: Operation) -> tuple[Any, Any]:
        f, out = op.f, op.output
        if f in ("read", "get"):
            return ("r",), (UNKNOWN if out is UNKNOWN else freeze(_unkey(out)))
        if f in ("write", "put"):
            return ("w", freeze(_unkey(op.value))), None
        if f == "append":
            return ("a", freeze(_unkey(op.value))), None
        if f == "cas" and self.allow_cas:
            v = op.value
            if isinstance(v, list | tuple) and len(v) == 2 and isinstance(v[1], list | tuple):
                v = v[1]
            if not (isinstance(v, list | tuple) and len(v) == 2):
                raise ModelError(f"cas value {op.value!r} is not [old, new] or [key, [old, new]]")
            res = out if out is UNKNOWN or isinstance(out, bool) else True
            return ("c", freeze(v[0]), freeze(v[1])), res
        hint = "" if self.allow_cas or f != "cas" else "; use the cas-register model for cas"
        raise ModelError(f"{self.name} model has no operation {f!r} (op {op.id}, process "
                         f"{op.process}); ops are read, write, append"
                         + (", cas" if self.allow_cas else "") + hint)

    def read_only(self, input: Any, output: Any) -> bool:
        k = input[0]
        return k == "r" or (k == "c" and (output is False or input[1] == input[2]))

    def unobserved(self, norm: list[tuple[Any, Any]], open_: list[bool]) -> set[int]:
        """Open-ended writes and cas ops whose new value nothing observes.

        Observed are the values completed reads returned and every cas's compare value. If a
        linearization has an open-ended op put such a value, the ops after it until the next
        state change observe nothing (a read would return the value, a cas would compare to
        it), and that change is a write (a cas would compare to it): without the op the same
        order is still valid. A completed cas that answered False observes "not this value",
        and an append builds on the value: with either in the part nothing is dropped.
        """
        seen: set[Any] = set()
        for (inp, out), is_open in zip(norm, open_, strict=True):
            k = inp[0]
            if k == "a" or (k == "c" and out is False):
                return set()
            if k == "r" and not is_open:
                seen.add(out)
            elif k == "c":
                seen.add(inp[1])
        return {i for i, ((inp, _), is_open) in enumerate(zip(norm, open_, strict=True))
                if is_open and inp[0] in ("w", "c") and inp[-1] not in seen}

    def step(self, state: State, input: Any, output: Any) -> tuple[bool, State]:
        k = input[0]
        if k == "r":
            return (output is UNKNOWN or output == state), state
        if k == "w":
            return True, input[1]
        if k == "c":
            if state == input[1]:
                return output is not False, input[2]
            return output is False, state
        # append (string/list registers, as in Porcupine's kv model)
        base = "" if state is None else state
        return True, base + input[1]

    def describe_op(self, input: Any, output: Any) -> str:
        k = input[0]
        out = "?" if output is UNKNOWN else repr(output)
        if k == "r":
            return f"read -> {out}"
        if k == "w":
            return f"write {input[1]!r}"
        if k == "a":
            return f"append {input[1]!r}"
        return f"cas {input[1]!r}->{input[2]!r} -> {out}"


class Register(CasRegister):
    """A read/write register (no cas)."""

    name = "register"
    allow_cas = False


class KV(CasRegister):
    """Many independent registers, one per key: P-compositional, each key checked alone.

    Values are ``[key, ...]`` (docs/contracts.md); each key is a :class:`CasRegister` starting
    at ``initial`` (``None``; Porcupine's kv data uses ``""``). ``append`` concatenates.
    """

    name = "kv"

    def partition(self, ops: list[Operation]) -> dict[Hashable, list[Operation]] | None:
        parts: dict[Hashable, list[Operation]] = {}
        for op in ops:
            if not (isinstance(op.value, list | tuple) and len(op.value) == 2):
                raise ModelError(f"kv op {op.id} value {op.value!r} is not [key, ...]")
            parts.setdefault(freeze(op.value[0]), []).append(op)
        return parts


class AppendList(Model):
    """An append-only list: ``append v`` adds at the end; ``read`` returns the whole list."""

    name = "append"

    def init(self) -> State:
        return ()

    def normalize(self, op: Operation) -> tuple[Any, Any]:
        if op.f == "append":
            v = op.value
            return ("a", freeze(v)), None
        if op.f == "read":
            return ("r",), (UNKNOWN if op.output is UNKNOWN else freeze(op.output or []))
        raise ModelError(f"append model has no operation {op.f!r}; ops are append, read")

    def read_only(self, input: Any, output: Any) -> bool:
        return input[0] == "r"

    def step(self, state: State, input: Any, output: Any) -> tuple[bool, State]:
        if input[0] == "a":
            return True, state + (input[1],)  # type: ignore[operator]
        return (output is UNKNOWN or output == state), state

    def describe_state(self, state: State) -> str:
        return f"[{len(state)} items" + (f", last {state[-1]!r}]" if state else "]")  # type: ignore[arg-type,index]


class SetModel(Model):
    """A grow-only set: ``add v``; ``read`` returns all elements (any order)."""

    name = "set"

    def init(self) -> State:
        return frozenset()

    def normalize(self, op: Operation) -> tuple[Any, Any]:
        if op.f == "add":
            return ("a", freeze(op.value)), None
        if op.f == "read":
            out = op.output
            return ("r",), (UNKNOWN if out is UNKNOWN else frozenset(freeze(x) for x in out or []))
        raise ModelError(f"set model has no operation {op.f!r}; ops are add, read")

    def read_only(self, input: Any, output: Any) -> bool:
        return input[0] == "r"

    def step(self, state: State, input: Any, output: Any) -> tuple[bool, State]:
        if input[0] == "a":
            return True, state | {input[1]}  # type: ignore[operator]
        return (output is UNKNOWN or output == state), state

    def describe_state(self, state: State) -> str:
        return "{" + ", ".join(sorted(map(repr, state))) + "}"  # type: ignore[call-overload]


class Queue(Model):
    """A FIFO queue: ``enqueue v``; ``dequeue`` returns the head, or ``None`` when empty."""

    name = "queue"

    def init(self) -> State:
        return ()

    def normalize(self, op: Operation) -> tuple[Any, Any]:
        if op.f in ("enqueue", "enq"):
            return ("e", freeze(op.value)), None
        if op.f in ("dequeue", "deq"):
            return ("d",), (UNKNOWN if op.output is UNKNOWN else freeze(op.output))
        raise ModelError(f"queue model has no operation {op.f!r}; ops are enqueue, dequeue")

    def read_only(self, input: Any, output: Any) -> bool:
        return input[0] == "d" and output is None  # a dequeue that found the queue empty

    def step(self, state: State, input: Any, output: Any) -> tuple[bool, State]:
        q: tuple = state  # type: ignore[assignment]
        if input[0] == "e":
            return True, q + (input[1],)
        if not q:
            return (output is UNKNOWN or output is None), q
        return (output is UNKNOWN or output == q[0]), q[1:]


class UniqueIds(Model):
    """A unique-id generator: every ``generate`` returns an id no other call returned.

    Partitioned by the returned id: only calls that returned the same id can conflict, so
    each part is tiny. Open-ended calls (no id seen) cannot violate anything and are dropped.
    """

    name = "unique-ids"

    def init(self) -> State:
        return False  # "this part's id has been handed out"

    def normalize(self, op: Operation) -> tuple[Any, Any]:
        return ("g",), (UNKNOWN if op.output is UNKNOWN else freeze(op.output))

    def step(self, state: State, input: Any, output: Any) -> tuple[bool, State]:
        if output is UNKNOWN:
            return True, state
        return (not state), True

    def partition(self, ops: list[Operation]) -> dict[Hashable, list[Operation]] | None:
        parts: dict[Hashable, list[Operation]] = {}
        for op in ops:
            if op.output is not UNKNOWN:
                parts.setdefault(freeze(op.output), []).append(op)
        return parts

    def describe_op(self, input: Any, output: Any) -> str:
        return f"generate -> {output!r}"


#: command-line names -> model factories (a factory takes keyword options, e.g. ``initial``)
MODELS: dict[str, Callable[..., Model]] = {
    "register": Register,
    "cas-register": CasRegister,
    "kv": KV,
    "append": AppendList,
    "set": SetModel,
    "queue": Queue,
    "unique-ids": UniqueIds,
}


def get_model(name_or_model: str | Model, **options: Any) -> Model:
    """A model by its command-line name (see :data:`MODELS`), or the model itself."""
    if isinstance(name_or_model, Model):
        return name_or_model
    try:
        factory = MODELS[name_or_model]
    except KeyError:
        raise ModelError(f"unknown model {name_or_model!r}; use one of {', '.join(MODELS)}") from None
    return factory(**options)
