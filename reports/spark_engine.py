"""The Spark engine: the same ingest and checkers, driven by Spark; aggregates in Spark SQL.

Where the time goes, and why the job is shaped this way (see DESIGN.md, Reports):

- Ingest maps over *runs* (a small DataFrame of run slices, each ~64 MB of history sharing
  one protocol and date) with ``mapInArrow``; each task writes one Parquet file of whole runs
  in (run, index) order under ``protocol=/date=`` with pyarrow (Spark's row-based writer
  was most of the ingest time). No shuffle, no directory per run.
- Every Parquet row group holds whole runs (``ingest.write_slice``), so the Python checkers
  need no ``groupBy`` and no shuffle: each task is a list of row groups (planned on the
  driver from the footers, balanced by rows, a few tasks per core: ``TASKS_PER_CORE``) that
  the Python worker reads itself with pyarrow (``reports.scan`` says why, with figures: not
  Spark's own Parquet scan and Arrow stream, whose JVM work competed with the checker).
- The protocols' node-evidence checkers (``reports.rerun``) are a ``mapInArrow`` over a small
  DataFrame of run paths, runs dealt by size: each executor reads its runs' dirs.
- Every aggregate, and the join-shaped ``phantom-read`` checker, is Spark SQL's own
  operators (partial aggregation before the exchange, so only small states move; the
  phantom check groups by a 64-bit hash so its exchange is ~10 bytes a value).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from reports import aggregate as agg
from reports import scan
from reports.checks import PY_CHECKERS, PipelineChecker
from reports.discover import RunInfo
from reports.ingest import ingest_slices, run_info_from_dict, write_slice
from reports.local_engine import SMALL_COLUMNS
from reports.pipeline import Analysis, finish_analysis, status_rows
from reports.rerun import rerun_batches, rerun_slices
from reports.schema import EVENTS_DDL, RESULTS, RESULTS_DDL

PCTS = (0.5, 0.95, 0.99)
#: tasks per core for the scans and the re-run: enough for the scheduler to balance
TASKS_PER_CORE = 3


def java_problem() -> str | None:
    """Why Spark cannot start here for want of Java, or None when a java is found where
    pyspark looks for one ($JAVA_HOME/bin/java when JAVA_HOME is set, else java on PATH)."""
    import shutil

    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if os.access(java, os.X_OK) and java.is_file():
            return None
        where = f"JAVA_HOME is {home}, which has no bin/java"
    elif shutil.which("java"):
        return None
    else:
        where = "there is no java on PATH and JAVA_HOME is not set"
    return (f"the spark engine needs Java (a JRE, 17 or newer) and {where}. Install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless) or point JAVA_HOME at "
            "one, or run without Spark: harness report --engine local (one process, the same "
            "checks and tables; fine for a few hundred runs)")


def default_master() -> str:
    """local[n] sized for this machine: every core, since the job is CPU-bound Python + JVM."""
    return f"local[{max(1, os.cpu_count() or 1)}]"


def session(master: str | None = None, conf: dict[str, str] | None = None,
            app: str = "harness-report") -> Any:
    """One Spark session per pipeline run; ``conf`` takes the usual ``spark.*`` settings."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = str(Path(__file__).resolve().parent.parent)
    pp = os.environ.get("PYTHONPATH", "")
    if root not in pp.split(os.pathsep):  # workers import reports/, checkers/, harness/
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, pp) if p)
    import warnings

    from pyspark.sql import SparkSession

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")

    b = (SparkSession.builder.appName(app).master(master or default_master())
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))
         .config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "65536")
         .config("spark.driver.memory", "3g")
         .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
         .config("spark.python.worker.reuse", "true"))
    for k, v in (conf or {}).items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    if not s.sparkContext.master.startswith("local"):
        # a cluster's executors do not see this process's PYTHONPATH: ship the project
        s.sparkContext.addPyFile(str(project_zip()))
    return s


#: the project packages executors import (the registry pulls in nodes/ and harness/)
SHIPPED_PACKAGES = ("reports", "checkers", "harness", "nodes", "faults")


def project_zip(dest: Path | None = None) -> Path:
    """A zip of the project's packages for ``SparkContext.addPyFile`` (sources only).

    Executors put it first on their ``sys.path``; third-party libraries (pyarrow, pandas,
    aiohttp, ...) must already be in the executors' Python, ``PYSPARK_PYTHON`` (by default
    this interpreter: the same venv path on every worker).
    """
    import atexit
    import shutil
    import tempfile
    import zipfile

    root = Path(__file__).resolve().parent.parent
    if dest is None:
        tmp = tempfile.mkdtemp(prefix="harness-report-")
        atexit.register(shutil.rmtree, tmp, True)
        dest = Path(tmp) / "harness-pkgs.zip"
    out = dest
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for pkg in SHIPPED_PACKAGES:
            for f in sorted((root / pkg).rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                    z.write(f, f.relative_to(root).as_posix())
    return out


class SparkEngine:
    name = "spark"

    def __init__(self, master: str | None = None, conf: dict[str, str] | None = None,
                 recovery_window_ns: int | None = None, spark: Any = None) -> None:
        self._own = spark is None
        self._user_conf = set(conf or {})
        self.spark = spark or session(master, conf)
        self.recovery_window_ns = recovery_window_ns

    def close(self) -> None:
        if self._own:
            self.spark.stop()

    # --- ingest ----------------------------------------------------------------------
    def ingest(self, runs: list[RunInfo], events_dir: Path, append: bool) -> None:
        """History -> events: one Spark task per slice of runs sharing a (protocol, date).

        Each task reads its runs' histories and writes one Parquet file of whole runs with
        pyarrow (``ingest.write_slice``); only a one-line summary per file comes back. On a
        cluster the store must be on a filesystem every executor sees (it already must be:
        the executors read the histories).
        """
        par = self.spark.sparkContext.defaultParallelism
        slices = ingest_slices(runs, par)
        if not slices:
            return
        rw = self.recovery_window_ns
        out = str(events_dir)
        payload = [json.dumps([r.__dict__ for r in sl], default=repr) for sl in slices]
        df = self._task_frame(payload)

        def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            kw = {} if rw is None else {"recovery_window_ns": rw}
            for b in batches:
                for s in b.column(0).to_pylist():
                    rs = [run_info_from_dict(d) for d in json.loads(s)]
                    w = write_slice(rs, out, **kw)
                    yield pa.RecordBatch.from_pylist([w])

        written = df.mapInArrow(write, "file string, rows bigint, runs bigint").collect()
        if sum(r["runs"] for r in written) != len(runs):
            raise RuntimeError(f"ingest wrote {sum(r['runs'] for r in written)} of {len(runs)} "
                               "runs; rerun `harness report` (the manifest was not updated)")

    # --- analysis --------------------------------------------------------------------
    def _events(self, runs: list[RunInfo], events_dir: Path) -> Any:
        from pyspark.sql import functions as F

        # The JVM scans (aggregates, phantom reads, small tables) group by with a shuffle, so
        # splits may fall anywhere: aim for a few tasks per core (the scheduler then balances
        # uneven files); never below 4 MB.
        for k, v in (("spark.sql.files.minPartitionNum", str(self._parts)),
                     ("spark.sql.files.maxPartitionBytes", str(128 << 20)),
                     ("spark.sql.files.openCostInBytes", str(4 << 20))):
            if k not in self._user_conf:  # --conf wins
                self.spark.conf.set(k, v)
        ev = self.spark.read.schema(EVENTS_DDL).parquet(str(events_dir))
        ids = [r.run_id for r in runs]
        protos = sorted({r.protocol for r in runs})
        dates = sorted({r.date for r in runs})
        # partition pruning first, then the run filter (a broadcast semi-join when many)
        ev = ev.where(F.col("protocol").isin(protos) & F.col("date").isin(dates))
        if len(ids) <= 2000:
            return ev.where(F.col("run_id").isin(ids))
        sel = self.spark.createDataFrame([(i,) for i in ids], "run_id string")
        return ev.join(F.broadcast(sel), "run_id", "left_semi")

    def analyse(self, runs: list[RunInfo], events_dir: Path) -> Analysis:
        """Status, Python checkers, SQL checkers and aggregates: one Spark job after another.

        (Submitting them concurrently from threads was measured slower on 2 cores: the
        Python checker job and the JVM aggregates then fight for the same cores.)
        """
        timings: dict[str, float] = {}

        def timed(name: str, fn: Any) -> Any:
            t0 = time.perf_counter()
            out = fn()
            timings[name] = round(time.perf_counter() - t0, 3)
            return out

        ev = self._events(runs, events_dir)
        small = timed("small_s", lambda: ev.where("rec <> 'op'").select(*SMALL_COLUMNS)
                      .toPandas())
        results = [timed(f"check_{chk.name}_s",
                         lambda chk=chk: self.py_check(runs, events_dir, chk))
                   for chk in PY_CHECKERS]
        results.append(timed("rerun_s", lambda: self.rerun(runs)))
        res = pd.concat(results, ignore_index=True)
        tables = timed("aggregates_s", lambda: self.aggregates(ev))
        tables["recovery"] = agg.recovery(small[small["rec"] == "fault"], tables.pop("first_ok"))
        stats = tables["run_stats"]
        kv_ids = sorted(stats.loc[stats.pop("kv_reads") > 0, "run_id"])
        phantoms = agg.first_phantoms(timed("phantoms_s", lambda: self.phantom_reads(ev)))
        status = status_rows(small[small["rec"] == "run"])
        an = finish_analysis(status, res, phantoms, kv_ids, tables)
        an.timings = timings
        return an

    def rerun(self, runs: list[RunInfo]) -> pd.DataFrame:
        """The protocols' registry checkers per run (``reports.rerun``): one row per slice of
        runs, several slices per core, each executor reading its runs' dirs by path."""
        return self._results(rerun_slices(runs, self._parts), rerun_batches)

    def py_check(self, runs: list[RunInfo], events_dir: Path, chk: PipelineChecker
                 ) -> pd.DataFrame:
        """A Python checker over contiguous runs: a ``mapInArrow`` over row-group tasks that
        the Python worker reads itself (``reports.scan``: why), no shuffle."""
        return self._results(scan.plan(events_dir, runs, self._parts),
                             lambda it: scan.check_tasks(it, chk))

    @property
    def _parts(self) -> int:
        """Tasks per stage: a few per core (``TASKS_PER_CORE``), so the scheduler can balance
        uneven ones."""
        return TASKS_PER_CORE * self.spark.sparkContext.defaultParallelism

    def _task_frame(self, tasks: list[str]) -> Any:
        """A DataFrame of one JSON task per row and per partition: Spark runs each as a task
        (the functions mapped over it read the task from the first column)."""
        return self.spark.sparkContext.parallelize(tasks, max(1, len(tasks))) \
            .map(lambda s: (s,)).toDF("task string")

    def _results(self, tasks: list[str], fn: Any) -> pd.DataFrame:
        """RESULTS rows from ``fn`` (a ``mapInArrow`` function) over JSON ``tasks``."""
        if not tasks:
            return RESULTS.empty_table().to_pandas()
        return self._task_frame(tasks).mapInArrow(fn, RESULTS_DDL).toPandas()

    def aggregates(self, ev: Any) -> dict[str, pd.DataFrame]:
        from pyspark.sql import functions as F

        c = ev.where("rec = 'op' AND latency_ns IS NOT NULL")
        # one pass for latency and availability: both group by (protocol, phase, fault)
        la = (c.withColumn("fault", F.coalesce("fault", F.lit("none")))
              .groupBy("protocol", "phase", "fault")
              .agg(F.percentile_approx("latency_ns", list(PCTS), 10000).alias("q"),
                   F.count("*").alias("count"),
                   F.sum((F.col("type") == "ok").cast("long")).alias("ok"),
                   F.sum(F.coalesce((F.col("type") == "fail")
                                    & F.col("error").isin(list(agg.PRECONDITION_ERRORS)),
                                    F.lit(False)).cast("long"))
                   .alias("precondition"))).toPandas()
        for i, p in enumerate(PCTS):
            la[f"p{int(p * 100)}_ms"] = la["q"].map(lambda q, i=i: q[i] / 1e6)
        lat = la[["protocol", "phase", "fault", *[f"p{int(p * 100)}_ms" for p in PCTS], "count"]]
        avail = agg.availability_columns(la[["protocol", "phase", "fault", "ok", "precondition",
                                             "count"]])
        first = (c.where("phase <> 'fault' AND type = 'ok' AND since_heal_ns IS NOT NULL")
                 .groupBy("run_id", "fault_id").agg(F.min("since_heal_ns").alias("recovery_ns")))
        stats = (c.groupBy("run_id")
                 .agg(F.count("*").alias("completions"),
                      F.sum((F.col("type") == "ok").cast("long")).alias("ok"),
                      F.percentile_approx("latency_ns", [0.5, 0.99], 10000).alias("q"),
                      F.sum(F.expr("CAST(f = 'read' AND key IS NOT NULL AS BIGINT)"))
                      .alias("kv_reads"))
                 .select("run_id", "completions", "ok", (F.col("q")[0] / 1e6).alias("p50_ms"),
                         (F.col("q")[1] / 1e6).alias("p99_ms"), "kv_reads"))
        return {"latency": lat, "availability": avail, "first_ok": first.toPandas(),
                "run_stats": stats.toPandas()}

    def phantom_reads(self, ev: Any) -> pd.DataFrame:
        """The join-shaped checker in Spark SQL, shaped so the exchange is small.

        Phase 1 groups by a 64-bit hash of (run, key, value) and keeps only flags: the
        exchange moves ~10 bytes per distinct value after partial aggregation. Phase 2
        broadcast-joins the (rare) phantom hashes back to the reads for the witnesses, with
        an exact re-check of (run, key, value), so a hash collision can only hide a phantom
        with probability ~n^2/2^64, never invent one.
        """
        from pyspark.sql import functions as F

        ops = ev.where("rec = 'op' AND key IS NOT NULL AND val IS NOT NULL")
        h = F.xxhash64("run_id", "key", "val")
        is_w = F.expr("type = 'invoke' AND f IN ('write', 'cas') "
                      "AND (outcome IS NULL OR outcome <> 'fail')")
        is_r = F.expr("type = 'ok' AND f = 'read'")
        flags = (ops.select(h.alias("h"), is_w.alias("w"), is_r.alias("r"))
                 .where("w OR r").groupBy("h")
                 .agg(F.max("w").alias("written"), F.max("r").alias("read"))
                 .where("read AND NOT written").select("h"))
        reads = ops.where(is_r).select(h.alias("h"), "run_id", "key", "val", "index", "time",
                                       "process", "node")
        ph = reads.join(F.broadcast(flags.limit(100_000)), "h", "left_semi").drop("h")
        return ph.toPandas()
