// A @waku/sds MessageChannel as one member of our SDS group (docs/sds.md, "Interop with @waku/sds").
//
// Transport: our node's, one UDP socket on loopback; a broadcast is one datagram to every peer.
// The wire bytes need no translation: @waku/proto's SdsMessage has our field numbers and types
// (nodes/sds/wire.py), so datagrams are forwarded as they are.
//
// Control: JSON lines on stdin, one JSON line answer each on stdout:
//   {"op":"send","payload":s,"exclude":[peer..]}  broadcast (never to `exclude`, resends and
//                                                 repair rebroadcasts of this id included)
//   {"op":"drop","payload":s,"except_from":[peer..]} drop incoming datagrams whose content is s
//                                                 unless they come from a listed peer's address
//   {"op":"state"}                               log, acks, repair activity, what peers acked
//   {"op":"quit"}
//
// Usage: node bridge.mjs --id w1 --port P --peers '{"n1":"127.0.0.1:P1",...}'
//        [--channel 0] [--tick-ms 50] [--sync-ms 500] [--resend-ms 1000] [--t-min-ms 200] [--t-max-ms 1500]
import dgram from "node:dgram";
import readline from "node:readline";
import { BloomFilter, Message, MessageChannel, MessageChannelEvent } from "@waku/sds";

function parseArgs(argv) {
  const a = { channel: "0", "tick-ms": "50", "sync-ms": "500", "resend-ms": "1000",
    "t-min-ms": "200", "t-max-ms": "1500" };
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--") || argv[i + 1] === undefined) {
      throw new Error(`bad argument ${argv[i]}: expected --name value pairs`);
    }
    a[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ["id", "port", "peers"]) {
    if (!a[k]) throw new Error(`missing --${k} (see the usage at the top of bridge.mjs)`);
  }
  return a;
}

const args = parseArgs(process.argv.slice(2));
const num = (k) => Number.parseInt(args[k], 10);
const peers = Object.fromEntries(Object.entries(JSON.parse(args.peers)).map(([name, addr]) => {
  const [host, port] = addr.split(":");
  return [name, { host, port: Number.parseInt(port, 10) }];
}));
const peerByAddr = new Map(Object.entries(peers).map(([n, p]) => [`${p.host}:${p.port}`, n]));

const channel = new MessageChannel(args.channel, args.id, {
  repairConfig: { tMin: num("t-min-ms"), tMax: num("t-max-ms") }
});
const sock = dgram.createSocket("udp4");
const exclude = new Map(); // message id -> Set of peers never sent that id
const drops = new Map(); // content (utf-8) -> Set of peers whose copies are let through
const stats = { datagrams_in: 0, datagrams_out: 0, wire_errors: 0, dropped: 0 };
const acked = new Set();
const possibly = new Set();
const repair = { requests_sent: [], requests_received: [], responses_sent: [], missing: [] };
const peerAcks = {}; // peer -> {history: Set of ids seen in its causal histories, bloom: bytes}

const on = (ev, f) => channel.addEventListener(ev, (e) => f(e.detail));
on(MessageChannelEvent.OutMessageAcknowledged, (id) => acked.add(id));
on(MessageChannelEvent.OutMessagePossiblyAcknowledged, (d) => possibly.add(d.messageId));
on(MessageChannelEvent.RepairRequestSent, (d) => repair.requests_sent.push(...d.messageIds));
on(MessageChannelEvent.RepairRequestReceived, (d) => repair.requests_received.push(...d.messageIds));
on(MessageChannelEvent.RepairResponseSent, (d) => repair.responses_sent.push(d.messageId));
on(MessageChannelEvent.InMessageMissing, (hs) => repair.missing.push(...hs.map((h) => h.messageId)));

function broadcast(msg) {
  const data = msg.encode();
  const skip = exclude.get(msg.messageId);
  for (const [name, p] of Object.entries(peers)) {
    if (skip && skip.has(name)) continue;
    sock.send(data, p.port, p.host);
    stats.datagrams_out++;
  }
}

// one queue: the channel's tasks and sweeps never interleave
let chain = Promise.resolve();
const serial = (f) => (chain = chain.then(f).catch((e) => process.stderr.write(`bridge: ${e?.stack ?? e}\n`)));

sock.on("message", (buf, rinfo) => {
  stats.datagrams_in++;
  const from = peerByAddr.get(`${rinfo.address}:${rinfo.port}`);
  const msg = Message.decode(new Uint8Array(buf));
  if (!msg) { stats.wire_errors++; return; }
  const let_through = msg.content?.length ? drops.get(Buffer.from(msg.content).toString("utf8")) : undefined;
  if (let_through && !(from && let_through.has(from))) { stats.dropped++; return; }
  if (from && msg.lamportTimestamp !== undefined) {
    const pa = (peerAcks[from] ??= { history: new Set(), bloom: undefined });
    for (const h of msg.causalHistory) pa.history.add(h.messageId);
    if (msg.bloomFilter) pa.bloom = msg.bloomFilter;
  }
  serial(async () => { channel.pushIncomingMessage(msg, undefined); await channel.processTasks(); });
});

function localLog() {
  return channel.localHistory.slice(0).map((m) => ({
    id: m.messageId, sender: m.senderId, lamport: m.lamportTimestamp.toString(),
    payload: Buffer.from(m.content).toString("utf8") }));
}

function state() {
  const own = channel.localHistory.slice(0).filter((m) => m.senderId === args.id).map((m) => m.messageId);
  const seen = {};
  for (const [peer, pa] of Object.entries(peerAcks)) {
    const bloom = pa.bloom ? BloomFilter.fromBytes(pa.bloom, channel.filter.options, channel.filter.hashN) : undefined;
    seen[peer] = { history: own.filter((id) => pa.history.has(id)),
      bloom: bloom ? own.filter((id) => bloom.lookup(id)) : [] };
  }
  const { unacknowledged, possiblyAcknowledged } = channel.sweepOutgoingBuffer();
  return { id: args.id, log: localLog(), acked: [...acked], possibly: [...possibly],
    outgoing: { unacknowledged: unacknowledged.map((m) => m.messageId),
      possibly_acknowledged: possiblyAcknowledged.map((m) => m.messageId) },
    incoming_buffer: channel.incomingBuffer.map((m) => m.messageId),
    bloom: Buffer.from(channel.filter.toBytes()).toString("hex"),
    peers_acked_own: seen, repair, stats };
}

async function command(req) {
  switch (req.op) {
    case "send": {
      const payload = new TextEncoder().encode(String(req.payload));
      const id = MessageChannel.getMessageId(payload);
      if (req.exclude?.length) exclude.set(id, new Set(req.exclude));
      let sent;
      channel.pushOutgoingMessage(payload, async (m) => { broadcast(m); sent = m; return { success: true }; });
      await channel.processTasks();
      return { ok: true, id, lamport: sent?.lamportTimestamp?.toString() };
    }
    case "drop":
      drops.set(String(req.payload), new Set(req.except_from ?? []));
      return { ok: true };
    case "state":
      return { ok: true, ...state() };
    case "quit":
      setImmediate(() => { sock.close(); process.exit(0); });
      return { ok: true };
    default:
      return { ok: false, error: `unknown op ${JSON.stringify(req.op)}: send, drop, state, quit` };
  }
}

sock.bind(num("port"), "127.0.0.1", () => {
  setInterval(() => serial(async () => {
    await channel.processTasks();
    channel.sweepIncomingBuffer();
    await channel.sweepRepairIncomingBuffer(async (m) => { broadcast(m); return true; });
  }), num("tick-ms"));
  setInterval(() => serial(async () => {
    await channel.pushOutgoingSyncMessage(async (m) => { broadcast(m); return true; });
  }), num("sync-ms"));
  setInterval(() => serial(async () => {
    for (const m of channel.sweepOutgoingBuffer().unacknowledged) broadcast(m);
  }), num("resend-ms"));
  process.stdout.write(JSON.stringify({ ready: true, id: args.id, port: num("port") }) + "\n");
});

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => serial(async () => {
  let out;
  try { out = await command(JSON.parse(line)); } catch (e) { out = { ok: false, error: String(e) }; }
  process.stdout.write(JSON.stringify(out) + "\n");
}));
rl.on("close", () => { sock.close(); process.exit(0); }); // the test went away: never linger
