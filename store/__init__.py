"""RocketMQ Store Inspector: RocketMQ's broker message store, on RocketMQ's own file formats.

    from store import MessageStore, StoreConfig, Message

The names are imported lazily, so that `import store.codec...` (the pipeline's executors, the codec
tests) does not load the whole engine.
"""

import importlib

_EXPORTS = {
    "MessageStore": "store.message_store",
    "StoreConfig": "store.config",
    "Message": "store.api",
    "PutMessageResult": "store.api",
    "PutMessageStatus": "store.api",
    "GetMessageResult": "store.api",
    "GetMessageStatus": "store.api",
    "QueryMessageResult": "store.api",
    "StoreError": "store.errors",
    "ConfigError": "store.errors",
    "CorruptDataError": "store.errors",
    "InvalidTopicError": "store.errors",
    "MessageNotFoundError": "store.errors",
    "ReadOnlyStoreError": "store.errors",
    "StoreClosedError": "store.errors",
    "StoreLockedError": "store.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
