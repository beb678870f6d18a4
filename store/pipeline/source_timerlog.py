"""`spark.read.format("rocketmq-timerlog").load(store_dir)`: one row per unit of a 5.x store's timer
log (`<store>/timerlog/`, layout in `store.timer.codec`).

The driver plans with the engine's own walk (`store.timer.timer_log.scan_units`, counts only): the
log is the units of each file up to its first invalid one, a BLANK ends a file, an invalid unit ends
the log (later files are not part of it). One partition per file; each decodes exactly the planned
units. Options: `mappedFileSizeTimerLog` (bytes, default RocketMQ's 104857600; a store with another
size must say so: files of another size are refused), `timerPrecisionMs` (default 1000, for
`slot_index`). Columns can be pruned with `.schema(...)`. A store without `timerlog/` gives no rows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from store.errors import ConfigError
from store.pipeline.source_options import requested_columns, store_dir_option
from store.timer.codec import UNIT_DTYPE, UNIT_SIZE, WHEEL_SLOTS
from store.timer.timer_log import open_timer_log, scan_units

DEFAULT_FILE_SIZE_BYTES = 104_857_600          # MessageStoreConfig.mappedFileSizeTimerLog
DEFAULT_PRECISION_MS = 1000                    # MessageStoreConfig.timerPrecisionMs

TIMERLOG_COLUMNS: dict[str, pa.DataType] = {
    "file_name": pa.string(),
    "pos": pa.int64(),                         # timer-log offset (file_from_offset + position)
    "size": pa.int32(),
    "prev_pos": pa.int64(),
    "magic": pa.int32(),
    "curr_write_time_ms": pa.int64(),
    "delay_ms": pa.int32(),
    "due_time_ms": pa.int64(),
    "slot_index": pa.int32(),
    "offset_py": pa.int64(),
    "size_py": pa.int32(),
    "topic_hash": pa.int32(),
    "reserved": pa.int64(),
}
TIMERLOG_SCHEMA = pa.schema(list(TIMERLOG_COLUMNS.items()))


class _Partition(InputPartition):
    pass


def _int_option(options, name: str, default: int) -> int:
    text = options.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"option {name} must be an integer, not {text!r}") from None
    if value <= 0:
        raise ConfigError(f"option {name} must be positive, not {value}")
    return value


def plan_timer_log(store_dir: str, file_size_bytes: int) -> list[tuple[str, int, int]]:
    """(path, file_from_offset, units) of every file that is part of the log, in order."""
    queue = open_timer_log(store_dir, file_size_bytes)
    try:
        scan = scan_units(queue, keep_units=False)
        directory = os.path.join(store_dir, "timerlog")
        return [(os.path.join(directory, f.name), f.file_from_offset, f.units) for f in scan.files]
    finally:
        queue.close()


def timer_log_batch(path: str, file_from_offset: int, units: int, *, precision_ms: int,
                    columns: list[str] | None = None) -> pa.RecordBatch:
    """The first `units` units of one timer-log file as an Arrow batch of TIMERLOG_SCHEMA."""
    with open(path, "rb") as handle:
        data = handle.read(units * UNIT_SIZE)
    rows = np.frombuffer(data, dtype=UNIT_DTYPE, count=units)
    due = rows["curr_write_time_ms"].astype(np.int64) + rows["delay_ms"].astype(np.int64)
    values = {
        "file_name": pa.array([os.path.basename(path)] * units, pa.string()),
        "pos": file_from_offset + np.arange(units, dtype=np.int64) * UNIT_SIZE,
        "due_time_ms": due,
        "slot_index": (due // precision_ms % WHEEL_SLOTS).astype(np.int32),
    }
    for name in ("size", "prev_pos", "magic", "curr_write_time_ms", "delay_ms", "offset_py",
                 "size_py", "topic_hash", "reserved"):
        values[name] = rows[name].astype(TIMERLOG_COLUMNS[name].to_pandas_dtype())
    names = columns or TIMERLOG_SCHEMA.names
    return pa.RecordBatch.from_arrays([pa.array(values[n], TIMERLOG_COLUMNS[n]) for n in names],
                                      schema=pa.schema([(n, TIMERLOG_COLUMNS[n]) for n in names]))


class TimerLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-timerlog"

    def schema(self):
        return from_arrow_schema(TIMERLOG_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return TimerLogReader(self.options, schema)


class TimerLogReader(DataSourceReader):
    def __init__(self, options, schema: StructType):
        self.store_dir = store_dir_option(options)
        self.columns = requested_columns(schema, TIMERLOG_SCHEMA)
        self.file_size_bytes = _int_option(options, "mappedFileSizeTimerLog", DEFAULT_FILE_SIZE_BYTES)
        self.precision_ms = _int_option(options, "timerPrecisionMs", DEFAULT_PRECISION_MS)
        self.plan = plan_timer_log(self.store_dir, self.file_size_bytes)     # once, on the driver

    def partitions(self):
        return [_Partition(item) for item in self.plan if item[2] > 0]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        path, file_from_offset, units = partition.value
        yield timer_log_batch(path, file_from_offset, units, precision_ms=self.precision_ms,
                              columns=self.columns)
