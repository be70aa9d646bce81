"""SDS (Scalable Data Sync) reference node: causally ordered logs over a lossy broadcast,
with the SDS-R repair extension (spec: ``../shared/specs/sds.md``; our decisions: docs/sds.md).

Layers, as every protocol package here:

* `nodes.sds.wire`: the spec's protobuf ``Message`` / ``HistoryEntry`` (exact field numbers),
  built at runtime from a descriptor: no protoc step, no generated file;
* `nodes.sds.bloom`: the acknowledgement filter, bit-compatible with the most used SDS
  implementation (MurmurHash3 x86_32 seed 0 signed, double hashing ``|hA + i*hB| mod m``,
  ``m = 150,000``, ``k = 10``, big-endian 64-bit words);
* `nodes.sds.repair`: SDS-R's hash (SHA-256 of the concatenation, first 8 bytes big-endian),
  ``T_req``, ``T_resp``, response groups;
* `nodes.sds.core`: the participant as a sans-IO state machine behind the one core interface
  (`nodes.common.core`); `harness.sim.sds` runs many of them on the simulator;
* `nodes.sds.server`: the process (UDP through the harness relay, durable log, admin API);
  `nodes.sds.client`: the harness's client; `harness.suites.sds`: ``PROTOCOL``.
"""
