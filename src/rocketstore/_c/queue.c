/* The walks over a consume-queue file's entries that an open makes: the recovery's check of every
 * entry (queue_scan), the min offset's correction (queue_first_at_or_after) and a read-only open's end
 * (queue_kept_prefix). Their twins are scan_entries_py, first_at_or_after_py and kept_prefix_py in
 * rocketstore.format.consume_queue; each kernel reads a buffer and answers ints, and declines (None) a
 * bound that is not an int64. */
#include "common.h"

/* One consume-queue entry, read on its bytes. */
struct unit {
    long long phy, size, tags;
};

static inline struct unit
unit_at(const unsigned char *buf, Py_ssize_t i)
{
    const unsigned char *u = buf + i * CQ_SIZE;
    struct unit e = {
        read_be(u + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, CQ_COMMITLOG_PHYSICAL_OFFSET_WIDTH),
        read_be(u + CQ_MESSAGE_SIZE_POS, CQ_MESSAGE_SIZE_WIDTH),
        read_be(u + CQ_TAGS_HASH_CODE_POS, CQ_TAGS_HASH_CODE_WIDTH),
    };
    return e;
}

static inline int
unit_filler(struct unit e)
{
    return e.phy == 0 && e.size == FILLER_SIZE && e.tags == 0;
}

/* The buffer, the int64 bound and the count of whole entries of a kernel's arguments (buffer, bound)
 * or, with `with_end`, (buffer, bound, end), the entries being those of the buffer's first `end` bytes:
 * 1 with `view` held, 0 when the bound or end is not an int64 or the end is negative (the kernel
 * declines), -1 after an error. */
static int
walk_args(const char *name, PyObject *const *args, Py_ssize_t nargs, int with_end, Py_buffer *view,
          long long *bound, Py_ssize_t *count)
{
    if (nargs != 2 + with_end || !PyLong_Check(args[1]) || (with_end && !PyLong_Check(args[2]))) {
        PyErr_Format(PyExc_TypeError, with_end ? "%s(buffer, bound, end): a buffer and two ints"
                                               : "%s(buffer, bound): a buffer and an int", name);
        return -1;
    }
    int overflow = 0, end_overflow = 0;
    *bound = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    long long end = with_end ? PyLong_AsLongLongAndOverflow(args[2], &end_overflow) : 0;
    if (overflow != 0 || end_overflow < 0 || (end_overflow == 0 && end < 0)) {
        return 0;
    }
    if (PyObject_GetBuffer(args[0], view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    Py_ssize_t bytes = view->len;
    if (with_end && end_overflow == 0 && end < (long long)bytes) {
        bytes = (Py_ssize_t)end;
    }
    *count = bytes / CQ_SIZE;
    return 1;
}

/* queue_scan(buffer, after_phy) -> (written, last, None) or (written, last, (phy, size, tags)): the walk
 * of scan_entries_py over the buffer's whole entries, fillers, then entries pointing at strictly
 * increasing offsets after `after_phy`: how many it passed, the offset the last entry passed points at
 * (`after_phy` for none), and the entry it stopped at (None when it passed them all). */
PyObject *
speedups_queue_scan(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    long long last;
    Py_ssize_t count, n = 0;
    int got = walk_args("queue_scan", args, nargs, 0, &view, &last, &count);
    if (got <= 0) {
        return got < 0 ? NULL : Py_NewRef(Py_None);
    }
    struct unit e = {0, 0, 0};
    for (; n < count; n++) {
        e = unit_at(view.buf, n);
        if (unit_filler(e)) {
            continue;
        }
        if (e.phy >= 0 && e.size > 0 && e.phy > last) {
            last = e.phy;
            continue;
        }
        break;
    }
    PyBuffer_Release(&view);
    if (n == count) {
        return Py_BuildValue("(nLO)", n, last, Py_None);
    }
    return Py_BuildValue("(nL(LLL))", n, last, e.phy, e.size, e.tags);
}

/* queue_first_at_or_after(buffer, min_phy, end) -> int: the index of the first whole entry of the
 * buffer's first `end` bytes that is valid (offset >= 0, size > 0), no filler, and points at or after
 * `min_phy`; -1 for none. */
PyObject *
speedups_queue_first_at_or_after(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    long long min_phy;
    Py_ssize_t count, found = -1;
    int got = walk_args("queue_first_at_or_after", args, nargs, 1, &view, &min_phy, &count);
    if (got <= 0) {
        return got < 0 ? NULL : Py_NewRef(Py_None);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        struct unit e = unit_at(view.buf, i);
        if (e.phy >= 0 && e.size > 0 && e.phy >= min_phy && !unit_filler(e)) {
            found = i;
            break;
        }
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(found);
}

/* queue_kept_prefix(buffer, phy_end) -> (kept, last_end or None): how many entries a read-only open
 * keeps, those up to the first invalid one or the first non-filler whose record does not end by
 * `phy_end`, and the end (offset + size) of the last one kept. */
PyObject *
speedups_queue_kept_prefix(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    long long phy_end;
    Py_ssize_t count, kept = 0;
    int got = walk_args("queue_kept_prefix", args, nargs, 0, &view, &phy_end, &count);
    if (got <= 0) {
        return got < 0 ? NULL : Py_NewRef(Py_None);
    }
    long long last_end = 0;
    for (; kept < count; kept++) {
        struct unit e = unit_at(view.buf, kept);
        if (e.phy < 0 || e.size <= 0) {
            break;
        }
        /* phy + size past int64 ends past any phy_end: the twin's ints do not overflow */
        int ends_by = e.phy <= JAVA_LONG_MAX - e.size && e.phy + e.size <= phy_end;
        if (!ends_by && !unit_filler(e)) {
            break;
        }
        last_end = e.phy + e.size; /* a filler: 0 + FILLER_SIZE */
    }
    PyBuffer_Release(&view);
    if (kept == 0) {
        return Py_BuildValue("(nO)", kept, Py_None);
    }
    return Py_BuildValue("(nL)", kept, last_end);
}
