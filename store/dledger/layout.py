"""Where a DLedger commit log lives, and its small text files.

RocketMQ builds DLedger's config from the broker's (`DLedgerCommitLog` constructor): `storeBaseDir` =
`storePathRootDir`, `selfId` = `dLegerSelfId`, `dataStorePath` = `storePathDLedgerCommitLog` (null:
`<storeBaseDir>/dledger-<selfId>/data`, `DLedgerConfig.getDataStorePath`), index in
`dledger-<selfId>/index` (`getIndexStorePath`), `mappedFileSizeForEntryData` =
`mappedFileSizeCommitLog`; the index file size is DLedger's default (`DEFAULT_INDEX_FILE_BYTES`).

Which log a store uses: DLedger's when `enableDLegerCommitLog` is true; otherwise, detection: no
commit-log segment but exactly one `dledger-*/data` directory (a store opened without its broker
config; a broker started with the flag off on such a directory would serve an empty new log, which
tells an operator nothing). A broker that had a commit log before DLedger was enabled reads both
(`dividedCommitlogOffset`); this engine does not, and says so.

`checkpoint` (`DLedgerMmapFileStore.persistCheckPoint`) and `currterm` (`MemberState.persistState`)
are Java properties text: `committedIndex`, `endIndex`; `currTerm`, `voteLeader`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from store.codec import java_properties
from store.dledger.entry_codec import DEFAULT_INDEX_FILE_BYTES
from store.errors import ConfigError
from store.mappedfile.mapped_file import parse_file_name

DLEDGER_DIR_PREFIX = "dledger-"


@dataclass(frozen=True)
class DLedgerLayout:
    root: str                   # storePathRootDir
    self_id: str                # dLegerSelfId
    base_dir: str               # <root>/dledger-<selfId>
    data_dir: str
    index_dir: str
    data_file_bytes: int        # mappedFileSizeCommitLog
    index_file_bytes: int
    peers: int | None           # members in dLegerPeers, None when the config does not say

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.base_dir, "checkpoint")

    @property
    def currterm_path(self) -> str:
        return os.path.join(self.base_dir, "currterm")


def _segment_names(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return sorted(n for n in names if parse_file_name(n) is not None
                  and os.path.isfile(os.path.join(directory, n)))


def dledger_dirs(root: str) -> list[str]:
    """Names of `dledger-*` directories of `root` that hold a `data/` directory."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    return [n for n in names if n.startswith(DLEDGER_DIR_PREFIX)
            and os.path.isdir(os.path.join(root, n, "data"))]


def find_dledger(config) -> DLedgerLayout | None:
    """The DLedger layout of the store `config` names, or None when it keeps a plain commit log."""
    root = config.store_path_root_dir
    has_commit_log = any(_segment_names(d) for d in config.commit_log_dirs)
    self_id = (config.d_leger_self_id or "").strip()
    if config.enable_d_leger_commit_log:
        if not self_id:
            raise ConfigError("enableDLegerCommitLog=true needs dLegerSelfId (the DLedger log is "
                              "<storePathRootDir>/dledger-<dLegerSelfId>)")
    else:
        if has_commit_log:
            return None
        found = dledger_dirs(root)
        if self_id and f"{DLEDGER_DIR_PREFIX}{self_id}" in found:
            found = [f"{DLEDGER_DIR_PREFIX}{self_id}"]
        if not found:
            return None
        if len(found) > 1:
            raise ConfigError(f"{root} holds several DLedger logs ({', '.join(found)}): set "
                              f"dLegerSelfId to choose one")
        self_id = found[0][len(DLEDGER_DIR_PREFIX):]
    base = os.path.join(root, DLEDGER_DIR_PREFIX + self_id)
    data_dir = (config.store_path_d_ledger_commit_log or "").strip() or os.path.join(base, "data")
    if has_commit_log and _segment_names(data_dir):
        raise ConfigError(f"{root} holds both a commit log ({config.commit_log_dir}) and a DLedger "
                          f"log ({data_dir}): a broker switched to DLedger reads the old log below "
                          f"dividedCommitlogOffset; this engine does not read such mixed stores")
    peers_text = config.d_leger_peers
    peers = None if peers_text is None else len([p for p in peers_text.split(";") if p.strip()])
    return DLedgerLayout(root, self_id, base, data_dir, os.path.join(base, "index"),
                         config.mapped_file_size_commit_log, DEFAULT_INDEX_FILE_BYTES, peers)


def find_data_dir(root: str) -> str | None:
    """`<root>/dledger-*/data` when there is exactly one (format detection, no config)."""
    found = dledger_dirs(root)
    return os.path.join(root, found[0], "data") if len(found) == 1 else None


def read_properties(path: str) -> dict[str, str] | None:
    """A DLedger properties file (`IOUtils.file2String` + `string2Properties`), None if absent."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read(1 << 16)
    except FileNotFoundError:
        return None
    return java_properties.load(raw.decode("latin-1"))


def read_long(properties: dict[str, str] | None, key: str) -> int | None:
    """`Long.valueOf(properties.get(key).trim())`, None when absent, empty or not a number."""
    if not properties or key not in properties:
        return None
    text = properties[key].strip()
    try:
        return int(text)
    except ValueError:
        return None


def log_dirs(config) -> tuple[str, ...]:
    """The directories holding the log's files: DLedger's data directory on a DLedger store, else
    the commit-log directories (for raw readers: records are at the same offsets in both)."""
    try:
        layout = find_dledger(config)
    except ConfigError:
        layout = None
    return (layout.data_dir,) if layout is not None else config.commit_log_dirs
