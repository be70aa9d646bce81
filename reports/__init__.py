"""Consistency reports: a PySpark pipeline over the run store, HTML with plots, JUnit XML.

Modules, in the order data flows: ``discover`` (which runs) -> ``ingest`` (history -> event
rows, one ordered pass per run) -> ``spark_engine`` / ``local_engine`` (the two drivers) with
``checks`` (Python checkers, per run or per key), ``rerun`` (the protocols' own checkers
from the ``harness.protocols`` registry, re-run per run from node evidence read by path) and
``aggregate`` (cross-run tables, stored-vs-re-run agreement) ->
``pipeline`` (incremental dataset, outputs) -> ``html`` + ``plots`` + ``junit`` -> ``cli`` /
``serve``. See DESIGN.md, "Reports", and docs/reports.md.
"""
