"""What ``harness --version`` and every ``--help`` say: the installed version, a plain-text
description, defaults, exit codes, and run's protocols, workloads and bug modes as the
registry holds them when the help is built."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

from faults.schedules import named_kinds
from harness import cli, protocols
from harness.spec import ProtocolDef

ROOT = Path(__file__).resolve().parents[3]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    """argparse wraps option help to $COLUMNS: wide enough that a phrase stays on one line."""
    monkeypatch.setenv("COLUMNS", "200")


def out_of(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main(list(argv))
    assert e.value.code == 0, (argv, e.value.code)
    out, err = capsys.readouterr()
    assert err == "", err
    return out


def subcommands(ap: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in (ap or cli.parser())._actions
              if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def option_help(text: str, option: str) -> str:
    """An option's entry in a --help (its help may start on the next line), normalised."""
    m = re.search(rf"^  {re.escape(option)} .*\n(?:    .*\n)*", text, re.M)
    assert m, f"{option} is not in:\n{text}"
    return normalised(m.group(0))


def normalised(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- --version


def test_version_is_the_installed_distributions(capsys):
    out = out_of(capsys, "--version")
    assert out.strip().split()[-1] == version(PROJECT["name"])
    assert PROJECT["name"] in out


def test_version_from_a_subprocess_exits_0_on_stdout():
    r = subprocess.run([sys.executable, "-m", "harness.cli", "--version"], cwd=ROOT, text=True,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().split()[-1] == version(PROJECT["name"])


def test_version_falls_back_to_pyproject_when_not_installed(tmp_path, monkeypatch, capsys):
    fake = tmp_path / "pyproject.toml"
    fake.write_text('[project]\nname = "surely-not-an-installed-dist"\nversion = "9.8.7"\n')
    monkeypatch.setattr(cli, "PYPROJECT", fake)
    assert out_of(capsys, "--version").strip().split()[-1] == "9.8.7"


# --------------------------------------------------------------------------- run --help


def protocol_block(help_text: str, name: str) -> str:
    """The lines of one protocol in run's protocol list, whitespace normalised."""
    section = help_text.split("protocols (", 1)[1].split("\n\n", 1)[0]
    m = re.search(rf"^  {re.escape(name)}\n((?:    .*\n?)*)", section, re.M)
    assert m, f"protocol {name} is not listed in:\n{section}"
    return normalised(m.group(1))


def test_run_help_lists_every_registered_protocol_with_workloads_and_bug_modes(capsys):
    text = out_of(capsys, "run", "--help")
    assert protocols.names(), "the registry is empty: nothing would be checked"
    for name in protocols.names():
        proto = protocols.get_protocol(name)
        block = protocol_block(text, name)
        workloads = block.split("workloads: ", 1)[1].split(" bug modes: ", 1)[0]
        assert [w.split(" (")[0] for w in workloads.split(", ")] == list(proto.workloads)
        bugs = block.split("bug modes: ", 1)[1]
        assert bugs.split(", ") == (list(proto.bugs) or ["(none)"]), (name, block)
        default = proto.default_workload or next(iter(proto.workloads))
        assert f"{default} (default)" in workloads


def test_run_help_reads_the_registry_when_the_help_is_built(monkeypatch):
    ap = cli.parser()  # built before the registry changes: the help must still show it
    toy = ProtocolDef(name="toyproto", module="nowhere", workloads={"w1": dict, "w2": dict},
                      bugs=("toy-bug-a", "toy-bug-b"), default_workload="w2")
    real_names, real_get = protocols.names, protocols.get_protocol

    def get(name):
        if name == "toyproto":
            return toy
        if name == "brokenproto":
            raise ImportError("no module named broken_suite")
        return real_get(name)

    monkeypatch.setattr(protocols, "names", lambda: sorted([*real_names(), "toyproto",
                                                            "brokenproto"]))
    monkeypatch.setattr(protocols, "get_protocol", get)
    text = subcommands(ap)["run"].format_help()
    assert protocol_block(text, "toyproto") == \
        "workloads: w1, w2 (default) bug modes: toy-bug-a, toy-bug-b"
    assert "cannot be loaded: ImportError: no module named broken_suite" in \
        protocol_block(text, "brokenproto")
    for name in real_names():  # one broken suite hides none of the others
        assert "bug modes: " in protocol_block(text, name)


def test_run_help_lists_every_nemesis_fault_kind(capsys):
    text = out_of(capsys, "run", "--help")
    section = normalised(text.split("nemesis fault kinds", 1)[1].split("exit codes:", 1)[0])
    listed = section.split("): ", 1)[1].split(", ")
    assert listed == ["none", *sorted(named_kinds(["n1"]))]


def test_run_help_shows_defaults(capsys):
    text = out_of(capsys, "run", "--help")
    for option, default in [("--nodes", "5"), ("--nemesis", "partition,kill"),
                            ("--backend", "local"), ("--time-limit", "30.0"),
                            ("--nemesis-interval", "5.0")]:
        assert option_help(text, option).endswith(f"(default: {default})"), option


# --------------------------------------------------------------------------- every --help


def test_every_help_has_a_plain_description_defaults_and_exit_codes(capsys):
    commands = subcommands()
    assert {"run", "check", "ls", "clean", "report", "serve"} <= set(commands)
    texts = {"": out_of(capsys, "--help")}
    for name in commands:
        texts[name] = out_of(capsys, name, "--help")
    for name, text in texts.items():
        assert "`" not in text, f"harness {name} --help has reStructuredText backticks"
        description = text.split("\n\n", 2)[1]
        assert not description.startswith(("positional arguments", "options")), \
            f"harness {name} --help has no description"
        assert "exit codes" in text, f"harness {name} --help lists no exit codes"
        codes = set(re.findall(r"^  (\d+) ", text.split("exit codes", 1)[1], re.M))
        assert {"0", "254", "255"} <= codes, (name, codes)
    for name in ("run", "check"):  # the verdict commands say what 1 and 2 mean
        assert {"1", "2", "130"} <= set(re.findall(r"^  (\d+) ", texts[name], re.M))
    assert "--version" in texts[""]


def test_every_option_with_a_default_shows_it():
    formatter = cli.HelpFormatter(prog="harness")
    commands = subcommands()
    for name, p in commands.items():
        assert issubclass(p.formatter_class, cli.HelpFormatter), name
        for action in p._actions:
            if action.option_strings and action.default not in (None, False, [],
                                                                argparse.SUPPRESS):
                shown = formatter._get_help_string(action) or ""
                assert "default" in shown.lower(), (name, action.option_strings, shown)
    serve = commands["serve"].format_help()
    assert option_help(serve, "--port") == "--port PORT (default: 8765)"
    assert "$HARNESS_STORE" in option_help(serve, "--store")


def test_help_for_a_plugin_command_gets_exit_codes_and_a_description(monkeypatch, capsys):
    class EP:
        name = "zz-plugin"

        def load(self):
            def add(sub):
                p = sub.add_parser("frobnicate", help="frobnicate the store")
                p.add_argument("--level", type=int, default=3)
            return add

    monkeypatch.setattr(cli, "entry_points", lambda group: [EP()])
    text = out_of(capsys, "frobnicate", "--help")
    assert "Frobnicate the store." in text
    assert "(default: 3)" in text
    assert cli.GENERIC_EXIT_CODES in text
