"""A set of integers kept as sorted maximal runs, with each run's JSON text ready: the
counters a node lists for one initiator beyond its run (`nodes/drip/seen.Window.recent`).

Why not a plain set (as before session 44): the window is saved with every message taken from
its initiator, and saving it sorted the whole set and built the runs again each time, so a
message cost time in proportion to the counters listed. A flood of far-ahead counters in a
compromised member's name lists up to 8,192 of them, and every later real message of that
initiator then cost ~1-6 ms at every node: the CPU per hostile request doubled over a long
attack (issue 26). Here an add or a removal is a binary search plus one list insert or delete
(a memmove), and the saved text is one ``str.join`` of the ready pieces, so a message costs
about the same however many counters are listed. Membership is a binary search.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field


def _piece(a: int, b: int) -> str:
    return f"[{a},{b}]"


@dataclass(eq=False)
class Runs:
    """Sorted, disjoint, non-adjacent runs ``lo[i]..hi[i]``; ``count`` integers in all."""

    lo: list[int] = field(default_factory=list)
    hi: list[int] = field(default_factory=list)
    txt: list[str] = field(default_factory=list)
    count: int = 0
    #: `text` as last built, until the next change (a real message that extends the run below
    #: changes nothing here, so saving it joins nothing)
    _text: str | None = field(default=None, repr=False)

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, int] | list[int]]) -> Runs:
        """From ``[first, last]`` pairs in any order, overlapping or adjacent ones merged.
        Raises TypeError/ValueError for anything but pairs of integers with first <= last."""
        out = cls()
        checked = []
        for a, b in pairs:
            if type(a) is not int or type(b) is not int or a > b:
                raise ValueError(f"not a run of integers: [{a!r}, {b!r}]")
            checked.append((a, b))
        for a, b in sorted(checked):
            if out.hi and a <= out.hi[-1] + 1:
                if b > out.hi[-1]:
                    out.count += b - out.hi[-1]
                    out.hi[-1] = b
                    out.txt[-1] = _piece(out.lo[-1], b)
                continue
            out.lo.append(a)
            out.hi.append(b)
            out.txt.append(_piece(a, b))
            out.count += b - a + 1
        return out

    def _at(self, c: int) -> int:
        """Index of the run holding ``c``, or -1."""
        i = bisect_right(self.lo, c) - 1
        return i if i >= 0 and c <= self.hi[i] else -1

    def __contains__(self, c: object) -> bool:
        return isinstance(c, int) and self._at(c) >= 0

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[int]:
        for a, b in zip(self.lo, self.hi, strict=True):
            yield from range(a, b + 1)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Runs):
            return self.lo == other.lo and self.hi == other.hi
        if isinstance(other, set | frozenset):
            return len(other) == self.count and all(c in self for c in other)
        return NotImplemented

    def _set(self, i: int, a: int, b: int) -> None:
        self._text = None
        self.lo[i], self.hi[i], self.txt[i] = a, b, _piece(a, b)

    def _insert(self, i: int, a: int, b: int) -> None:
        self._text = None
        self.lo.insert(i, a)
        self.hi.insert(i, b)
        self.txt.insert(i, _piece(a, b))

    def _delete(self, i: int) -> None:
        self._text = None
        del self.lo[i], self.hi[i], self.txt[i]

    def _drop_first(self, k: int) -> None:
        """Forget the lowest ``k`` runs whole."""
        if k:
            self.count -= sum(self.hi[j] - self.lo[j] + 1 for j in range(k))
            del self.lo[:k], self.hi[:k], self.txt[:k]
            self._text = None

    def add(self, c: int) -> None:
        """Add ``c`` (a no-op if held), joining the runs either side of it."""
        i = bisect_right(self.lo, c)
        if i > 0 and c <= self.hi[i - 1]:
            return
        left = i > 0 and self.hi[i - 1] == c - 1
        right = i < len(self.lo) and self.lo[i] == c + 1
        if left and right:
            self._set(i - 1, self.lo[i - 1], self.hi[i])
            self._delete(i)
        elif left:
            self._set(i - 1, self.lo[i - 1], c)
        elif right:
            self._set(i, c, self.hi[i])
        else:
            self._insert(i, c, c)
        self.count += 1

    def take_up(self, c: int) -> int | None:
        """Remove ``c`` and every held integer after it in its run; the run's last (None if
        ``c`` is not held). For a run extended from below: ``floor + 1`` joins it whole."""
        i = self._at(c)
        if i < 0:
            return None
        a, b = self.lo[i], self.hi[i]
        self.count -= b - c + 1
        if a == c:
            self._delete(i)
        else:
            self._set(i, a, c - 1)
        return b

    def take_down(self, c: int) -> int | None:
        """Remove ``c`` and every held integer before it in its run; the run's first."""
        i = self._at(c)
        if i < 0:
            return None
        a, b = self.lo[i], self.hi[i]
        self.count -= c - a + 1
        if b == c:
            self._delete(i)
        else:
            self._set(i, c + 1, b)
        return a

    def keep_top(self, n: int) -> int | None:
        """Forget all but the highest ``n`` integers; the highest forgotten (None: none)."""
        drop = self.count - n
        if drop <= 0:
            return None
        k = 0
        while drop > 0:
            size = self.hi[k] - self.lo[k] + 1
            if size > drop:
                break
            drop -= size
            k += 1
        top = self.hi[k - 1] if k else None
        self._drop_first(k)
        if drop > 0:
            a = self.lo[0]
            top = a + drop - 1
            self._set(0, a + drop, self.hi[0])
            self.count -= drop
        return top

    def drop_upto(self, c: int) -> None:
        """Forget every held integer ``<= c``."""
        self._drop_first(bisect_right(self.hi, c))  # the runs that end at or below c
        if self.lo and self.lo[0] <= c:
            self.count -= c - self.lo[0] + 1
            self._set(0, c + 1, self.hi[0])

    def text(self) -> str:
        """The runs as JSON, ``[[first,last],...]`` (what ``json.dumps`` of the pairs gives)."""
        if self._text is None:
            self._text = "[" + ",".join(self.txt) + "]"
        return self._text
