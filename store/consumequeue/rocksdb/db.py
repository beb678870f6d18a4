"""Opening the [5.x] consume-queue RocksDB database with rocksdict (spec §13.1).

Raw mode (`Options(raw_mode=True)`): keys and values are plain bytes, laid out by
`store.codec.rocksdb_cq`. Column families `default` and `offset`; any other column family found in
the directory is opened too (RocksDB refuses an open that leaves one out).

Read-only opens use a *shadow* directory. rocksdict writes `rocksdict-config.json` into the database
directory whenever it is missing, in every access mode (read-only and secondary included; checked by
hashing the directory before and after), and a database written by RocketMQ has no such file. So a
read-only open copies the small files (CURRENT, MANIFEST, OPTIONS, WAL) and hard-links the immutable
`*.sst` files (copying when linking fails) into a private temporary directory and opens that read-only.
The store directory is never written, not even a lock. A shadow is a snapshot: `reopen` takes a new one.

Writes skip the WAL, as RocketMQ 5.3.3's (`AbstractRocksDBStorage.writeOptions`: `setDisableWAL(true)`,
used by `ConsumeQueueRocksDBStorage.batchPut`), and the database flushes its column families
atomically (`RocksDBOptionsFactory.createDBOptions`: `setAtomicFlush(true)`): units, `max` entries and
CHECKPOINT of a batch reach the SST files together or not at all. What a crash loses is the memtables
since the last flush: the surviving CHECKPOINT then says where the log must be re-dispatched from
(abnormal recovery starts at or before it), and a clean shutdown flushes every column family first
(`flush_all`). So a read-only snapshot of a live writer sees what the writer has flushed, as a
reader of a live 5.3.3 broker's database does.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from rocksdict import AccessType, Options, Rdict, WriteOptions

from store.codec.rocksdb_cq import DEFAULT_CF, OFFSET_CF
from store.errors import ConfigError

SHADOW_SKIP_NAMES = ("LOCK", "LOG", "rocksdict-config.json")
SHADOW_RETRIES = 5  # a live writer may delete or add an SST between listing and linking


def _options(create: bool) -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(create)
    options.create_missing_column_families(create)
    return options


def open_writable(path: str) -> Rdict:
    os.makedirs(path, exist_ok=True)
    names = _column_families(path)
    families = {name: _options(True) for name in names if name != DEFAULT_CF}
    families.setdefault(OFFSET_CF, _options(True))
    options = _options(True)
    options.set_atomic_flush(True)
    database = Rdict(path, options, column_families=families)
    write_options = WriteOptions()
    write_options.disable_wal = True
    database.set_write_options(write_options)    # every db.write(batch) of the store
    return database


def flush_all(database: Rdict, families: list) -> None:
    """Flush the memtables of the default column family, then of `families` (Rdict views of the
    others), waiting for each: after a WAL-less write this is what makes it durable. Units before
    the `offset` family's CHECKPOINT, so even a flush cut between the two never leaves a
    CHECKPOINT past the units on disk."""
    database.flush(True)
    for family in families:
        family.flush(True)


def open_read_only_shadow(path: str) -> tuple[Rdict, str]:
    """(database, shadow directory); the caller removes the shadow with `remove_shadow` after close."""
    last_error = None
    for _ in range(SHADOW_RETRIES):
        shadow = tempfile.mkdtemp(prefix="rmq-cq-rocksdb-")
        try:
            _fill_shadow(path, shadow)
            names = _column_families(shadow)
            if OFFSET_CF not in names:
                raise ConfigError(f"{path} has no 'offset' column family: not a consume-queue DB")
            families = {name: _options(False) for name in names if name != DEFAULT_CF}
            database = Rdict(shadow, _options(False), column_families=families,
                             access_type=AccessType.read_only())
            return database, shadow
        except FileNotFoundError as error:
            last_error = error
            remove_shadow(shadow)
        except Exception as error:
            remove_shadow(shadow)
            # A flush or compaction between the listing and the MANIFEST's copy: the copy names an
            # SST file the shadow does not have (RocksDB: "Corruption: ... No such file").
            if "No such file" not in str(error):
                raise
            last_error = error
        except BaseException:
            remove_shadow(shadow)
            raise
    raise ConfigError(f"could not snapshot the RocksDB consume queue in {path}: {last_error}")


def remove_shadow(shadow: str | None) -> None:
    if shadow and os.path.isdir(shadow):
        shutil.rmtree(shadow, ignore_errors=True)


def _fill_shadow(path: str, shadow: str) -> None:
    for name in os.listdir(path):
        source = os.path.join(path, name)
        if name in SHADOW_SKIP_NAMES or name.startswith("LOG.old") or not os.path.isfile(source):
            continue
        target = os.path.join(shadow, name)
        if name.endswith(".sst"):
            try:
                os.link(source, target)
                continue
            except OSError:
                pass  # another filesystem, or links not allowed: copy
        shutil.copyfile(source, target)


def _column_families(path: str) -> list[str]:
    if not os.path.exists(os.path.join(path, "CURRENT")):
        return [DEFAULT_CF]
    return list(Rdict.list_cf(path, _options(False)))
