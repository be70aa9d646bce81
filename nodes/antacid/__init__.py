"""ANTACID: the ARS replication protocol (draft-schwartz-antacid-protocol-00) over BEEP: BEEP transport, messages, schema and the sans-IO core."""
