/*
 * rocketstore._speedups, store layer: compiled twins of the write path of rocketstore.store, in four files
 * that share store.h:
 *
 *   store.c     fill_slots(cls, descs, *values)   rocketstore.store.write_path._put_result_factory's `make`
 *               install_message_call(cls, ...)    a call of Message as rocketstore.message.Message.__new__
 *                                                 makes it; and the slot and int helpers the others share
 *   prepare.c   prepare_plain(message, ...)       rocketstore.store.prepare.Preparer.prepare_py (for the
 *                                                 common message and the broker's: properties without
 *                                                 DELAY, an IPv4 born host)
 *               prepare_many(messages, ...)       prepare_plain per message (Preparer.prepare_many)
 *   append.c    pack_run(prepared, ...)           rocketstore.store.append_run.pack_run_py
 *               put_results(cls, descs, ...)      rocketstore.store.write_path.put_results_py
 *               put_one(cls, descs, ...)          rocketstore.store.write_path.WritePath._put_one_py
 *   appender.c  Appender(...).put_behind(m, pos)  rocketstore.store.write_path.WritePath._put_behind_py (a
 *                                                 type of its own: the write position, end and store
 *                                                 timestamp are its state)
 *
 * The prepare takes BODYCRC from _crc32.c and splits the keys as format.c's rs_space_separated does for
 * a read; pack_run hashes the index keys with hash_units (common.h). The Message field names it checks
 * the slot descriptors against are interned by module.c.
 */
#include "common.h"
#include "store.h"


/* 0 when every item of `descriptors` is a slot (member descriptor) of `cls`, else -1 with a TypeError
 * naming `caller`. */
int
rs_check_slots(PyTypeObject *cls, PyObject *descriptors, const char *caller)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(descriptors); i++) {
        PyObject *descriptor = PyTuple_GET_ITEM(descriptors, i);
        if (!Py_IS_TYPE(descriptor, &PyMemberDescr_Type)
            || !PyType_IsSubtype(cls, ((PyDescrObject *)descriptor)->d_type)) {
            PyErr_Format(PyExc_TypeError, "%s: every descriptor must be a slot of the class", caller);
            return -1;
        }
    }
    return 0;
}

/* A new `cls` (object.__new__; `empty` is the empty tuple) with values[i] stored through slot
 * descriptors[i], as `descriptor.__set__(obj, value)` does (also for a frozen dataclass, whose
 * __setattr__ it passes by, like object.__setattr__). The descriptors were checked by rs_check_slots. */
PyObject *
rs_new_with_slots(PyTypeObject *cls, PyObject *descriptors, PyObject *const *values, PyObject *empty)
{
    PyObject *obj = PyBaseObject_Type.tp_new(cls, empty, NULL);
    for (Py_ssize_t i = 0; obj != NULL && i < PyTuple_GET_SIZE(descriptors); i++) {
        PyObject *descriptor = PyTuple_GET_ITEM(descriptors, i);
        if (Py_TYPE(descriptor)->tp_descr_set(descriptor, obj, values[i]) < 0) {
            Py_CLEAR(obj);
        }
    }
    return obj;
}

/* fill_slots(cls, descriptors, *values): rs_new_with_slots for one object. */
PyObject *
speedups_fill_slots(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "fill_slots(cls, descriptors, *values): a class and a tuple first");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *descriptors = args[1];
    Py_ssize_t count = PyTuple_GET_SIZE(descriptors);
    if (nargs - 2 != count) {
        PyErr_Format(PyExc_TypeError, "fill_slots: %zd descriptors but %zd values", count, nargs - 2);
        return NULL;
    }
    if (rs_check_slots(cls, descriptors, "fill_slots") < 0) {
        return NULL;
    }
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL) {
        return NULL;
    }
    PyObject *obj = rs_new_with_slots(cls, descriptors, args + 2, empty);
    Py_DECREF(empty);
    return obj;
}

enum { CALL_FIELDS_MAX = 16 };

/* What a call of the Message class needs, set once by install_message_call. */
static struct {
    PyTypeObject *cls;
    PyObject *descriptors, *defaults, *missing, *twin, *empty;
    Py_ssize_t count, body, keys; /* the fields, and the positions of body and keys among them */
} message_call;

/* A call of the Message class, `Message(*args, **kwargs)`, as the type's vectorcall: the common call built
 * without a Python frame, the arguments bound to the fields in the order of the slot descriptors (a
 * keyword names the slot's field), the fields left out taking their defaults. A body of type bytes and
 * keys given as a tuple (or left out) are kept as they are; anything else (another body or keys type, an
 * unknown or repeated argument, too many, a field without default left out) goes to the class's Python
 * __new__ (the twin), which converts it or raises its TypeError. */
static PyObject *
message_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t positional = PyVectorcall_NARGS(nargsf);
    Py_ssize_t named = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    Py_ssize_t count = message_call.count;
    PyObject *descriptors = message_call.descriptors;
    PyObject *values[CALL_FIELDS_MAX] = {NULL};
    if (callable != (PyObject *)message_call.cls || positional > count) {
        goto twin;
    }
    for (Py_ssize_t i = 0; i < positional; i++) {
        values[i] = args[i];
    }
    for (Py_ssize_t k = 0; k < named; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t field = -1;
        for (Py_ssize_t i = 0; i < count && field < 0; i++) { /* interned names: the pointers match */
            if (((PyDescrObject *)PyTuple_GET_ITEM(descriptors, i))->d_name == name) {
                field = i;
            }
        }
        if (field < 0 || values[field] != NULL) {
            goto twin; /* a name not interned, an unknown or repeated argument */
        }
        values[field] = args[positional + k];
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (values[i] == NULL) {
            values[i] = PyTuple_GET_ITEM(message_call.defaults, i);
            if (values[i] == message_call.missing) {
                goto twin; /* a field without default left out */
            }
        }
    }
    if (!PyBytes_CheckExact(values[message_call.body]) || !PyTuple_CheckExact(values[message_call.keys])) {
        goto twin; /* what the twin converts */
    }
    return rs_new_with_slots(message_call.cls, descriptors, values, message_call.empty);
twin:
    {
        /* __new__(cls, *args, **kwargs); object.__init__ has nothing to do */
        PyObject *small[1 + CALL_FIELDS_MAX + 4];
        PyObject **stack = small;
        Py_ssize_t total = positional + named;
        if (total + 1 > (Py_ssize_t)(sizeof(small) / sizeof(small[0]))) {
            stack = PyMem_Malloc((size_t)(total + 1) * sizeof(PyObject *));
            if (stack == NULL) {
                return PyErr_NoMemory();
            }
        }
        stack[0] = callable;
        for (Py_ssize_t i = 0; i < total; i++) {
            stack[i + 1] = args[i];
        }
        PyObject *obj = PyObject_Vectorcall(message_call.twin, stack, (size_t)(positional + 1), kwnames);
        if (stack != small) {
            PyMem_Free(stack);
        }
        return obj;
    }
}

/* The position of the slot named `name` among `descriptors`, -1 when none is. */
static Py_ssize_t
slot_named(PyObject *descriptors, const char *name)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(descriptors); i++) {
        PyObject *d_name = ((PyDescrObject *)PyTuple_GET_ITEM(descriptors, i))->d_name;
        if (PyUnicode_Check(d_name) && PyUnicode_CompareWithASCIIString(d_name, name) == 0) {
            return i;
        }
    }
    return -1;
}

/* install_message_call(cls, descriptors, defaults, missing, twin): calls of `cls` itself (not of a
 * subclass) go through message_vectorcall from now on. `descriptors` are its slots in field order
 * (among them "body" and "keys"), `defaults` the fields' defaults, `missing` the default of a field that
 * has none, `twin` the class's Python __new__. Once per process: a second call changes nothing. */
PyObject *
speedups_install_message_call(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) || !PyTuple_Check(args[2])
        || PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2]) || PyTuple_GET_SIZE(args[1]) > CALL_FIELDS_MAX
        || !PyCallable_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "install_message_call(cls, descriptors, defaults, missing, twin): as many "
                                         "defaults as slots, at most 16");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    if (rs_check_slots(cls, args[1], "install_message_call") < 0) {
        return NULL;
    }
    Py_ssize_t body = slot_named(args[1], "body"), keys = slot_named(args[1], "keys");
    if (body < 0 || keys < 0) {
        PyErr_SetString(PyExc_TypeError, "install_message_call: no body or keys slot");
        return NULL;
    }
    if (message_call.cls == NULL) {
        PyObject *empty = PyTuple_New(0);
        if (empty == NULL) {
            return NULL;
        }
        message_call.cls = (PyTypeObject *)Py_NewRef(args[0]);
        message_call.descriptors = Py_NewRef(args[1]);
        message_call.defaults = Py_NewRef(args[2]);
        message_call.missing = Py_NewRef(args[3]);
        message_call.twin = Py_NewRef(args[4]);
        message_call.empty = empty;
        message_call.count = PyTuple_GET_SIZE(args[1]);
        message_call.body = body;
        message_call.keys = keys;
        cls->tp_vectorcall = message_vectorcall;
    }
    Py_RETURN_NONE;
}

/* Take a new tuple out of the cycle collector's tracking when nothing in it can be tracked (ints,
 * strings, bytes, None, untracked tuples): such a tuple can be part of no cycle, and CPython untracks
 * it anyway at the first collection that visits it. A batch makes several per message; left tracked,
 * those alive while the batch runs are moved to the older generations by the collections the batch
 * sets off, and a large batch then pays for full collections of the whole heap. */
void
rs_untrack_if_atomic(PyObject *tuple)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, i);
        if (PyType_IS_GC(Py_TYPE(item)) && (!PyTuple_CheckExact(item) || PyObject_GC_IsTracked(item))) {
            return;
        }
    }
    PyObject_GC_UnTrack(tuple); /* a no-op for a tuple not tracked */
}

/* An int field as int64 within [lo, hi]; 0 with *ok cleared when it is not an int or out of range. */
long long
rs_int_field(PyObject *value, long long lo, long long hi, int *ok)
{
    if (!PyLong_Check(value)) {
        *ok = 0;
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred()) || v < lo || v > hi) {
        PyErr_Clear();
        *ok = 0;
        return 0;
    }
    return v;
}
