"""Two sessions over a real loopback TCP connection through the asyncio runtime."""

from __future__ import annotations

import asyncio

from nodes.antacid.beep import (
    AnswersDone,
    ChannelClosed,
    ChannelStarted,
    GreetingReceived,
    Message,
    Reply,
    SessionClosed,
)
from nodes.antacid.beep.runtime import BeepConnection, connect, serve

ECHO = "urn:test:echo"


async def _echo_server(conn: BeepConnection) -> None:
    """Echo each MSG as RPY; 'many' gets three ANS and a NUL; runs until the session ends."""
    while True:
        try:
            event = await conn.next_event()
        except EOFError:
            return
        if isinstance(event, Message):
            if event.body == b"many":
                for i in range(3):
                    await conn.call(conn.session.send_ans, event.channel, event.msgno, f"{i}".encode())
                await conn.call(conn.session.send_nul, event.channel, event.msgno)
            else:
                await conn.call(conn.session.send_rpy, event.channel, event.msgno, event.body)


async def _until(conn: BeepConnection, kind: type) -> list:
    seen = []
    while True:
        event = await asyncio.wait_for(conn.next_event(), 10)
        seen.append(event)
        if isinstance(event, kind):
            return seen


def test_two_sessions_over_loopback_tcp() -> None:
    async def run() -> None:
        server = await serve("127.0.0.1", 0, (ECHO,), _echo_server)
        port = server.sockets[0].getsockname()[1]
        try:
            client = await connect("127.0.0.1", port)
            [greeting] = await _until(client, GreetingReceived)
            assert greeting.profiles == (ECHO,)
            channel = await client.call(client.session.start_channel, ECHO)
            [started] = await _until(client, ChannelStarted)
            assert started.channel == channel == 1 and started.profile == ECHO
            big = bytes(range(256)) * 800  # 200 KB: fifty windows of 4096 octets each way
            msgno = await client.call(client.session.send_msg, channel, big)
            reply = await client.next_event()
            assert isinstance(reply, Reply) and (reply.msgno, reply.body) == (msgno, big)
            await client.call(client.session.send_msg, channel, b"many")
            answers = await _until(client, AnswersDone)
            assert [a.body for a in answers[:-1]] == [b"0", b"1", b"2"]
            await client.call(client.session.close_channel, channel)
            assert await client.next_event() == ChannelClosed(channel, 200, by_peer=False)
            await client.call(client.session.close_session)
            assert await client.next_event() == SessionClosed(None)
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def test_a_hostile_peer_gets_the_connection_closed_and_the_server_goes_on() -> None:
    ended: list[SessionClosed] = []

    async def handler(conn: BeepConnection) -> None:
        while True:
            try:
                event = await conn.next_event()
            except EOFError:
                return
            if isinstance(event, SessionClosed):
                ended.append(event)

    async def run() -> None:
        server = await serve("127.0.0.1", 0, (ECHO,), handler)
        port = server.sockets[0].getsockname()[1]
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"RPY 0 0 . 0 99999999999\r\n")
            await writer.drain()
            greeting = await asyncio.wait_for(reader.read(), 10)  # read to EOF: the server hung up
            assert greeting.startswith(b"RPY 0 0 . 0 ")
            writer.close()
            client = await connect("127.0.0.1", port)
            assert isinstance(await asyncio.wait_for(client.next_event(), 10), GreetingReceived)
            await client.aclose()
        finally:
            server.close()
            await server.wait_closed()

    asyncio.run(run())
    assert ended[0].error is not None and "size" in ended[0].error
