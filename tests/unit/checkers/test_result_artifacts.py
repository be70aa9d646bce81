"""The runner writes every artifact a check described (the linearizability pages), in fresh
nested directories and several to one directory, and puts each path in its anomaly's witness;
an artifact with no anomaly to point at is still written."""

from __future__ import annotations

from pathlib import Path

from checkers.result import Anomaly, Artifact, Result, compose, write_artifacts


def test_every_artifact_is_written_and_linked_from_its_anomaly(tmp_path: Path) -> None:
    bad = Result("lin", False, [Anomaly("nonlinearizable", "key a", {}),
                                Anomaly("nonlinearizable", "key b", {})])
    bad.artifacts = [Artifact("linearizable/keys/a.html", lambda: "<p>a</p>", anomaly=0),
                     Artifact("linearizable/keys/b.html", lambda: "<p>b</p>", anomaly=1)]
    good = Result("lin-ok", True)
    good.artifacts = [Artifact("linearizable/keys/ok.html", lambda: "<p>ok</p>")]
    root = tmp_path / "run"  # does not exist yet
    written = write_artifacts(compose("all", [bad, good]), root)
    keys = root / "linearizable" / "keys"
    assert written == [keys / "a.html", keys / "b.html", keys / "ok.html"]
    assert [p.read_text() for p in written] == ["<p>a</p>", "<p>b</p>", "<p>ok</p>"]
    assert [a.witness["html"] for a in bad.anomalies] == [str(keys / "a.html"),
                                                          str(keys / "b.html")]
