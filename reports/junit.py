"""JUnit XML for CI systems: one test suite per run, one test case per checker.

``valid: false`` is a ``<failure>``; ``unknown`` and an unreadable history are ``<error>``:
CI must never show them green. The witness text goes in the body so a CI page shows it.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def suite(run: dict[str, Any], checks: Iterable[dict[str, Any]],
          agreement: Iterable[dict[str, Any]] = ()) -> ET.Element:
    """``agreement``: this run's ``aggregate.agreement`` rows; a MISMATCH between the stored
    and the re-run verdict is an ``<error type="mismatch">`` case of its own."""
    s = ET.Element("testsuite", name=run["run_id"])
    cases = 0
    failures = errors = 0
    if run.get("error"):
        tc = ET.SubElement(s, "testcase", classname=run["run_id"], name="read-history")
        ET.SubElement(tc, "error", message=run["error"][:500], type="history").text = run["error"]
        cases, errors = 1, 1
    for c in checks:
        cases += 1
        name = c["checker"] + (" (stored)" if c.get("source") == "harness" else "")
        tc = ET.SubElement(s, "testcase", classname=run["run_id"], name=name,
                           time=f"{float(c.get('elapsed_s') or 0):.3f}")
        anomalies = json.loads(c["anomalies"]) if isinstance(c["anomalies"], str) else c["anomalies"]
        body = "\n\n".join(f"[{a['kind']}] {a['message']}" for a in anomalies) or c.get("note", "")
        first = anomalies[0]["message"].splitlines()[0] if anomalies else (c.get("note") or "")
        if c["valid"] == "false":
            failures += 1
            ET.SubElement(tc, "failure", message=first[:500], type="invalid").text = body
        elif c["valid"] != "true":
            errors += 1
            ET.SubElement(tc, "error", message=(first or "verdict unknown")[:500],
                          type="unknown").text = body
    for a in agreement:
        if a["status"] != "MISMATCH":
            continue
        cases += 1
        errors += 1
        tc = ET.SubElement(s, "testcase", classname=run["run_id"],
                           name=f"stored-vs-rerun: {a['checker']}")
        msg = (f"stored verdict {a['stored']} but the report's re-run ({a['rerun_checker']}) "
               f"says {a['rerun']}")
        ET.SubElement(tc, "error", message=msg, type="mismatch").text = \
            msg + (f"\n\n{a['note']}" if a.get("note") else "")
    s.set("tests", str(cases))
    s.set("failures", str(failures))
    s.set("errors", str(errors))
    return s


def write_suites(path: Path, suites: list[ET.Element]) -> None:
    root = ET.Element("testsuites")
    for x in suites:
        root.append(x)
    for k in ("tests", "failures", "errors"):
        root.set(k, str(sum(int(x.get(k, "0")) for x in suites)))
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
