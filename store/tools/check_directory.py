"""Check a store directory, even one the engine refuses to open (`rmqstore check`).

`check_config(config)` opens the store read-only if it can (through the facade), and otherwise reports
why and checks the files anyway (`store.check.run.check_all` with no opened store). Writes nothing.
"""

from __future__ import annotations

import os

from store.check.findings import Finding, Sink
from store.check.run import check_all
from store.errors import StoreError
from store.message_store import MessageStore
from store.recovery.loader import resolve_store_format

__all__ = ["check_config"]


def check_config(config, *, max_findings: int = 1000, max_records: int | None = None,
                 open_store: bool = True) -> list[Finding]:
    """Check the store `config` points at, opening it read-only when the engine can."""
    sink = Sink(max_findings)
    if not os.path.isdir(config.store_path_root_dir):
        sink.add("error", "files", config.store_path_root_dir, None, "store directory does not exist")
        return sink.result()
    store = None
    if open_store:
        try:
            store = MessageStore.open(config, read_only=True, start_services=False)
        except StoreError as exc:
            sink.add("error", "files", config.store_path_root_dir, None,
                     f"the engine cannot open this store read-only: {exc}")
    try:
        style = store.style if store is not None else resolve_store_format(config)
        check_all(config, style, store, sink, max_records)
    finally:
        if store is not None:
            store.close()
    return sink.result()
