"""``harness report`` looks for Java before Spark starts, and says what to do without it."""

from __future__ import annotations

import os
import stat

import pytest

from harness import cli
from reports.spark_engine import java_problem


@pytest.fixture
def no_java(tmp_path, monkeypatch):
    """PATH is one empty directory and JAVA_HOME is unset: no java anywhere pyspark looks."""
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return empty


def said(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())


def test_report_without_java_exits_255_and_says_what_to_do(no_java, tmp_path, capsys):
    assert cli.main(["report", "--store", str(tmp_path / "store")]) == 255
    err = said(capsys)
    assert "there is no java on PATH and JAVA_HOME is not set" in err
    assert "apt-get install openjdk-17-jre-headless" in err
    assert "harness report --engine local" in err
    assert not (tmp_path / "store").exists()  # nothing was started or written


def test_a_java_home_without_java_is_named(no_java, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert cli.main(["report", "--store", str(tmp_path)]) == 255
    assert f"JAVA_HOME is {tmp_path / 'jdk'}, which has no bin/java" in said(capsys)


def test_a_java_on_path_or_in_java_home_is_found(no_java, tmp_path, monkeypatch):
    assert java_problem() is not None
    java = no_java / "java"
    java.write_text("#!/bin/sh\nexit 0\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    assert java_problem() is None
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    os.link(java, home / "bin" / "java")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java_problem() is None


def test_the_local_engine_needs_no_java(no_java, tmp_path, capsys):
    """--engine local is the way out the message names: it runs without any java."""
    from report_builders import hand_run, nonlinearizable_ops

    store = tmp_path / "store"
    hand_run(store, "t", "20261120T010000-aaaaaa", nonlinearizable_ops()[:4])
    code = cli.main(["report", "--store", str(store), "--engine", "local"])
    assert code in (0, 2), said(capsys)
    assert (store / "_report" / "index.html").is_file()
