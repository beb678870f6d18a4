/* found_result: a pull's GetMessageResult (store/api.py) built without its dataclass __init__
 * frame. The class's slot offsets are learnt once (its __slots__ must be exactly the eight fields,
 * in order, as plain writable member slots; anything else: TypeError, and the caller builds it by
 * calling the class). The fields are set as __init__ sets them: the six arguments as given,
 * waited_ms 0 and skipped (). Twin: store/kernel/result.py (found_result_py: the class called).
 */

#include "kernel.h"
#include <structmember.h>

#define N_RESULT_FIELDS 8
static const char *const result_fields[N_RESULT_FIELDS] = {
    "status", "next_begin_offset", "min_offset", "max_offset", "messages",
    "suggest_pulling_from_slave", "waited_ms", "skipped",
};
static PyTypeObject *result_cls;           /* the class whose offsets are below (a reference) */
static Py_ssize_t result_offset[N_RESULT_FIELDS];
static PyObject *zero, *empty;              /* waited_ms and skipped's defaults */

static const char result_error[] =
    "found_result: cls must be a slots class with GetMessageResult's fields";

static int learn_result(PyObject *cls)
{
    if ((PyTypeObject *)cls == result_cls)
        return 0;
    if (!PyType_Check(cls))
        goto refuse;
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_alloc != PyType_GenericAlloc || type->tp_itemsize != 0)
        goto refuse;
    Py_ssize_t offsets[N_RESULT_FIELDS];
    if (rmq_slot_offsets(cls, result_fields, N_RESULT_FIELDS, offsets) < 0)
        goto refuse;
    if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL)
        return -1;
    if (empty == NULL && (empty = PyTuple_New(0)) == NULL)
        return -1;
    memcpy(result_offset, offsets, sizeof offsets);
    Py_INCREF(cls);
    Py_XSETREF(result_cls, type);
    return 0;
refuse:
    PyErr_SetString(PyExc_TypeError, result_error);
    return -1;
}

const char rmq_found_result_doc[] =
"found_result(cls, status, next_begin_offset, min_offset, max_offset, messages,\n"
"             suggest_pulling_from_slave) -> cls instance\n"
"cls(status, next_begin_offset, min_offset, max_offset, messages, suggest_pulling_from_slave)\n"
"for GetMessageResult's slots class, its fields set directly (waited_ms 0, skipped ()).\n"
"TypeError for another class.";

PyObject *rmq_found_result(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "found_result expected 7 arguments, got %zd", nargs);
        return NULL;
    }
    if (learn_result(args[0]) < 0)
        return NULL;
    PyObject *result = result_cls->tp_alloc(result_cls, 0);
    if (result == NULL)
        return NULL;
    for (int i = 0; i < 6; i++) {
        Py_INCREF(args[i + 1]);
        *(PyObject **)((char *)result + result_offset[i]) = args[i + 1];
    }
    Py_INCREF(zero);
    *(PyObject **)((char *)result + result_offset[6]) = zero;
    Py_INCREF(empty);
    *(PyObject **)((char *)result + result_offset[7]) = empty;
    return result;
}
