/*
 * rocketstore._speedups, storage layer: the flush of a mapping that rocketstore.storage.fs.msync runs.
 *
 *   msync(mapping, start, length)   mmap.flush(start, length), which keeps the interpreter lock
 *   populate(mapping, start, length) mmap.madvise(MADV_POPULATE_WRITE, ...), which keeps it too
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
