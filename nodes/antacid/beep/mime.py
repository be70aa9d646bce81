"""The MIME entity a BEEP message carries (RFC 3080 2.2.1.2): headers, an empty line, the body.

Absent headers mean Content-Type application/octet-stream and Content-Transfer-Encoding binary.
"""

from __future__ import annotations

DEFAULT_TYPE = "application/octet-stream"
BEEP_XML = "application/beep+xml"
MAX_HEADERS = 32


class MimeError(Exception):
    """The payload is not a MIME entity (no empty line after the headers, or a bad header)."""


def encode(body: bytes, content_type: str = DEFAULT_TYPE) -> bytes:
    """The payload for `body`; the default type is written as no header at all, as RFC 3080 allows."""
    if content_type == DEFAULT_TYPE:
        return b"\r\n" + body
    if "\r" in content_type or "\n" in content_type:
        raise ValueError(f"content type {content_type!r} holds a line break")
    return f"Content-Type: {content_type}\r\n\r\n".encode("ascii") + body


def decode(payload: bytes) -> tuple[dict[str, str], bytes]:
    """Headers (lower-cased names, Content-Type defaulted) and body of a message payload."""
    end = payload.find(b"\r\n\r\n") if not payload.startswith(b"\r\n") else -2
    if end == -1:
        raise MimeError("message payload has no empty line ending its MIME headers")
    headers: dict[str, str] = {}
    if end >= 0:
        lines = payload[:end].split(b"\r\n")
        if len(lines) > MAX_HEADERS:
            raise MimeError(f"message has {len(lines)} MIME header lines, over {MAX_HEADERS}")
        for raw in lines:
            name, sep, value = raw.partition(b":")
            if not sep or not name or not name.strip() == name or not name.isascii():
                raise MimeError(f"MIME header line {raw[:40]!r} is not 'Name: value'")
            headers[name.decode("ascii").lower()] = value.strip().decode("utf-8", "replace")
    headers.setdefault("content-type", DEFAULT_TYPE)
    headers.setdefault("content-transfer-encoding", "binary")
    return headers, payload[end + 4:]
