"""The pipeline's tables, with explicit schemas (Arrow for Python, DDL for Spark).

One ``events`` dataset holds every run's history, Parquet partitioned by ``protocol`` and
``date``; files hold whole runs, sorted by (run, index), so a per-run pass is a plain map with
no shuffle. Besides op rows (``rec = "op"``) each run has one ``rec = "run"`` row (its read
status as JSON in ``value``) and one ``rec = "fault"`` row per fault window: ingest then
needs one pass and one output, and the small tables are read back with a filter.
"""

from __future__ import annotations

import pyarrow as pa

EVENTS = pa.schema([
    ("rec", pa.string()),          # op | run | fault
    ("run_id", pa.string()),       # "<test>/<run-id>"
    ("test", pa.string()),
    ("nemesis", pa.string()),
    ("index", pa.int64()),
    ("time", pa.int64()),          # ns since run start
    ("process", pa.string()),      # "3" or "nemesis"
    ("type", pa.string()),         # invoke | ok | fail | info
    ("f", pa.string()),
    ("value", pa.string()),        # the op's value as JSON text
    ("node", pa.string()),
    ("error", pa.string()),
    ("key", pa.string()),          # kv ops: JSON of value[0]
    ("val", pa.string()),          # kv ops: JSON of the data value (write v, cas new, read result)
    ("outcome", pa.string()),      # invoke rows: the completion's type (null: never completed)
    ("invoke_index", pa.int64()),  # completion rows: their invocation
    ("invoke_time", pa.int64()),
    ("latency_ns", pa.int64()),
    ("phase", pa.string()),        # healthy | fault | recovering (at invocation)
    ("fault", pa.string()),        # fault kind(s) active, or just healed
    ("fault_id", pa.int32()),
    ("since_heal_ns", pa.int64()),  # completion time - end of the last fault, if invoked after it
    ("protocol", pa.string()),     # partition column
    ("date", pa.string()),         # partition column, YYYY-MM-DD of the run's start
])

EVENTS_DDL = ", ".join(
    f"`{f.name}` {_t}" for f, _t in zip(EVENTS, [
        "string", "string", "string", "string", "bigint", "bigint", "string", "string",
        "string", "string", "string", "string", "string", "string", "string", "bigint",
        "bigint", "bigint", "string", "string", "int", "bigint", "string", "string"], strict=True)
)

#: per (run, checker) results of the pipeline's own checkers
RESULTS = pa.schema([
    ("run_id", pa.string()),
    ("checker", pa.string()),
    ("source", pa.string()),       # "pipeline" (checked by the report) | "harness" (results.json)
    ("valid", pa.string()),        # "true" | "false" | "unknown"
    ("note", pa.string()),
    ("anomalies", pa.string()),    # JSON list of Anomaly.to_json()
    ("stats", pa.string()),        # JSON object
    ("parts", pa.int64()),
    ("ops", pa.int64()),
    ("elapsed_s", pa.float64()),
    ("examined", pa.string()),     # JSON {leaf path ("" = the checker itself): {count: n}}
])

RESULTS_DDL = ("run_id string, checker string, source string, valid string, note string, "
               "anomalies string, stats string, parts bigint, ops bigint, elapsed_s double, "
               "examined string")


def validity_str(v: object) -> str:
    """Validity as a column value: Parquet has no three-valued bool."""
    return {True: "true", False: "false"}.get(v, "unknown")  # type: ignore[call-overload]


def validity_of(s: str | None) -> bool | str:
    return {"true": True, "false": False}.get(s or "", "unknown")
