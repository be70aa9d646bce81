from nodes.garlicfarm import metals
from nodes.garlicfarm.kv import KVStateMachine


def test_kv_ops_and_snapshot():
    kv = KVStateMachine()
    assert kv.apply({"kv": "read", "key": "x", "rid": "a"}) == {"type": "ok", "value": None}
    kv.apply({"kv": "write", "key": "x", "value": 1, "rid": "b"})
    assert kv.apply({"kv": "cas", "key": "x", "old": 1, "new": 2, "rid": "c"})["type"] == "ok"
    bad = kv.apply({"kv": "cas", "key": "x", "old": 1, "new": 3, "rid": "d"})
    assert bad == {"type": "fail", "error": "cas-mismatch", "value": 2}
    kv2 = KVStateMachine()
    kv2.restore(kv.snapshot())
    assert kv2.data == {"x": 2} and kv2.results["d"] == bad


def test_best_publisher_is_deterministic():
    s = {
        1: metals.make_status("farm", 1, 100_000, 5_000, False),
        2: metals.make_status("farm", 2, 100_000, 9_000, False),
        3: metals.make_status("farm", 3, 100_000, 1_000, False, publish_config="on"),
    }
    assert metals.best_publisher(s) == 3  # "on" beats "auto"
    s[3] = metals.make_status("farm", 3, 100_000, 1_000, False, publish_config="off")
    assert metals.best_publisher(s) == 2  # longest uptime
    s[2] = metals.make_status("farm", 2, 100_000 - metals.WINDOW_MS - 1, 9_000, False)
    assert metals.best_publisher(s) == 1  # stale status dropped
    m1, m2 = metals.MetaLS(), metals.MetaLS()
    for i, st in enumerate(s.values()):
        m1.apply(i + 1, st)
    m2.restore(m1.snapshot())
    assert m1.state()["publisher"] == m2.publisher == 1
    assert metals.is_status(s[1]) and not metals.is_status({"kv": "read"})
