"""The Spark pipeline: data sources over store files, and batch jobs (export, stats, rebuild, verify, migrate).

The only part of `store/` that imports pyspark. Decoding runs on numpy and Arrow in the executors, on the
same codecs and compiled kernel the engine uses, over files mapped read-only; jobs that write (rebuild,
migrate) write to a directory they are given, never into the store they read.

| modules                                                   | what                                        |
|-----------------------------------------------------------|---------------------------------------------|
| `layout`, `segment_reader`                                | finding a store's files; reading a segment or a split of it |
| `commitlog_scan`, `commitlog_decoder`, `columns_native`, `cq_decoder`, `index_decoder` | files -> Arrow record batches, vectorised |
| `arrowkit`, `hosts`, `properties_vec`                     | numpy -> Arrow building blocks              |
| `frames`                                                  | the decoders outside Spark: Arrow tables and pandas frames |
| `spark_sources`, `streaming`, `source_options`            | `spark.read/readStream.format("rocketmq-...")` |
| `source_timerlog`                                         | `rocketmq-timerlog`: the 5.x timer log's units |
| `jobs_export`, `jobs_stats`, `jobs_rebuild`, `jobs_verify`, `jobs_migrate` | the jobs                  |
| `session`, `progress`, `cli`                              | the SparkSession, a progress bar, `rmqstore spark ...` |
| `synthetic`                                               | synthetic logs for tests                     |

May import: anything of the engine below the facade (codecs, kernel, the structures, `store.services`
dispatchers for rebuild), pyspark, pyarrow, pandas. Never `app/` or `pages/`.
"""
