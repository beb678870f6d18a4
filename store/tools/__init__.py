"""Operator tools over a whole store directory, built on the facade.

| module              | holds                                                                 |
|---------------------|-----------------------------------------------------------------------|
| `check_directory`   | `check_config(config)`: check a directory, even one the engine refuses to open |
| `convert_cq`        | offline conversion of the consume queues between files and RocksDB    |

The only package below `store/` that may import the facade (`store.message_store`); the CLI and the
dashboard use it.
"""
