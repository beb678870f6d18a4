"""Producer for the process-crash tests (tests/test_crash.py), run as a subprocess.

It runs as a small fork server ("zygote"): it imports the engine once, then for every command line
read from stdin it forks one producer child and prints the child's pid. The test kills that child
with SIGKILL at a random moment; the zygote reaps it. Forking saves the ~0.5 s interpreter and numpy
start-up per kill, which is what makes hundreds of kills affordable.

A producer child opens the store (which runs recovery of the previous crash), writes "open" to its
ack file, then puts messages forever. Only after `put_message(s)` returned PUT_OK does it append
"a <run> <seq> [<seq> ...]" to the ack file with one unbuffered `os.write` (the kernel keeps the line
when the process is killed; a kill between the put and the write means "written but not
acknowledged", which the test allows). Message contents are a pure function of (run, seq), so the
test can check exact bytes without any other side channel.

Command (one JSON object per stdin line):
    {"root": ..., "overrides": {...}, "run": 7, "batch": 1, "ack": "/path/ack-7"}
"""

from __future__ import annotations

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOPIC = "CrashT"
QUEUES = 4


def message_body(run: int, seq: int) -> bytes:
    """The exact body of message `seq` of producer run `run` (sizes 0..~1.5 KiB, some large)."""
    rng = random.Random(run * 1_000_003 + seq)
    size = rng.choice((0, 7, 40, 100, 300, 1500)) if seq % 5 else rng.randrange(0, 600)
    return f"{run}:{seq}:".encode() + rng.randbytes(size)


def message_queue(seq: int, batch: int) -> int:
    return (seq // batch) % QUEUES


def message_key(run: int, seq: int) -> str:
    return f"k{run}-{seq}"


def parse_body(body: bytes) -> tuple[int, int]:
    run, seq, _rest = body.split(b":", 2)
    return int(run), int(seq)


def _produce(command: dict) -> None:
    from store import Message, MessageStore
    from tests.engine_util import small_config

    config = small_config(command["root"], **command["overrides"])
    fd = os.open(command["ack"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    store = MessageStore.open(config)
    os.write(fd, b"open\n")
    run, batch = command["run"], command["batch"]
    seq = 0
    for _ in range(10_000_000):  # bounded; the test kills us long before
        seqs = list(range(seq, seq + batch))
        messages = [Message(TOPIC, message_body(run, s), queue_id=message_queue(s, batch),
                            tags=f"t{s % 3}", keys=[message_key(run, s)]) for s in seqs]
        result = store.put_message(messages[0]) if batch == 1 else store.put_messages(messages)
        if not result.ok:
            os.write(fd, f"refused {result.status.value} {result.error}\n".encode())
            os._exit(3)
        os.write(fd, ("a %d %s\n" % (run, " ".join(map(str, seqs)))).encode())
        seq += batch
    os._exit(0)


def zygote() -> None:
    # Import the engine (and rocksdict) before forking so each child starts warm.
    import store.message_store  # noqa: F401
    import store.consumequeue.rocksdb.queue_store  # noqa: F401
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if line.startswith("reap "):
            pid = int(line.split()[1])
            _, status = os.waitpid(pid, 0)
            print(f"reaped {pid} {status}", flush=True)
            continue
        command = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                sys.stdin.close()
                _produce(command)
            except BaseException as error:  # report, never return into the zygote loop
                try:
                    with open(command["ack"], "a", encoding="utf-8") as handle:
                        handle.write(f"error {type(error).__name__}: {error}\n")
                finally:
                    os._exit(4)
        print(f"pid {pid}", flush=True)


if __name__ == "__main__":
    zygote()
