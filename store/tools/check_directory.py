"""Check a store directory, even one the engine refuses to open (`rmqstore check`).

`check_config(config)` opens the store read-only if it can (through the facade), and otherwise reports
why and checks the files anyway (`store.check.run.check_all` with no opened store). Writes nothing.
"""

from __future__ import annotations

import os

from store.check.findings import Finding, Sink
from store.check.run import check_all
from store.errors import StoreError
from store.mappedfile.mapped_file import parse_file_name
from store.message_store import MessageStore
from store.recovery.loader import resolve_store_format

__all__ = ["check_config", "config_mismatch", "short_segments"]

PAGE_BYTES = 4096


def short_segments(config) -> list[tuple[str, int]]:
    """(path, size) of every commit-log segment shorter than the configured segment size."""
    found = []
    for directory in config.commit_log_dirs:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if parse_file_name(name) is not None and os.path.isfile(path):
                size = os.path.getsize(path)
                if size < config.mapped_file_size_commit_log:
                    found.append((path, size))
    return found


def config_mismatch(config, short: list[tuple[str, int]]) -> str | None:
    """A sentence when the short segments look like a wrong mappedFileSizeCommitLog rather than
    truncation: every segment is short, by the same whole number of pages. Padding would then
    be wrong; the store's own config is the fix."""
    sizes = {size for _path, size in short}
    total = sum(1 for d in config.commit_log_dirs if os.path.isdir(d)
                for n in os.listdir(d) if parse_file_name(n) is not None)
    if len(sizes) != 1 or len(short) != total or next(iter(sizes)) % PAGE_BYTES:
        return None
    size = next(iter(sizes))
    return (f"every commit-log segment is {size} bytes, not mappedFileSizeCommitLog="
            f"{config.mapped_file_size_commit_log}: give the store's config (--config FILE with "
            f"mappedFileSizeCommitLog={size}) instead of padding")


def check_config(config, *, max_findings: int = 1000, max_records: int | None = None,
                 open_store: bool = True, progress=None) -> list[Finding]:
    """Check the store `config` points at, opening it read-only when the engine can."""
    sink = Sink(max_findings, config.store_path_root_dir)
    if not os.path.isdir(config.store_path_root_dir):
        sink.add("error", "files", config.store_path_root_dir, None, "store directory does not exist")
        return sink.result()
    store = None
    if open_store:
        try:
            store = MessageStore.open(config, read_only=True, start_services=False)
        except StoreError as exc:
            short = short_segments(config)
            mismatch = config_mismatch(config, short) if short else None
            sink.add("error", "files", config.store_path_root_dir, None,
                     f"the engine cannot open this store read-only: {exc}"
                     + (f" ({mismatch})" if mismatch else ""),
                     on_restart="DefaultMessageStore.load fails: the broker does not start",
                     repair="rmqstore recover --pad-truncated --store {store}"
                     if short and not mismatch else None)
    try:
        style = store.style if store is not None else resolve_store_format(config)
        check_all(config, style, store, sink, max_records, progress=progress)
    finally:
        if store is not None:
            store.close()
    return sink.result()
