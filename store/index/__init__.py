"""The index files under `<root>/index`: lookups by key and by unique key (spec §5).

| module           | holds                                                                  |
|------------------|------------------------------------------------------------------------|
| `index_file`     | `IndexFile` (RocketMQ's `IndexFile` + `IndexHeader`): opening, writing slots and entries |
| `index_query`    | its query side: `query_key_hash`, the chain walk (`select`, `walk_chain`), dumps |
| `index_service`  | `IndexService`: the set of index files, building and querying them     |

The byte layout is in `store.codec.index_codec`. May import: `store.codec`, `store.kernel`,
`store.mappedfile`, `store.errors`.
"""
