"""Write the fuzz seed corpus, tests/data/kernel_corpus/, from the real-RocketMQ fixtures.

Each seed is a short run of consecutive commit-log bytes cut from a fixture's segment at record
boundaries: one to three whole records from the start, the middle and the end of every segment, and
the last record with the 64 bytes after it (a BLANK filler, zeros, or a torn record in the crash
fixtures). The fixtures hold only v1 records with IPv4 hosts, so a few synthetic seeds (v2 topics, IPv6
hosts, empty and longest fields) made with the kernel's own encoder are added, named `synthetic-*`.
Deterministic: running it again writes the same files. Run from the repository root:

    python3 -m tests.kernel_fuzz.make_corpus
"""

from __future__ import annotations

import glob
import os

from store import kernel

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_DIR = os.path.join(REPO_ROOT, "tests", "data", "kernel_corpus")
FIXTURES = os.path.join(REPO_ROOT, "tests", "data", "fixtures")
_TAIL_BYTES = 64


def _segment_seeds(path: str) -> dict[str, bytes]:
    buf = open(path, "rb").read()
    out = kernel.scan_buffer(len(buf) // 64 + 1)
    count, stop, _, _ = kernel._scan_py(buf, 0, len(buf), True, out)
    rows = out[:count]
    version, fixture = path.split(os.sep)[-5], path.split(os.sep)[-4]
    name = f"{version.replace('rocketmq-', '')}-{fixture}-{os.path.basename(path)[-6:]}"
    seeds = {}
    if count == 0:
        return seeds
    positions = rows[:, kernel.COL["pos"]].tolist() + [stop]
    for index, run in ((0, 1), (1, 3), (count // 3, 2), (count // 2, 1), (2 * count // 3, 3),
                       (count - 2, 2)):
        index = max(0, min(index, count - 1))
        end = min(index + run, count)
        seeds[f"{name}-{positions[index]:05d}x{end - index}.bin"] = buf[positions[index]:positions[end]]
    last = positions[count - 1]
    seeds[f"{name}-{last:05d}-tail.bin"] = buf[last:stop + _TAIL_BYTES]
    return seeds


def _synthetic_seeds() -> dict[str, bytes]:
    def record(topic: bytes, properties: bytes, version: int, born: bytes, store: bytes,
               body: bytes, sys_flag: int = 0) -> bytes:
        sys_flag |= (0x10 if len(born) == 20 else 0) | (0x20 if len(store) == 20 else 0)
        return bytes(kernel.encode_record(topic, 3, 0, sys_flag, 7, 1234, 1_700_000_000_000, born,
                                          1_700_000_000_001, store, 0, 0, body, properties, version))
    v4, v6 = bytes(range(1, 9)), bytes(range(1, 21))
    props = b"TAGS\x01TagA\x02KEYS\x01k1 k2  k3\x02UNIQ_KEY\x017F000001\x02"
    return {
        "synthetic-v2-long-topic.bin": record(b"t" * 300, props, 2, v4, v4, b"body"),
        "synthetic-v6-hosts.bin": record(b"TopicA", props, 1, v6, v6, b"x" * 40),
        "synthetic-v6-born-only.bin": record(b"TopicA", props, 1, v6, v4, b""),
        "synthetic-empty-fields.bin": record(b"", b"", 1, v4, v4, b""),
        "synthetic-longest-v1-topic.bin": record(b"T" * 127, b"DELAY\x013\x02", 1, v4, v4, b"b"),
        "synthetic-rollback.bin": record(b"TopicB", props, 1, v4, v4, b"r", sys_flag=0x0C),
        "synthetic-mixed-run.bin": record(b"TopicA", props, 1, v4, v6, b"1") +
        record(b"u" * 200, b"", 2, v6, v4, b"2" * 100) + record(b"TopicC", props, 1, v4, v4, b""),
    }


def main() -> None:
    os.makedirs(CORPUS_DIR, exist_ok=True)
    seeds: dict[str, bytes] = {}
    for path in sorted(glob.glob(os.path.join(FIXTURES, "*", "*", "store", "commitlog", "*"))):
        seeds.update(_segment_seeds(path))
    seeds.update(_synthetic_seeds())
    for old in glob.glob(os.path.join(CORPUS_DIR, "*.bin")):
        if os.path.basename(old) not in seeds:
            os.remove(old)
    for name, data in sorted(seeds.items()):
        with open(os.path.join(CORPUS_DIR, name), "wb") as file:
            file.write(data)
    total = sum(len(data) for data in seeds.values())
    print(f"{len(seeds)} seeds, {total} bytes in {CORPUS_DIR}")


if __name__ == "__main__":
    main()
