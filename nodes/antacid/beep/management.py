"""Channel 0's XML (RFC 3080 2.3): greeting, start, close, profile, ok, error.

Written in the layout of the RFC's own examples (single-quoted attributes, CRLF lines) so the
RFC's exchanges are byte-exact golden vectors; read with defusedxml (the peer is untrusted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring


class ManagementError(Exception):
    """Channel 0 carried XML that is not one of the channel management elements."""


@dataclass(frozen=True)
class Greeting:
    profiles: tuple[str, ...]
    features: str = ""
    localize: str = ""


@dataclass(frozen=True)
class Start:
    number: int
    profiles: tuple[str, ...]
    contents: tuple[str, ...] = ()  # piggybacked initial content, one per profile ("" for none)
    server_name: str = ""


@dataclass(frozen=True)
class Close:
    number: int
    code: int


@dataclass(frozen=True)
class Profile:
    uri: str
    content: str = ""


@dataclass(frozen=True)
class Ok:
    pass


@dataclass(frozen=True)
class Error:
    code: int
    text: str = ""
    extra: dict[str, str] = field(default_factory=dict)


Element_ = Greeting | Start | Close | Profile | Ok | Error


def _attr(value: str) -> str:
    return "'" + (value.replace("&", "&amp;").replace("<", "&lt;").replace("'", "&apos;")
                  .replace('"', "&quot;")) + "'"


def _text(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _profile(uri: str, content: str, indent: str) -> str:
    if not content:
        return f"{indent}<profile uri={_attr(uri)} />\r\n"
    return f"{indent}<profile uri={_attr(uri)}>{_text(content)}</profile>\r\n"


def encode(element: Element_) -> bytes:
    """The XML body for one channel management element."""
    if isinstance(element, Greeting):
        attrs = "".join(f" {k}={_attr(v)}" for k, v in (("features", element.features),
                                                        ("localize", element.localize)) if v)
        if not element.profiles:
            return f"<greeting{attrs} />\r\n".encode()
        inner = "".join(_profile(p, "", "   ") for p in element.profiles)
        return f"<greeting{attrs}>\r\n{inner}</greeting>\r\n".encode()
    if isinstance(element, Start):
        contents = element.contents or ("",) * len(element.profiles)
        name = f" serverName={_attr(element.server_name)}" if element.server_name else ""
        inner = "".join(_profile(p, c, "   ") for p, c in zip(element.profiles, contents, strict=True))
        return f"<start number={_attr(str(element.number))}{name}>\r\n{inner}</start>\r\n".encode()
    if isinstance(element, Close):
        return f"<close number={_attr(str(element.number))} code={_attr(str(element.code))} />\r\n".encode()
    if isinstance(element, Profile):
        return _profile(element.uri, element.content, "").encode()
    if isinstance(element, Ok):
        return b"<ok />\r\n"
    return f"<error code={_attr(str(element.code))}>{_text(element.text)}</error>\r\n".encode()


def _int(node: Element, name: str, low: int, high: int) -> int:
    raw = node.get(name)
    if raw is None or not raw.isdigit() or not low <= int(raw) <= high:
        raise ManagementError(f"<{node.tag}> attribute {name}={raw!r} is not a number in {low}..{high}")
    return int(raw)


def _uri(node: Element) -> str:
    if node.tag != "profile" or not node.get("uri"):
        raise ManagementError(f"expected <profile uri=...>, got <{node.tag}>")
    return node.get("uri", "")


def decode(body: bytes) -> Element_:
    """Parse one channel management element; anything else is a ManagementError."""
    try:
        root = fromstring(body, forbid_dtd=True)
    except (DefusedXmlException, SyntaxError, ValueError) as exc:
        raise ManagementError(f"channel 0 message is not well-formed XML: {exc}") from None
    if root.tag == "greeting":
        return Greeting(tuple(_uri(p) for p in root), root.get("features", ""), root.get("localize", ""))
    if root.tag == "start":
        profiles = list(root)
        if not profiles:
            raise ManagementError("<start> names no profile")
        return Start(_int(root, "number", 1, 2**31 - 1), tuple(_uri(p) for p in profiles),
                     tuple((p.text or "").strip() for p in profiles), root.get("serverName", ""))
    if root.tag == "close":
        return Close(_int(root, "number", 0, 2**31 - 1), _int(root, "code", 100, 999))
    if root.tag == "profile":
        return Profile(_uri(root), (root.text or "").strip())
    if root.tag == "ok":
        return Ok()
    if root.tag == "error":
        extra = {k: v for k, v in root.attrib.items() if k != "code"}
        return Error(_int(root, "code", 100, 999), (root.text or "").strip(), extra)
    raise ManagementError(f"<{root.tag}> is not a channel management element")
