/* The module store.kernel._kernel: its method table and init (see kernel.h for the files behind it). */

#include "kernel.h"

static PyMethodDef methods[] = {
    {"encode_record", rmq_encode_record, METH_VARARGS, rmq_encode_record_doc},
    {"encode_put", (PyCFunction)(void (*)(void))rmq_encode_put, METH_FASTCALL, rmq_encode_put_doc},
    {"place", rmq_place, METH_VARARGS, rmq_place_doc},
    {"scan", rmq_scan, METH_VARARGS, rmq_scan_doc},
    {"java_hashes", rmq_java_hashes, METH_O, rmq_java_hashes_doc},
    {"index_hashes", rmq_index_hashes, METH_VARARGS, rmq_index_hashes_doc},
    {"cq_search_nearest", (PyCFunction)(void (*)(void))rmq_cq_search_nearest, METH_FASTCALL, rmq_cq_search_nearest_doc},
    {"cq_nearest_queue", (PyCFunction)(void (*)(void))rmq_cq_nearest_queue, METH_FASTCALL, rmq_cq_nearest_queue_doc},
    {"cq_nearest_in", (PyCFunction)(void (*)(void))rmq_cq_nearest_in, METH_FASTCALL, rmq_cq_nearest_in_doc},
    {"cq_search_boundary", (PyCFunction)(void (*)(void))rmq_cq_search_boundary, METH_FASTCALL, rmq_cq_search_boundary_doc},
    {"index_select", (PyCFunction)(void (*)(void))rmq_index_select, METH_FASTCALL, rmq_index_select_doc},
    {"read_message", (PyCFunction)(void (*)(void))rmq_read_message, METH_FASTCALL, rmq_read_message_doc},
    {"decode_records", (PyCFunction)(void (*)(void))rmq_decode_records, METH_FASTCALL, rmq_decode_records_doc},
    {"pull_unfiltered", (PyCFunction)(void (*)(void))rmq_pull_unfiltered, METH_FASTCALL, rmq_pull_unfiltered_doc},
    {"pull_window", (PyCFunction)(void (*)(void))rmq_pull_window, METH_FASTCALL, rmq_pull_window_doc},
    {"found_result", (PyCFunction)(void (*)(void))rmq_found_result, METH_FASTCALL, rmq_found_result_doc},
    {"query_keys", (PyCFunction)(void (*)(void))rmq_query_keys, METH_FASTCALL, rmq_query_keys_doc},
    {"query_message", (PyCFunction)(void (*)(void))rmq_query_message, METH_FASTCALL, rmq_query_message_doc},
    {"tags_codes", rmq_tags_codes, METH_VARARGS, rmq_tags_codes_doc},
    {"index_put", rmq_index_put, METH_VARARGS, rmq_index_put_doc},
    {"unit_runs", rmq_unit_runs, METH_VARARGS, rmq_unit_runs_doc},
    {"decode_columns", rmq_decode_columns, METH_VARARGS, rmq_decode_columns_doc},
    {"walk_headers", rmq_walk_headers, METH_VARARGS, rmq_walk_headers_doc},
    {"fixed_columns", rmq_fixed_columns, METH_VARARGS, rmq_fixed_columns_doc},
    {"view_columns", rmq_view_columns, METH_VARARGS, rmq_view_columns_doc},
    {"encode_batch", (PyCFunction)(void (*)(void))rmq_encode_batch, METH_FASTCALL, rmq_encode_batch_doc},
    {"place_batch", rmq_place_batch, METH_VARARGS, rmq_place_batch_doc},
    {"put_fast", (PyCFunction)(void (*)(void))rmq_put_fast, METH_FASTCALL, rmq_put_fast_doc},
    {"prefault", (PyCFunction)(void (*)(void))rmq_prefault, METH_FASTCALL, rmq_prefault_doc},
    {"sync_range", (PyCFunction)(void (*)(void))rmq_sync_range, METH_FASTCALL, rmq_sync_range_doc},
    {"crc32", rmq_crc32, METH_O, rmq_crc32_doc},
    {"span_groups", rmq_span_groups, METH_VARARGS, rmq_span_groups_doc},
    {"cq_keys", (PyCFunction)(void (*)(void))rmq_cq_keys, METH_FASTCALL, rmq_cq_keys_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "store.kernel._kernel",
    "Compiled hot loops of the store (see store/kernel/__init__.py for the pure-Python twins).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernel(void)
{
    rmq_crc_init();
    if (rmq_put_init() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "SCAN_FIELDS", SCAN_FIELDS) < 0 ||
        PyModule_AddIntConstant(m, "STOP_END", STOP_END) < 0 ||
        PyModule_AddIntConstant(m, "STOP_BLANK", STOP_BLANK) < 0 ||
        PyModule_AddIntConstant(m, "STOP_INVALID", STOP_INVALID) < 0 ||
        PyModule_AddIntConstant(m, "STOP_FULL", STOP_FULL) < 0 ||
        PyModule_AddStringConstant(m, "CRC", rmq_crc_name()) < 0 ||
        rmq_group_commit_init(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
