"""Fault injection: Toxiproxy control (`toxiproxy`), the link vocabulary over TCP proxies
(`links`), a UDP link relay with the same vocabulary (`udp_relay`), partition shapes
(`partitions`), nemesis schedules (`schedules`) and the nemesis that runs them (`nemesis`)."""
