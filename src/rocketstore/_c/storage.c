/*
 * rocketstore._speedups, storage layer: the flush of a mapping that rocketstore.storage.fs.msync runs,
 * and the state types' common code with the mapped file's own.
 *
 *   msync(mapping, start, length)   mmap.flush(start, length), which keeps the interpreter lock
 *   populate(mapping, start, length) mmap.madvise(MADV_POPULATE_WRITE, ...), which keeps it too
 *   MappedFileState                 the hot state of rocketstore.storage.mapped_file.MappedFile (its base)
 *   FileQueueState                  the files of rocketstore.storage.mapped_file_queue.MappedFileQueue (its base)
 */
#include "common.h"

#include <sys/mman.h>
#include <unistd.h>

/* The arguments (mapping, start, length) of msync and populate: 0 with `start`, `length` and the
 * mapping's buffer (`flags`) held in `view`; -1 after a TypeError, or a ValueError for a negative start
 * or length, naming `name`. */
static int
mapping_range(PyObject *const *args, Py_ssize_t nargs, const char *name, int flags, Py_buffer *view,
              Py_ssize_t *start, Py_ssize_t *length)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s(mapping, start, length) takes three arguments", name);
        return -1;
    }
    *start = PyLong_AsSsize_t(args[1]);
    *length = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (*start < 0 || *length < 0) {
        PyErr_Format(PyExc_ValueError, "%s: a negative start or length", name);
        return -1;
    }
    return PyObject_GetBuffer(args[0], view, flags);
}

/* msync(mapping, start, length): msync(MS_SYNC) of bytes [start, start + length) of a shared mapping,
 * like mmap.flush(start, length) but without holding the interpreter lock while the disk works, so
 * that other threads (the producers of a group commit) go on meanwhile. The mapping's buffer stays
 * exported during the call, so the mapping cannot be closed under it. start must be page-aligned. */
PyObject *
speedups_msync(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, length;
    if (mapping_range(args, nargs, "msync", PyBUF_SIMPLE, &view, &start, &length) < 0) {
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    if (start > view.len || length > view.len - start || page <= 0
        || ((uintptr_t)view.buf + (uintptr_t)start) % (uintptr_t)page != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "msync: range outside the mapping or start not page-aligned");
        return NULL;
    }
    char *at = (char *)view.buf + start;
    int rc = 0;
    if (length > 0) {
        Py_BEGIN_ALLOW_THREADS
        rc = msync(at, (size_t)length, MS_SYNC);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    if (rc != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* populate(mapping, start, length) -> bool: madvise(MADV_POPULATE_WRITE) of bytes [start, start + length)
 * of a shared mapping (clamped to it; start rounded down to a page): the page faults and zero-filled
 * pages that the first writes through the mapping would take, taken now, without the interpreter lock,
 * so that they cost another core and not the writer. False when the kernel refused (older than 5.14:
 * EINVAL; no memory): a hint only, the writes fault as before. The buffer stays exported during the
 * call, so the mapping cannot be closed under it. */
PyObject *
speedups_populate(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    Py_ssize_t start, length;
    if (mapping_range(args, nargs, "populate", PyBUF_WRITABLE, &view, &start, &length) < 0) {
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    int rc = 0;
    if (page > 0 && start < view.len && length > 0 && (uintptr_t)view.buf % (uintptr_t)page == 0) {
        Py_ssize_t from = start - start % page;
        Py_ssize_t to = length > view.len - start ? view.len : start + length;
        Py_BEGIN_ALLOW_THREADS
        rc = madvise((char *)view.buf + from, (size_t)(to - from), MADV_POPULATE_WRITE);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(rc == 0);
}

/* The object fields of a state type instance: the static state type under any Python subclasses says
 * how many follow the head. */
static PyObject **
state_fields(PyObject *self, Py_ssize_t *count)
{
    PyTypeObject *type = Py_TYPE(self);
    while (type->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        type = type->tp_base;
    }
    *count = (type->tp_basicsize - (Py_ssize_t)sizeof(PyObject)) / (Py_ssize_t)sizeof(PyObject *);
    return (PyObject **)((char *)self + sizeof(PyObject));
}

int
rs_state_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_ssize_t count;
    PyObject **fields = state_fields(self, &count);
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_VISIT(fields[i]);
    }
    return 0;
}

int
rs_state_clear(PyObject *self)
{
    Py_ssize_t count;
    PyObject **fields = state_fields(self, &count);
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_CLEAR(fields[i]);
    }
    return 0;
}

void
rs_state_dealloc(PyObject *self)
{
    /* a static type: a Python subclass's subtype_dealloc releases the subclass itself */
    PyObject_GC_UnTrack(self);
    rs_state_clear(self);
    Py_TYPE(self)->tp_free(self);
}

int
rs_state_int(PyObject *value, long long *out)
{
    if (value == NULL || !PyLong_Check(value)) {
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow || v < 0 || v > LLONG_MAX / 4) {
        return 0;
    }
    *out = v;
    return 1;
}

int
rs_state_set_int(PyObject **field, long long value)
{
    PyObject *number = PyLong_FromLongLong(value);
    if (number == NULL) {
        return -1;
    }
    Py_XSETREF(*field, number);
    return 0;
}

void
rs_state_touch(PyObject **field)
{
    if (*field != Py_True) {
        Py_XSETREF(*field, Py_NewRef(Py_True));
    }
}

static PyMemberDef mapped_file_members[] = {
    STATE_MEMBER(rs_MappedFileState, "_mm", mapping),
    STATE_MEMBER(rs_MappedFileState, "wrote_position", wrote_position),
    STATE_MEMBER(rs_MappedFileState, "file_size", file_size),
    STATE_MEMBER(rs_MappedFileState, "file_from_offset", file_from_offset),
    STATE_MEMBER(rs_MappedFileState, "touched", touched),
    {NULL, 0, 0, 0, NULL},
};

STATE_TYPE(rs_MappedFileStateType, "rocketstore._speedups.MappedFileState", rs_MappedFileState,
           "The hot state of a MappedFile (its base class): mapping, write position, size, start offset "
           "and the mapping budget's clock bit, read and written by the kernels without attribute lookups.",
           mapped_file_members);

static PyMemberDef file_queue_members[] = {
    STATE_MEMBER(rs_FileQueueState, "files", files),
    {NULL, 0, 0, 0, NULL},
};

STATE_TYPE(rs_FileQueueStateType, "rocketstore._speedups.FileQueueState", rs_FileQueueState,
           "The files of a MappedFileQueue (its base class), oldest first, read by the kernels without "
           "attribute lookups.",
           file_queue_members);
