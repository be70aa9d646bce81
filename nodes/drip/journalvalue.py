"""How a journal event carries a key's value: whole up to `JOURNAL_VALUE_BYTES` of JSON,
beyond that only its SHA-256 and size.

Why: a node journals every value it applies (``apply``, and ``vote-start`` at the
initiator), so a node that learned a store of large values by sync held it twice on disk,
once in the store and once in ``events.jsonl`` (10,000 x 1 MiB: 10 GB more per joiner). The
checkers only need to tell values apart, which a digest does. The digest is over the value's
canonical JSON (`value_json`); ``checkers/twopc.py`` computes the same to compare a client's
value with a digest. Reserved ``drip:`` keys (membership) are always whole: the checker reads
their members.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: a value whose canonical JSON is longer than this is journaled as digest and size
JOURNAL_VALUE_BYTES = 4096
RESERVED_PREFIX = "drip:"


def value_json(value: Any) -> bytes:
    """The canonical JSON a digest is taken over (compact, keys sorted, UTF-8)."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False).encode()


def value_fields(key: str, value: Any, limit: int = JOURNAL_VALUE_BYTES) -> dict[str, Any]:
    """The event fields carrying ``value``: ``{"value": v}``, or ``{"value_sha256": hex,
    "value_bytes": n}`` when its canonical JSON is over ``limit`` bytes."""
    if key.startswith(RESERVED_PREFIX) or (isinstance(value, int | float | bool)
                                           or value is None):
        return {"value": value}
    raw = value_json(value)
    if len(raw) <= limit:
        return {"value": value}
    return {"value_sha256": hashlib.sha256(raw).hexdigest(), "value_bytes": len(raw)}
