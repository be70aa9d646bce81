"""``harness report`` end to end: discover runs, run the pipeline, write HTML/JUnit/JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.optional import require
from reports.discover import find_runs
from reports.html import write_report
from reports.pipeline import Engine, PipelineOutput, run_pipeline


@dataclass
class ReportOptions:
    store: Path
    selectors: list[str] = field(default_factory=list)
    since: str | None = None
    until: str | None = None
    engine: str = "spark"  # spark | local
    master: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    pages: str = "auto"  # auto | all | failed | none
    recovery_window_s: float = 5.0


@dataclass
class ReportOutcome:
    index: Path
    output: PipelineOutput


def make_engine(o: ReportOptions) -> Engine:
    rw = int(o.recovery_window_s * 1e9)
    if o.engine == "local":
        from reports.local_engine import LocalEngine

        return LocalEngine(recovery_window_ns=rw)
    if o.engine == "spark":
        require("spark", "the report's Spark engine", "or use --engine local")
        from reports.spark_engine import SparkEngine

        return SparkEngine(o.master, o.conf, recovery_window_ns=rw)
    raise ValueError(f"unknown engine {o.engine!r}; use spark or local")


def build_report(o: ReportOptions, engine: Engine | None = None) -> ReportOutcome:
    """Run the whole report; a bad run is reported as such, never stops the others."""
    runs = find_runs(o.store, o.selectors or None, o.since, o.until)
    if not runs:
        raise ValueError(f"no runs found in {o.store} for {o.selectors or 'the whole store'}"
                         " (a run dir holds test.json and history.jsonl); see `harness ls`")
    own = engine is None
    eng = engine or make_engine(o)
    try:
        out = run_pipeline(o.store, runs, eng)
    finally:
        if own:
            eng.close()
    index = write_report(o.store, out, runs, eng.name, o.pages)
    return ReportOutcome(index, out)
