"""Options of the Spark data sources, read the same way by the batch and the streaming readers.

Options arrive as strings (`spark.read.option(...)`); these turn them into the store root, booleans,
the requested columns (checked against the declared schema) and the commit-log row filter.
"""

from __future__ import annotations

import os

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from store.errors import ConfigError
from store.pipeline.commitlog_decoder import RowFilter

__all__ = ["bool_option", "commitlog_row_filter", "requested_columns", "store_dir_option"]


def store_dir_option(options) -> str:
    path = options.get("path")
    if not path:
        raise ConfigError("load(store_dir) needs the store root directory")
    return os.fspath(path)


def bool_option(options, name: str, default: bool = False) -> bool:
    return str(options.get(name, str(default))).strip().lower() in ("1", "true", "yes")


def requested_columns(schema: StructType, arrow_schema: pa.Schema) -> list[str]:
    """Requested columns, checked against the declared types so the yielded batches match exactly."""
    wanted = to_arrow_schema(schema, timezone="UTC")
    for field in wanted:
        if field.name not in arrow_schema.names:
            raise ConfigError(f"unknown column {field.name!r}; known: {arrow_schema.names}")
        if not arrow_schema.field(field.name).type.equals(field.type):
            raise ConfigError(f"column {field.name!r} is {arrow_schema.field(field.name).type}, not {field.type}")
    return list(wanted.names)


def commitlog_row_filter(options) -> RowFilter:
    topics = options.get("topics")
    low, high = options.get("storeTimestampMin"), options.get("storeTimestampMax")
    return RowFilter(
        None if not topics else frozenset(t.strip() for t in topics.split(",") if t.strip()),
        None if low in (None, "") else int(low),
        None if high in (None, "") else int(high),
    )
