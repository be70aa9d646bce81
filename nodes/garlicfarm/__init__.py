"""Garlic Farm (I2P proposal 150) reference node: JRaft wire protocol + Raft + KV/Meta LS apps.

Run: ``python -m nodes.garlicfarm --config C.json`` (docs/contracts.md section 2).

``options`` keys (all optional):
- ``cluster`` ("farm"), ``username`` ("farm"), ``password`` ("farm"): handshake path and Digest
  credentials (version is "1").
- ``members`` (default: this node + every peer): num_ids of the initial configuration.
- ``join`` (false): start outside the configuration and run the establishment sequence against
  ``peers`` (ClientRequest probe -> leader -> AddServerRequest); ``advertise``
  ("tcp://host:ports.peer"): the endpoint sent in AddServerRequest.
- ``election_timeout_ms`` ([300, 600]), ``heartbeat_ms`` (100), ``rpc_timeout_ms``
  (max(1000, 2 x election max)), ``request_timeout_ms`` (5000: ClientRequest/KV wait for commit).
- ``snapshot_threshold`` (1000 applied entries beyond the snapshot), ``snapshot_chunk`` (16384 bytes).
- ``meta_interval_ms`` (2000; 0 disables Meta LS status posts), ``publish_config`` ("auto").
- ``tls`` (false): TLS on the peer port with a self-signed cert; plain TCP otherwise.
- ``deferred_flush_ms`` (60000): flush period of the ``ack-before-fsync`` bug's user-space
  buffer (a SIGKILL loses up to that much of the log; graceful stop flushes).
- ``reconnect_max_ms`` (1000): the longest wait between tries to a peer that does not answer
  (doubling from 50 ms).
- ``log_level`` ("INFO").

Bug modes (``bugs``): ``ack-before-fsync``, ``commit-without-majority``, ``local-reads``,
``forget-vote``, ``unsafe-config-change``, ``sync-loop``, ``no-term-bound``.
"""
