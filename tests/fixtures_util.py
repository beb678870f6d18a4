"""Shared helpers for tests that use the real RocketMQ fixtures in ../shared/fixtures.

Fixtures are discovered by glob (hidden fixtures of the same shape exist), and always copied before
anything that may write opens them.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import shutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES_ROOT = os.environ.get(
    "RMQ_FIXTURES", os.path.join(os.path.dirname(REPO_ROOT), "shared", "fixtures"))


def fixture_dirs() -> list[str]:
    """Every fixture folder (one holding store/ and read-dump.json), sorted."""
    found = glob.glob(os.path.join(FIXTURES_ROOT, "*", "*", "read-dump.json"))
    return sorted(os.path.dirname(path) for path in found)


def fixture_id(path: str) -> str:
    return os.path.relpath(path, FIXTURES_ROOT)


def load_dump(fixture: str) -> dict:
    with open(os.path.join(fixture, "read-dump.json"), encoding="utf-8") as handle:
        return json.load(handle)


def copy_store(fixture: str, destination: str) -> str:
    """Copy the fixture's store/ to `destination`/store (writable) and return that path."""
    target = os.path.join(destination, "store")
    shutil.copytree(os.path.join(fixture, "store"), target)
    for dirpath, dirnames, filenames in os.walk(target):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o644)
    return target


def store_config(fixture: str, root: str, **overrides):
    from store import StoreConfig
    return StoreConfig.from_properties(os.path.join(fixture, "store.properties"),
                                       store_path_root_dir=root, **overrides)


def dump_message_body(message: dict) -> bytes:
    if message.get("bodyBase64") is not None:
        return base64.b64decode(message["bodyBase64"])
    return (message.get("body") or "").encode("utf-8")


def tree_fingerprint(root: str) -> dict[str, tuple[str, int, int]]:
    """path -> (sha256, size, mtime_ns) of every file below `root`, to prove nothing changed."""
    result = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            path = os.path.join(dirpath, name)
            stat = os.stat(path)
            with open(path, "rb") as handle:
                digest = hashlib.sha256(handle.read()).hexdigest()
            result[os.path.relpath(path, root)] = (digest, stat.st_size, stat.st_mtime_ns)
    return result


def single_cq_file(store_root: str, topic: str, queue_id: int) -> bool:
    directory = os.path.join(store_root, "consumequeue", topic, str(queue_id))
    return os.path.isdir(directory) and len(os.listdir(directory)) == 1
