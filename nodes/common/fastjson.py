"""Compact JSON to bytes and back on a node's hot path: orjson's speed with the standard
library's acceptance.

Why: encoding and decoding request bodies and journal lines was a tenth of a DRiP node's CPU
per update (docs/drip.md, session 44); orjson does both several times faster. Its accepted
input and its output are not quite the standard library's, so the differences are closed
here, once, instead of at each call site:

- integers beyond 64 bits: orjson reads them as floats (silently inexact) and cannot write
  them, so a body with a run of 19 or more digits is read by ``json``, and a value orjson
  cannot write is written by ``json``;
- input orjson refuses (a byte order mark, lone surrogates, deep nesting, ``NaN``) goes to
  ``json``, so what is accepted, and the error raised otherwise, is the standard library's;
- except non-finite numbers (``NaN``, ``Infinity``, ``1e400``): they are not JSON (RFC 8259),
  orjson would write them as ``null`` (a value that changes on its way), so `loads` refuses
  them as malformed (``ValueError``) in both paths, and a node takes no value from outside
  but through it.

`canonical` is the form digests hash (``nodes.drip.codec``, ``nodes.drip.auth``): sorted keys,
compact, UTF-8, orjson's bytes, which are ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)``'s for every value but floats with an exponent (``1e16`` against
``1e+16``) and what orjson cannot write (then it is ``json``'s). Both ends of a digest run
this function on the same decoded value, so it only needs to be deterministic; being
``json``'s bytes almost everywhere keeps digests of older nodes matching.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import orjson

#: every ASCII digit to "0", every other byte to "x": a literal that may not fit in 64 bits
#: (orjson would read it as a float) is then a run of 19 "0"s, found by a substring search;
#: a regex (``\d{19}``) took 70 us on an 8 KB batch body, ten times orjson's parse of it
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x78 for b in range(256))
_LONG_RUN = b"0" * 19
_OPTS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no non-finite numbers)")


def _finite(text: str) -> float:
    f = float(text)
    if not math.isfinite(f):
        raise ValueError(f"number {text[:40]} is out of range for a double")
    return f


def loads(raw: bytes) -> Any:
    """Parse ``raw``; raises ``ValueError`` (``json.JSONDecodeError`` or a hook's),
    ``UnicodeDecodeError`` or ``RecursionError`` as ``json.loads`` would."""
    if _LONG_RUN not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # let json decide, with its own error
    return json.loads(raw, parse_constant=_constant, parse_float=_finite)


def canonical(value: Any) -> bytes:
    """Sorted-key compact UTF-8 JSON of a decoded value, for hashing: deterministic per value
    (orjson's, else ``json``'s for an integer beyond 64 bits, a non-string key or nesting past
    orjson's 255 levels). ``json.dumps`` took 3.2 us for a /voting's digest view, orjson 0.2."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return json.dumps(value, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8", "surrogatepass")


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> bytes:
    """Compact JSON (UTF-8, no spaces). Dataclasses and datetimes go to ``default`` as with
    ``json.dumps``; what orjson cannot write (an integer beyond 64 bits, a key that is not a
    string) is written by ``json``. A non-finite float would be written as ``null``: none
    reaches here from outside, since `loads` refuses them (a guard walking every value cost
    14x orjson's encoding of a batch body)."""
    try:
        return orjson.dumps(value, default=default, option=_OPTS)
    except TypeError:
        return json.dumps(value, separators=(",", ":"), default=default,
                          allow_nan=False).encode()
