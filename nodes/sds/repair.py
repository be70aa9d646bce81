"""SDS-R arithmetic: the hash, ``T_req``, ``T_resp`` and response groups (spec "SDS Repair").

The spec leaves ``hash`` open. We use what the most used implementation does: SHA-256 over the
UTF-8 concatenation of the arguments (no separator), read as the first 8 bytes big-endian,
an unsigned 64-bit integer. Times are milliseconds (a monotonic clock in the runtime).

``T_resp`` is computed as ``(distance * hash(message_id)) % T_max`` (``*`` and ``%`` bind
equally and left to right, as in the spec's C-like notation); the original sender has
``distance = 0`` and so answers first.
"""

from __future__ import annotations

import hashlib


def sds_hash(*parts: str) -> int:
    """SHA-256 of the concatenated UTF-8 parts, first 8 bytes big-endian, unsigned."""
    return int.from_bytes(hashlib.sha256("".join(parts).encode()).digest()[:8], "big")


def t_req(now_ms: int, participant_id: str, message_id: str, t_min_ms: int, t_max_ms: int) -> int:
    """When this participant asks for a repair of ``message_id`` (own id, not the sender's)."""
    span = max(1, t_max_ms - t_min_ms)
    return now_ms + sds_hash(participant_id, message_id) % span + t_min_ms


def t_resp(now_ms: int, participant_id: str, sender_id: str, message_id: str,
           t_max_ms: int) -> int:
    """When this participant rebroadcasts ``message_id`` if nobody else did first."""
    distance = sds_hash(participant_id) ^ sds_hash(sender_id)
    return now_ms + distance * sds_hash(message_id) % max(1, t_max_ms)


def num_response_groups(num_participants: int) -> int:
    """The spec's default: one group per 128 participants."""
    return num_participants // 128 + 1


def in_response_group(participant_id: str, sender_id: str, message_id: str, groups: int) -> bool:
    """Whether ``participant_id`` may answer a repair request for ``(sender_id, message_id)``."""
    return (sds_hash(participant_id, message_id) % groups
            == sds_hash(sender_id, message_id) % groups)
