"""ANTACID replication service (ARS over BEEP): messages, schema and the sans-IO core."""
