"""BEEP frames (RFC 3080 section 2.2, RFC 3081 section 3.1): an incremental, strict parser and the encoder.

A frame the parser cannot accept raises FrameError; the session turns that into closing the
session (RFC 3080 2.2.1.1: a poorly formed frame ends the session without a response).
"""

from __future__ import annotations

from dataclasses import dataclass

MSG, RPY, ERR, ANS, NUL, SEQ = "MSG", "RPY", "ERR", "ANS", "NUL", "SEQ"
DATA_TYPES = (MSG, RPY, ERR, ANS, NUL)
MAX_31 = 2**31 - 1
MAX_32 = 2**32 - 1
TRAILER = b"END\r\n"
MAX_HEADER = 80  # the longest legal header (an ANS with every number at its maximum) is 61 octets


class FrameError(Exception):
    """A poorly formed frame: the peer broke the framing, the session must end."""


@dataclass(frozen=True)
class Frame:
    """One data frame: MSG, RPY, ERR, ANS (with ansno) or NUL."""

    type: str
    channel: int
    msgno: int
    more: bool
    seqno: int
    payload: bytes
    ansno: int | None = None

    def encode(self) -> bytes:
        fields = [self.type, str(self.channel), str(self.msgno), "*" if self.more else ".",
                  str(self.seqno), str(len(self.payload))]
        if self.type == ANS:
            fields.append(str(self.ansno))
        return " ".join(fields).encode("ascii") + b"\r\n" + self.payload + TRAILER


@dataclass(frozen=True)
class Seq:
    """An RFC 3081 SEQ frame: the peer accepts `window` octets on `channel` from `ackno` on."""

    channel: int
    ackno: int
    window: int

    def encode(self) -> bytes:
        return f"SEQ {self.channel} {self.ackno} {self.window}\r\n".encode("ascii")


def _number(text: bytes, name: str, top: int) -> int:
    if not text or len(text) > 10 or not text.isdigit():
        raise FrameError(f"{name} {text[:16]!r} is not a decimal number")
    value = int(text)
    if value > top:
        raise FrameError(f"{name} {value} is out of range (0..{top})")
    return value


def parse_header(line: bytes) -> tuple[str, list[int | bool]]:
    """Split and check one header line (without CRLF); numbers in range, one space between fields."""
    parts = line.split(b" ")
    kind = parts[0].decode("ascii", "replace")
    if kind == SEQ:
        if len(parts) != 4:
            raise FrameError(f"SEQ header has {len(parts) - 1} fields, wants 3: {line[:MAX_HEADER]!r}")
        return kind, [_number(parts[1], "channel", MAX_31), _number(parts[2], "ackno", MAX_32),
                      _number(parts[3], "window", MAX_31)]
    if kind not in DATA_TYPES:
        raise FrameError(f"unknown frame type {line[:8]!r}")
    want = 6 if kind == ANS else 5
    if len(parts) != want + 1:
        raise FrameError(f"{kind} header has {len(parts) - 1} fields, wants {want}: {line[:MAX_HEADER]!r}")
    if parts[3] not in (b".", b"*"):
        raise FrameError(f"continuation indicator {parts[3][:4]!r} is neither '.' nor '*'")
    fields: list[int | bool] = [_number(parts[1], "channel", MAX_31), _number(parts[2], "msgno", MAX_31),
                                parts[3] == b"*", _number(parts[4], "seqno", MAX_32),
                                _number(parts[5], "size", MAX_31)]
    if kind == ANS:
        fields.append(_number(parts[6], "ansno", MAX_31))
    if kind == NUL and (fields[2] or fields[4] != 0):
        raise FrameError("a NUL frame must be '.' with size 0")
    return kind, fields


class FrameParser:
    """Feed bytes, take whole frames; holds at most one partial frame."""

    def __init__(self, max_payload: int) -> None:
        self.max_payload = max_payload
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Frame | Seq]:
        self._buf += data
        out: list[Frame | Seq] = []
        while True:
            frame = self._next()
            if frame is None:
                return out
            out.append(frame)

    def _next(self) -> Frame | Seq | None:
        end = self._buf.find(b"\r\n", 0, MAX_HEADER + 2)
        if end < 0:
            if len(self._buf) > MAX_HEADER + 1 or b"\n" in self._buf[:MAX_HEADER + 2]:
                raise FrameError(f"no CRLF-terminated header in {bytes(self._buf[:24])!r}...")
            return None
        kind, f = parse_header(bytes(self._buf[:end]))
        if kind == SEQ:
            del self._buf[:end + 2]
            return Seq(int(f[0]), int(f[1]), int(f[2]))
        size = int(f[4])
        if size > self.max_payload:
            raise FrameError(f"frame payload of {size} octets exceeds the limit of {self.max_payload}")
        start = end + 2
        stop = start + size + len(TRAILER)
        if len(self._buf) < stop:
            return None
        if self._buf[start + size:stop] != TRAILER:
            raise FrameError(f"frame trailer is {bytes(self._buf[start + size:stop])!r}, not END CRLF")
        payload = bytes(self._buf[start:start + size])
        del self._buf[:stop]
        return Frame(kind, int(f[0]), int(f[1]), bool(f[2]), int(f[3]), payload,
                     int(f[5]) if kind == ANS else None)
