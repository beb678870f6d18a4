"""Mapped files: the one abstraction every segmented on-disk structure is built on.

RocketMQ's `MappedFile` (one fixed-size, memory-mapped file named by the offset of its first byte) and
`MappedFileQueue` (an ordered run of them), reused by the commit log, the file consume queues, the index
files and the small metadata files.

| module               | holds                                                             |
|----------------------|-------------------------------------------------------------------|
| `mapped_file`        | `MappedFile`, file names <-> `file_from_offset`, sparse files, fsync of a directory |
| `mapped_file_queue`  | `MappedFileQueue`: load, find by offset, roll, flush/commit pointers, truncate      |

May import: `store.errors`. Nothing else of the store.
"""
