import random

from harness import generators as g


def fs(trace):
    return [op["f"] for _, _, op in trace]


def test_seq_and_once_give_each_op_once_across_threads():
    trace = g.drain(g.seq({"f": "a"}, {"f": "b"}, {"f": "c"}), threads=(0, 1))
    assert fs(trace) == ["a", "b", "c"]
    assert [th for _, th, _ in trace] == [0, 1, 0]


def test_limit_counts_only_ops():
    trace = g.drain(g.limit(5, g.repeat({"f": "r"})), threads=(0, 1, 2))
    assert len(trace) == 5


def test_repeat_factory_makes_fresh_generators():
    trace = g.drain(g.repeat(lambda: g.seq({"f": "x"}, {"f": "y"}), times=3))
    assert fs(trace) == ["x", "y"] * 3


def test_time_limit_stops_at_deadline():
    trace = g.drain(g.time_limit(1.0, g.repeat({"f": "r"})), dt=0.1)
    assert 9 <= len(trace) <= 11
    assert all(t < 1.0 for t, _, _ in trace)


def test_stagger_mean_rate():
    trace = g.drain(g.time_limit(100, g.stagger(0.5, g.repeat({"f": "r"}))), dt=0.0, seed=7)
    assert 160 <= len(trace) <= 240  # mean interval 0.5 s over 100 s


def test_rate_is_exact():
    trace = g.drain(g.time_limit(10, g.rate(2, g.repeat({"f": "r"}))))
    times = [t for t, _, _ in trace]
    assert len(trace) == 20
    assert all(abs((b - a) - 0.5) < 1e-9 for a, b in zip(times, times[1:], strict=False))


def test_sleep_delays_the_next_phase_of_a_sequence():
    trace = g.drain(g.seq({"f": "start"}, g.sleep(5), {"f": "stop"}), threads=("nemesis",))
    assert [(t, op["f"]) for t, _, op in trace] == [(0.0, "start"), (5.0, "stop")]


def test_mix_is_seeded_and_uses_all():
    a = fs(g.drain(g.limit(200, g.mix(g.repeat({"f": "r"}), g.repeat({"f": "w"}))), seed=3))
    b = fs(g.drain(g.limit(200, g.mix(g.repeat({"f": "r"}), g.repeat({"f": "w"}))), seed=3))
    assert a == b
    assert 60 < a.count("r") < 140


def test_mix_drops_exhausted():
    trace = g.drain(g.mix(g.limit(3, g.repeat({"f": "a"})), g.limit(4, g.repeat({"f": "b"}))))
    assert sorted(fs(trace)) == ["a"] * 3 + ["b"] * 4


def test_phases_is_a_barrier():
    # Phase 1 gives one op per thread; phase 2 must not start for anyone until all of phase 1 is done.
    gen = g.phases(g.limit(3, g.repeat({"f": "one"})), g.limit(3, g.repeat({"f": "two"})))
    trace = fs(g.drain(gen, threads=(0, 1, 2)))
    assert trace == ["one"] * 3 + ["two"] * 3


def test_phases_waits_for_slow_thread():
    gen = g.phases(g.limit(1, g.repeat({"f": "one"})), g.repeat({"f": "two"}, times=2))
    ctx = lambda th: g.Context(0.0, th, th, (0, 1), random.Random(0))  # noqa: E731
    assert gen.op(ctx(0))["f"] == "one"
    assert gen.op(ctx(0)) is g.PENDING  # thread 0 is done with phase 1, thread 1 not yet asked
    assert gen.op(ctx(1))["f"] == "two"  # thread 1 finds phase 1 exhausted: barrier passes


def test_on_threads_routes():
    gen = g.on_threads(lambda t: t == "nemesis", g.repeat({"f": "kill"}, times=2))
    assert fs(g.drain(gen, threads=(0, 1))) == []
    assert fs(g.drain(g.on_threads(lambda t: t == "nemesis", g.repeat({"f": "kill"}, times=2)),
                      threads=("nemesis",))) == ["kill", "kill"]


def test_per_key_groups_and_wraps_values():
    gen = g.per_key(["x", "y"], lambda k: g.limit(2, g.repeat({"f": "w", "value": 1})), group_size=2)
    trace = g.drain(gen, threads=(0, 1, 2, 3))
    values = [op["value"] for _, _, op in trace]
    assert sorted(map(tuple, values)) == [("x", 1), ("x", 1), ("y", 1), ("y", 1)]
    by_thread = {th: op["value"][0] for _, th, op in trace}
    assert by_thread[0] == by_thread.get(1, by_thread[0])  # same group, same key


def test_fn_sees_context_rng():
    gen = g.limit(5, lambda ctx: {"f": "w", "value": ctx.rng.randrange(100)})
    assert fs(g.drain(gen, seed=1)) == ["w"] * 5
    v1 = [op["value"] for *_, op in g.drain(g.limit(5, lambda c: {"f": "w", "value": c.rng.random()}), seed=1)]
    v2 = [op["value"] for *_, op in g.drain(g.limit(5, lambda c: {"f": "w", "value": c.rng.random()}), seed=1)]
    assert v1 == v2
