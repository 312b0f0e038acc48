/*
 * rocketstore._speedups: optional compiled versions of small hot functions. This file makes the one
 * module of them: its method table, its initialization, the strings it interns at import, and
 * layout(). The functions themselves sit in one file per layer of the package they serve (see each
 * file's comment for the Python function each one twins):
 *
 *   format.c    java_hash, java_hash_concat, decode_properties, properties_at, MessageBase,
 *               build_message, record_at, crc32, crc32_portable (_crc32.c computes the CRC)
 *   columns.c   record_columns, record_spans, topic_rows
 *   storage.c   msync, populate, the types MappedFileState and FileQueueState and what every state
 *               type shares
 *   log.c       index_lookup, index_put_keys, index_damage, decode_run, query_records, the types
 *               ConsumeQueueState and IndexFileState
 *   store.c     prepare_plain, prepare_many, pack_run, put_one, fill_slots, install_message_call,
 *               put_results, and the type Appender (the plain ASYNC put's record writer)
 *
 * Each one has a pure-Python twin that is the reference (the tests hold the two equal on generated
 * inputs) and that runs wherever this module could not be built. common.h holds what the files share;
 * _layout.h, which it includes, is generated from the Python declarations by setup.py.
 */
#include "common.h"

/* Interned at import (common.h says who reads them). */
PyObject *rs_property_tags, *rs_property_keys, *rs_property_uniq_key;
PyObject *rs_magic_v1, *rs_magic_v2;
PyObject *rs_message_field_names[MESSAGE_FIELDS];

/* layout(): the values this module was compiled with (_layout.h), for the test that holds them to the
 * Python declarations (rocketstore.store.c_layout.compiled_with). */
static PyObject *
strings_tuple(const char *const *names, int count)
{
    PyObject *out = PyTuple_New(count);
    for (int i = 0; out != NULL && i < count; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        if (name == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, name);
    }
    return out;
}

static PyObject *
layout(PyObject *Py_UNUSED(self), PyObject *Py_UNUSED(unused))
{
    static const char *const prepared[PREPARED_FIELDS] = {PREPARED_FIELD_NAMES};
    static const char *const message[MESSAGE_FIELDS] = {MESSAGE_FIELD_NAMES};
    static const char *const dispatch[DISPATCH_FIELDS] = {DISPATCH_FIELD_NAMES};
    PyObject *values = PyDict_New();
    if (values == NULL) {
        return NULL;
    }
#define X(name)                                                                     \
    do {                                                                            \
        PyObject *value = PyLong_FromLongLong((long long)(name));                   \
        if (value == NULL || PyDict_SetItemString(values, #name, value) < 0) {      \
            Py_XDECREF(value);                                                      \
            Py_DECREF(values);                                                      \
            return NULL;                                                            \
        }                                                                           \
        Py_DECREF(value);                                                           \
    } while (0);
    LAYOUT_ITEMS
#undef X
    return Py_BuildValue("{sNsNsNs{sisisi}s{sisi}s{sisisi}sN}", "layout", values, "prepared",
                         strings_tuple(prepared, PREPARED_FIELDS), "message", strings_tuple(message, MESSAGE_FIELDS),
                         "run_stops", "RUN_END", RUN_END, "RUN_FULL", RUN_FULL, "RUN_ELSEWHERE", RUN_ELSEWHERE,
                         "walk_stops", "WALK_BLANK", WALK_BLANK, "WALK_CHECK", WALK_CHECK, "request_stops",
                         "REQUESTS_MORE", REQUESTS_MORE, "REQUESTS_BLANK", REQUESTS_BLANK, "REQUESTS_CHECK",
                         REQUESTS_CHECK, "dispatch", strings_tuple(dispatch, DISPATCH_FIELDS));
}

static PyMethodDef methods[] = {
    {"layout", layout, METH_NOARGS, "The layouts and field orders this module was compiled with."},
    {"java_hash", (PyCFunction)speedups_java_hash, METH_O, "Java String.hashCode of a str, as a signed int32."},
    {"java_hash_concat", (PyCFunction)(void (*)(void))speedups_java_hash_concat, METH_FASTCALL,
     "java_hash(prefix + text) without building the string."},
    {"decode_properties", (PyCFunction)speedups_decode_properties, METH_O,
     "Parse a RocketMQ properties string into a dict (stored order, later names win)."},
    {"properties_at", (PyCFunction)(void (*)(void))speedups_properties_at, METH_FASTCALL,
     "The properties of a record from the UTF-8 text at `start` to the end of the buffer."},
    {"index_lookup", (PyCFunction)(void (*)(void))speedups_index_lookup, METH_FASTCALL,
     "Walk an IndexFile slot chain; False when a position falls outside the buffer."},
    {"index_put_keys", (PyCFunction)(void (*)(void))speedups_index_put_keys, METH_FASTCALL,
     "Write IndexFile entries, slots and header for a run of keys; None when a value is out of range."},
    {"index_damage", (PyCFunction)(void (*)(void))speedups_index_damage, METH_FASTCALL,
     "The first damage in an index file's slots and entries: (code, where); None for a geometry it does not take."},
    {"install_message_call", (PyCFunction)(void (*)(void))speedups_install_message_call, METH_FASTCALL,
     "Calls of the Message class build the common message (a bytes body, keys as a tuple) without a Python "
     "frame, and hand any other call to its __new__."},
    {"fill_slots", (PyCFunction)(void (*)(void))speedups_fill_slots, METH_FASTCALL,
     "A new instance of `cls` with each value stored through its slot descriptor."},
    {"build_message", (PyCFunction)(void (*)(void))speedups_build_message, METH_FASTCALL,
     "A message of class `cls` (a MessageBase subclass) for bytes holding exactly one record."},
    {"prepare_plain", (PyCFunction)(void (*)(void))speedups_prepare_plain, METH_FASTCALL,
     "Preparer.prepare for the message it takes (no DELAY property, a born host known or IPv4); None for any other."},
    {"pack_run", (PyCFunction)(void (*)(void))speedups_pack_run, METH_FASTCALL,
     "The write loop of a batch put for the messages that fit one commitlog file."},
    {"msync", (PyCFunction)(void (*)(void))speedups_msync, METH_FASTCALL,
     "msync(MS_SYNC) of a range of a shared mapping, letting other threads run meanwhile."},
    {"populate", (PyCFunction)(void (*)(void))speedups_populate, METH_FASTCALL,
     "madvise(MADV_POPULATE_WRITE) of a range of a shared mapping, letting other threads run meanwhile."},
    {"decode_run", (PyCFunction)(void (*)(void))speedups_decode_run, METH_FASTCALL,
     "The read loop of a get over consume-queue entries, decoding records of one commitlog file in place."},
    {"get_run", (PyCFunction)(void (*)(void))speedups_get_run, METH_FASTCALL,
     "A plain get (no tags) of a consume queue whose window's entries all give their messages; None for any other."},
    {"queue_scan", (PyCFunction)(void (*)(void))speedups_queue_scan, METH_FASTCALL,
     "The recovery's walk over a consume-queue file's entries: (written, last, None or the entry it stopped at)."},
    {"queue_first_at_or_after", (PyCFunction)(void (*)(void))speedups_queue_first_at_or_after, METH_FASTCALL,
     "The index of the first valid, non-filler consume-queue entry pointing at or after an offset, of a buffer's first `end` bytes; -1 for none."},
    {"queue_kept_prefix", (PyCFunction)(void (*)(void))speedups_queue_kept_prefix, METH_FASTCALL,
     "The entries of a consume-queue file a read-only open keeps, and the end of the last one's record."},
    {"walk_records", (PyCFunction)(void (*)(void))speedups_walk_records, METH_FASTCALL,
     "The recovery walk over one commitlog file from a position: (stop position, records passed, why)."},
    {"pack_requests", (PyCFunction)(void (*)(void))speedups_pack_requests, METH_FASTCALL,
     "What Dispatcher.write_packed writes for a list of DispatchRequests: queue runs and index groups."},
    {"dispatch_requests", (PyCFunction)(void (*)(void))speedups_dispatch_requests, METH_FASTCALL,
     "The catch-up's dispatch requests of the records of one commitlog file from a position."},
    {"dispatch_packed", (PyCFunction)(void (*)(void))speedups_dispatch_packed, METH_FASTCALL,
     "dispatch_requests then pack_requests of the records of one commitlog file, in one pass over the bytes."},
    {"record_at", (PyCFunction)(void (*)(void))speedups_record_at, METH_FASTCALL,
     "The whole, well-formed record at a position of a buffer, as a message; None for anything else."},
    {"query_records", (PyCFunction)(void (*)(void))speedups_query_records, METH_FASTCALL,
     "The messages of a topic carrying a key, found through the index files and read from the commitlog."},
    {"record_columns", (PyCFunction)(void (*)(void))speedups_record_columns, METH_FASTCALL,
     "The Arrow column buffers of whole records, or None when one needs the row-by-row path."},
    {"record_spans", (PyCFunction)(void (*)(void))speedups_record_spans, METH_FASTCALL,
     "The starts and ends of the whole records from a position of a commitlog file, by their prefixes."},
    {"topic_rows", (PyCFunction)(void (*)(void))speedups_topic_rows, METH_FASTCALL,
     "Which whole records hold one of some topics, read on their bytes; -1 when one is left undecided."},
    {"put_one", (PyCFunction)(void (*)(void))speedups_put_one, METH_FASTCALL,
     "The writes of a single put in one call when they are the plain case; None (nothing written) otherwise."},
    {"put_results", (PyCFunction)(void (*)(void))speedups_put_results, METH_FASTCALL,
     "The PutResults of a batch, made as fill_slots makes one."},
    {"prepare_many", (PyCFunction)(void (*)(void))speedups_prepare_many, METH_FASTCALL,
     "prepare_plain for each message of a sequence, with the count of those it declined."},
    {"crc32", (PyCFunction)(void (*)(void))speedups_crc32, METH_FASTCALL,
     "zlib.crc32(data, value=0), with carry-less multiplication where the CPU has it."},
    {"crc32_portable", (PyCFunction)(void (*)(void))speedups_crc32_portable, METH_FASTCALL,
     "crc32 through the portable table code only."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "rocketstore._speedups",
    "Optional compiled versions of rocketstore's hottest small functions.", 0, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyTypeObject *types[] = {&rs_MessageBaseType, &rs_AppenderType, &rs_WriteMarksType, &rs_StoreLockType,
                             &rs_MappedFileStateType, &rs_FileQueueStateType, &rs_ConsumeQueueStateType,
                             &rs_IndexFileStateType};
    const size_t type_count = sizeof(types) / sizeof(types[0]);
    for (size_t i = 0; i < type_count; i++) {
        if (PyType_Ready(types[i]) < 0) {
            return NULL;
        }
    }
    rs_crc32_init();
    struct { PyObject **slot; const char *name; } names[] = {
        {&rs_property_tags, "TAGS"}, {&rs_property_keys, "KEYS"}, {&rs_property_uniq_key, "UNIQ_KEY"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL) {
            return NULL;
        }
    }
    if ((rs_magic_v1 = PyLong_FromUnsignedLong(MAGIC_V1)) == NULL
        || (rs_magic_v2 = PyLong_FromUnsignedLong(MAGIC_V2)) == NULL) {
        return NULL;
    }
    static const char *const field_names[MESSAGE_FIELDS] = {MESSAGE_FIELD_NAMES};
    for (int i = 0; i < MESSAGE_FIELDS; i++) {
        if ((rs_message_field_names[i] = PyUnicode_InternFromString(field_names[i])) == NULL) {
            return NULL;
        }
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < type_count; i++) {
        if (PyModule_AddType(module, types[i]) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
    return module;
}
