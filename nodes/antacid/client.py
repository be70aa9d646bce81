"""ANTACID client library: submit update groups over BEEP, hear their results, read a zone.

``AntacidClient(host, port)`` keeps one BEEP session with one ARS channel to its submission
server (opened on first use, reopened after a loss). ``start()`` opens a loopback BEEP
listener that receives ``SubmittedUpdateResultNotification``s (every submission names it as
NotifyHost/NotifyPort); ``result(gsid)`` waits for one. ``read_zone`` asks the node's admin
endpoint (``GET /antacid/zone``): ARS itself has no read.

Errors: `AntacidRefused` carries the server's ARSError (a definite refusal: nothing was
submitted); `AntacidUnavailable` means no answer (the submission may or may not exist).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

import aiohttp

from nodes.antacid import beep
from nodes.antacid import messages as m
from nodes.antacid.beep.runtime import BeepConnection, connect, serve

PROFILE = "http://xml.resource.org/profiles/ARS"


class AntacidError(Exception):
    """Any failure of the ANTACID client."""


class AntacidRefused(AntacidError):
    """The server answered with an ARSError: the submission was not taken."""

    def __init__(self, error: m.ArsError) -> None:
        super().__init__(f"ARSError {error.code}: {error.text} {error.specifics}".strip())
        self.error = error


class AntacidUnavailable(AntacidError):
    """No answer (connection refused or lost, timeout): the outcome is unknown."""


class AntacidNotSent(AntacidUnavailable):
    """No ARS channel could be opened: the submission certainly never left this client."""


Docs = Mapping[str, str | None] | Sequence[m.DatumAndOp]


def group_of(docs: Docs) -> m.UpdateGroup:
    """``{name: content}`` (None deletes) or DatumAndOps -> a submitted UpdateGroup."""
    if isinstance(docs, Mapping):
        data = tuple(m.DatumAndOp(n, "", "delete") if c is None else m.DatumAndOp(n, c)
                     for n, c in docs.items())
    else:
        data = tuple(docs)
    if not data:
        raise ValueError("an update group needs at least one document")
    return m.UpdateGroup(data)


class AntacidClient:
    def __init__(self, host: str, port: int, *, admin_url: str | None = None,
                 notify_host: str = "127.0.0.1", timeout: float = 5.0) -> None:
        self.host, self.port, self.admin_url = host, port, admin_url
        self.notify_host = notify_host
        self.notify_port: int | None = None
        self.timeout = timeout
        self._req = itertools.count(1)
        self._conn: BeepConnection | None = None
        self._channel = 0
        self._reader: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._lock = asyncio.Lock()
        self._listener: asyncio.Server | None = None
        self.results: dict[m.GlobalSubmitID, m.SubmittedUpdateResultNotification] = {}
        #: by (zone, GlobalSubmitID): SSNs are per server per zone, so a server holding
        #: several zones hands out the same GlobalSubmitID once in each (3.1.2)
        self.zone_results: dict[tuple[str, m.GlobalSubmitID],
                                m.SubmittedUpdateResultNotification] = {}
        self._result_waiters: dict[tuple[str | None, m.GlobalSubmitID],
                                   list[asyncio.Future[Any]]] = {}
        #: how each result arrived: "listener" (NotifyHost/NotifyPort) or "channel" (the
        #: submission channel, NotifyOkOnCurrentChannel)
        self.arrived: dict[m.GlobalSubmitID, str] = {}
        self._http: aiohttp.ClientSession | None = None

    # ---- notifications ------------------------------------------------------------------

    async def start(self) -> None:
        """Open the notification listener (an ephemeral loopback port)."""
        if self._listener is None:
            self._listener = await serve(self.notify_host, 0, (PROFILE,), self._notified)
            self.notify_port = self._listener.sockets[0].getsockname()[1]

    async def _notified(self, conn: BeepConnection) -> None:
        with contextlib.suppress(EOFError, OSError, ConnectionError):
            while True:
                ev = await conn.next_event()
                if isinstance(ev, beep.SessionClosed):
                    return
                if not isinstance(ev, beep.Message):
                    continue
                if self._note(conn, ev, "listener"):
                    await conn.flush()

    def _note(self, conn: BeepConnection, ev: beep.Message, how: str) -> bool:
        """Take a result notification MSG (answered with an empty ARSAnswer); False when it
        is not one."""
        try:
            msg = m.parse(ev.body)
        except m.ArsProtocolError:
            return False
        if not (isinstance(msg, m.ArsRequest)
                and isinstance(msg.body, m.SubmittedUpdateResultNotification)):
            return False
        note = msg.body
        self.results[note.gsid] = note
        self.zone_results[(note.zone, note.gsid)] = note
        self.arrived.setdefault(note.gsid, how)
        for key in ((note.zone, note.gsid), (None, note.gsid)):
            for fut in self._result_waiters.pop(key, []):
                if not fut.done():
                    fut.set_result(note)
        conn.session.send_rpy(ev.channel, ev.msgno,
                              m.encode(m.ArsResponse(msg.req_num, m.ArsAnswer())))
        return True

    async def result(self, gsid: m.GlobalSubmitID, timeout: float | None = None,
                     zone: str | None = None) -> m.SubmittedUpdateResultNotification:
        """The submission's result notification (committed: ``error`` None); ``zone``: the
        zone it was submitted in (needed when the server holds several)."""
        if zone is None and gsid in self.results:
            return self.results[gsid]
        if zone is not None and (zone, gsid) in self.zone_results:
            return self.zone_results[(zone, gsid)]
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._result_waiters.setdefault((zone, gsid), []).append(fut)
        try:
            return await asyncio.wait_for(fut, timeout if timeout is not None else self.timeout)
        except TimeoutError as e:
            raise AntacidUnavailable(f"no result notification for SSN {gsid.ssn} yet") from e

    # ---- submissions --------------------------------------------------------------------

    async def _open(self) -> None:
        try:
            conn = await asyncio.wait_for(connect(self.host, self.port), self.timeout)
        except (OSError, TimeoutError) as e:
            raise AntacidNotSent(f"cannot reach {self.host}:{self.port}: {e}") from e
        ch = conn.session.start_channel(PROFILE)
        try:
            while True:
                ev = await asyncio.wait_for(conn.next_event(), self.timeout)
                if isinstance(ev, beep.ChannelStarted) and ev.channel == ch:
                    break
                if isinstance(ev, beep.ChannelStartFailed | beep.SessionClosed):
                    raise AntacidNotSent(f"the server refused the ARS channel: {ev}")
        except (OSError, EOFError, TimeoutError) as e:
            await conn.aclose()
            raise AntacidNotSent(f"no ARS channel from {self.host}:{self.port}: {e}") from e
        self._conn, self._channel = conn, ch
        self._reader = asyncio.get_running_loop().create_task(self._read(conn))

    async def _read(self, conn: BeepConnection) -> None:
        try:
            while True:
                ev = await conn.next_event()
                if isinstance(ev, beep.Reply | beep.ErrorReply):
                    fut = self._waiting.pop(ev.msgno, None)
                    if fut is not None and not fut.done():
                        fut.set_result(ev.body)
                elif isinstance(ev, beep.Message):  # a notification on the submission channel
                    if self._note(conn, ev, "channel"):
                        await conn.flush()
                elif isinstance(ev, beep.SessionClosed):
                    break
        except (EOFError, OSError, ConnectionError):
            pass
        finally:
            if self._conn is conn:
                self._conn = None
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(AntacidUnavailable("the BEEP session was lost"))
            self._waiting.clear()

    async def submit(self, docs: Docs, *, notify: bool = True,
                     on_channel: bool = False) -> m.GlobalSubmitID:
        """Submit one update group; its GlobalSubmitID once the server holds it durably.
        ``on_channel``: NotifyOkOnCurrentChannel="yes" (the result may come on this
        submission channel while it stays open; the listener still takes it otherwise)."""
        group = group_of(docs)
        if on_channel and not notify:
            raise ValueError("on_channel needs notify: the spec requires NotifyHost and "
                             "NotifyPort with NotifyOkOnCurrentChannel (127001)")
        if notify and self.notify_port is None:
            await self.start()
        req = m.ArsRequest(next(self._req) % m.U32 or 1, m.SubmitUpdate(
            group, self.notify_host if notify else None, self.notify_port if notify else None,
            on_channel))
        async with self._lock:
            if self._conn is None:
                await self._open()
            conn = self._conn
            assert conn is not None
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            try:
                msgno = conn.session.send_msg(self._channel, m.encode(req))
                self._waiting[msgno] = fut
                await conn.flush()
            except (OSError, beep.LocalProtocolError) as e:
                raise AntacidUnavailable(f"sending the submission failed: {e}") from e
        try:
            body = await asyncio.wait_for(fut, self.timeout)
        except TimeoutError as e:
            raise AntacidUnavailable("no answer to the submission in time") from e
        try:
            msg = m.parse(body)
        except m.ArsProtocolError as e:
            raise AntacidUnavailable(f"the server's answer is not ARS: {e}") from e
        if isinstance(msg, m.ArsError):
            raise AntacidRefused(msg)
        if isinstance(msg, m.ArsResponse) and isinstance(msg.result, m.ArsError):
            raise AntacidRefused(msg.result)
        if isinstance(msg, m.ArsResponse) and msg.result.gsid is not None:
            return msg.result.gsid
        raise AntacidUnavailable(f"unexpected answer to SubmitUpdate: {msg!r}")

    # ---- reads --------------------------------------------------------------------------

    async def read_zone(self, zone: str | None = None) -> dict[str, Any]:
        """``{"last_csn": n, "docs": {name: {"content", "csn"}}}`` of ``zone`` (None: the
        server's first zone) from the admin endpoint."""
        if self.admin_url is None:
            raise AntacidError("read_zone needs the node's admin URL: AntacidClient(admin_url=...)")
        if self._http is None:
            self._http = aiohttp.ClientSession()
        url = self.admin_url.rstrip("/") + "/antacid/zone"
        if zone is not None:
            url += "?" + urlencode({"zone": zone})
        try:
            async with self._http.get(url, timeout=aiohttp.ClientTimeout(total=self.timeout)) as r:
                r.raise_for_status()
                data: dict[str, Any] = await r.json()
                return data
        except (aiohttp.ClientError, TimeoutError) as e:
            raise AntacidUnavailable(f"reading the zone at {url} failed: {e}") from e

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._conn is not None:
            await self._conn.aclose()
            self._conn = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._http is not None:
            await self._http.close()
            self._http = None
