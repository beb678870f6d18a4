"""One place that builds the pipeline's SparkSession.

* master: the `master` argument, else `SPARK_MASTER`, else `local[2]` (the machine is shared).
* `PYSPARK_PYTHON` / `PYSPARK_DRIVER_PYTHON` default to the current interpreter, so executors import
  the same `store` package with the same numpy/pyarrow.
* Spark's startup noise is tamed: our `log4j2.properties` (errors only), no UI, no progress bar on the
  console (the CLI draws its own), `setLogLevel("ERROR")`.
* `spark.sql.python.filterPushdown.enabled` is on so `pushFilters=true` readers can be used.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

DEFAULT_MASTER = "local[2]"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def resolve_master(master: str | None = None) -> str:
    return master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and this checkout (unless already set)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    root = str(Path(__file__).resolve().parents[2])
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep) if os.environ.get("PYTHONPATH") else []
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])


# PySpark 4.x warns on every pandas conversion that pandas 3 is "not yet fully supported"; the pipeline
# converts only small aggregates and tests their values, so these warnings carry no information here.
QUIET_WARNINGS = (
    ("ignore", "PySpark does not yet fully support pandas", FutureWarning),
    ("ignore", "The copy keyword is deprecated", Warning),
)


def tame_python_warnings() -> None:
    for action, message, category in QUIET_WARNINGS:
        warnings.filterwarnings(action, message=message, category=category)


def build_session(master: str | None = None, app_name: str = "rmqstore", *, extra_conf: dict | None = None):
    """Get or create the session with the pipeline's settings and register the data sources."""
    prepare_environment()
    tame_python_warnings()
    from pyspark.sql import SparkSession

    from store.pipeline.spark_sources import register_data_sources

    java_options = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} -Dlog4j.configurationFile=file:{LOG4J_CONFIG}"
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.sql.python.filterPushdown.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": java_options,
        "spark.executor.extraJavaOptions": java_options,
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.python.worker.reuse": "true",
    }
    conf.update(extra_conf or {})
    builder = SparkSession.builder.master(resolve_master(master)).appName(app_name)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_sources(spark)
    return spark
