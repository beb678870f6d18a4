"""`spark.read.format("rocketmq-dledger").load(store_dir)`: one row per DLedger entry of a store
with `enableDLegerCommitLog=true` (`<store>/dledger-<selfId>/data/`, layout in `store.dledger`).

Columns (`store.pipeline.dledger_scan.DLEDGER_SCHEMA`): the data file, the entry's index, term, pos,
size, magic, channel, chainCrc, bodyCrc, bodySize and `commit_log_offset` (pos + 48, RocketMQ's
offset of the record inside). The records themselves come from `rocketmq-commitlog`, which reads a
DLedger store's entries transparently. One partition per data file; each walks its file with
`DLedgerMmapFileStore.recover`'s rules. A store without a DLedger log gives no rows. Columns can be
pruned with `.schema(...)`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from store.pipeline.dledger_scan import DLEDGER_SCHEMA, dledger_entry_batch
from store.pipeline.layout import list_commit_log
from store.pipeline.source_options import requested_columns, store_dir_option


class _Partition(InputPartition):
    pass


class DLedgerDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-dledger"

    def schema(self):
        return from_arrow_schema(DLEDGER_SCHEMA)

    def reader(self, schema: StructType) -> DataSourceReader:
        return DLedgerReader(self.options, schema)


class DLedgerReader(DataSourceReader):
    def __init__(self, options, schema: StructType):
        self.store_dir = store_dir_option(options)
        self.columns = requested_columns(schema, DLEDGER_SCHEMA)
        self.files = [(s.path, s.file_from_offset) for s in list_commit_log(self.store_dir)
                      if s.dledger]

    def partitions(self):
        return [_Partition(item) for item in self.files]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        path, file_from_offset = partition.value
        yield dledger_entry_batch(path, file_from_offset, self.columns)
