/*
 * rocketstore._speedups, store layer: the Appender type, the plain ASYNC put's record writer.
 */
#include "common.h"
#include "store.h"

#include <time.h>

/* The time now in epoch milliseconds, as rocketstore.store.checks.system_clock reads it
 * (time.time_ns() // 1_000_000: CLOCK_REALTIME). */
static PyObject *
system_clock_ms(void)
{
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) {
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromLongLong((long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
}


/* StoreLock: the store lock, a lock of this module's own so that the Appender takes it inside its call
 * (rocketstore.kernels.store_lock makes the store's one). Python code uses it as a threading.Lock:
 * acquire(blocking=True, timeout=-1), release(), locked(), and `with`. A blocked acquire waits without
 * the interpreter lock; unlike threading.Lock's, a signal does not interrupt the wait (its handler runs
 * once the lock is taken): the store lock is held for one write or one dispatch at a time. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    int held;
} StoreLock;

static PyObject *
store_lock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "StoreLock() takes no arguments");
        return NULL;
    }
    StoreLock *self = (StoreLock *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

static void
store_lock_dealloc(StoreLock *self)
{
    if (self->lock != NULL) {
        if (self->held) {
            PyThread_release_lock(self->lock);
        }
        PyThread_free_lock(self->lock);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Take the lock, waiting up to `timeout_us` (-1: for as long as it takes; 0: not at all) without the
 * interpreter lock: 1 when taken, 0 when not. */
static int
store_lock_take(StoreLock *self, PY_TIMEOUT_T timeout_us)
{
    PyLockStatus got = PyThread_acquire_lock_timed(self->lock, 0, 0);
    if (got != PY_LOCK_ACQUIRED && timeout_us != 0) {
        Py_BEGIN_ALLOW_THREADS
        got = PyThread_acquire_lock_timed(self->lock, timeout_us, 0);
        Py_END_ALLOW_THREADS
    }
    if (got != PY_LOCK_ACQUIRED) {
        return 0;
    }
    self->held = 1;
    return 1;
}

static void
store_lock_give(StoreLock *self)
{
    self->held = 0;
    PyThread_release_lock(self->lock);
}

static PyObject *
store_lock_acquire(StoreLock *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"blocking", "timeout", NULL};
    int blocking = 1;
    double timeout = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|pd:acquire", keywords, &blocking, &timeout)) {
        return NULL;
    }
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    if (timeout > (double)PY_TIMEOUT_MAX / 1e6) {
        PyErr_SetString(PyExc_OverflowError, "timeout value is too large");
        return NULL;
    }
    PY_TIMEOUT_T wait_us = !blocking ? 0 : timeout < 0 ? -1 : (PY_TIMEOUT_T)(timeout * 1e6);
    return PyBool_FromLong(store_lock_take(self, wait_us));
}

static PyObject *
store_lock_enter(StoreLock *self, PyObject *Py_UNUSED(unused))
{
    store_lock_take(self, -1);
    Py_RETURN_TRUE;
}

static PyObject *
store_lock_release(StoreLock *self, PyObject *Py_UNUSED(unused))
{
    if (!self->held) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    store_lock_give(self);
    Py_RETURN_NONE;
}

static PyObject *
store_lock_exit(StoreLock *self, PyObject *const *Py_UNUSED(args), Py_ssize_t Py_UNUSED(nargs))
{
    return store_lock_release(self, NULL);
}

static PyObject *
store_lock_locked(StoreLock *self, PyObject *Py_UNUSED(unused))
{
    return PyBool_FromLong(self->held);
}

static PyMethodDef store_lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))store_lock_acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool: take the lock, as threading.Lock.acquire."},
    {"release", (PyCFunction)store_lock_release, METH_NOARGS, "Give the lock back (RuntimeError when not held)."},
    {"locked", (PyCFunction)store_lock_locked, METH_NOARGS, "Whether the lock is held."},
    {"__enter__", (PyCFunction)store_lock_enter, METH_NOARGS, "Take the lock."},
    {"__exit__", (PyCFunction)(void (*)(void))store_lock_exit, METH_FASTCALL, "Give the lock back."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject rs_StoreLockType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._speedups.StoreLock",
    .tp_basicsize = sizeof(StoreLock),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The store lock: a threading.Lock the compiled Appender takes inside its call.",
    .tp_new = store_lock_new,
    .tp_dealloc = (destructor)store_lock_dealloc,
    .tp_methods = store_lock_methods,
};

/* WriteMarks: the marks of rocketstore.store.write_path.WritePath (its base class) that a put moves on:
 * the end of the newest record written without its dispatch, the end of what was dispatched, the store
 * timestamp of the newest record, and whether plain puts may leave their dispatch behind (put_behind
 * writes nothing while not). Only object pointers follow the head (the state types' rule). */
typedef struct {
    PyObject_HEAD
    PyObject *behind_to;            /* int */
    PyObject *dispatched_to;        /* int */
    PyObject *last_store_timestamp; /* int */
    PyObject *putting_behind;       /* bool: plain puts may leave their dispatch behind (put_behind writes) */
} rs_WriteMarks;

static PyMemberDef write_marks_members[] = {
    STATE_MEMBER(rs_WriteMarks, "behind_to", behind_to),
    STATE_MEMBER(rs_WriteMarks, "dispatched_to", dispatched_to),
    STATE_MEMBER(rs_WriteMarks, "last_store_timestamp", last_store_timestamp),
    STATE_MEMBER(rs_WriteMarks, "putting_behind", putting_behind),
    {NULL, 0, 0, 0, NULL},
};

STATE_TYPE(rs_WriteMarksType, "rocketstore._speedups.WriteMarks", rs_WriteMarks,
           "The marks a put moves on (WritePath's base class): behind_to, dispatched_to, "
           "last_store_timestamp and putting_behind, read and written by the Appender without attribute lookups.",
           write_marks_members);

/* Appender: the state of the plain ASYNC put whose dispatch is left behind the log (the record only),
 * owned by this type rather than read from the store's objects. The log layer creates one per store
 * with what does not change (the PutResult class and its slots, the store host, the msg id prefix, the
 * limits, prepare_plain's arguments, the store's queue offsets table and its clock), then attaches the
 * commitlog file being written (a MappedFileState: its mapping, start offset, size and write position).
 * `put_behind` prepares a message as prepare_plain does and writes its record at the write position it
 * holds, stamped by the clock, with the next queue offset of its queue; it moves on its own position,
 * the file's write position and clock bit, and the WriteMarks' behind_to and last store timestamp, and
 * answers the PutResult. It takes the store lock (a StoreLock, this module's own type) for the whole
 * call, and touches no attribute, only the fields of the state types. Anything it does not take (a message
 * prepare_plain declines, a record of `record_limit` bytes or more, a file without room for the record
 * and `blank_size` bytes, a file whose write position moved under it, a closed mapping) is declined:
 * nothing is written, None is answered, and `declined` counts it. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *result_cls;
    PyObject *result_slots, *status, *store_ip, *prefix, *prepare, *queue_table, *clock, *file, *mapping;
    StoreLock *lock;
    struct prepare_call call;
    struct shape_memo memo; /* prepare's last shape and queue keys, kept over the calls (under the lock) */
    long long store_port, record_limit, blank_size;
    long long from, size, pos;
    long long written, declined;
} Appender;

static int
appender_traverse(Appender *self, visitproc visit, void *arg)
{
    Py_VISIT(self->result_cls);
    Py_VISIT(self->result_slots);
    Py_VISIT(self->status);
    Py_VISIT(self->prepare);
    Py_VISIT(self->queue_table);
    Py_VISIT(self->clock);
    Py_VISIT(self->file);
    Py_VISIT(self->mapping);
    Py_VISIT(self->lock);
    Py_VISIT(self->memo.sys_flag);
    Py_VISIT(self->memo.tags);
    Py_VISIT(self->memo.born_ip);
    Py_VISIT(self->memo.shape);
    for (int i = 0; i < QUEUE_KEY_MEMO; i++) {
        Py_VISIT(self->memo.queue_keys[i]);
    }
    return 0;
}

static int
appender_clear(Appender *self)
{
    Py_CLEAR(self->result_cls);
    Py_CLEAR(self->result_slots);
    Py_CLEAR(self->status);
    Py_CLEAR(self->store_ip);
    Py_CLEAR(self->prefix);
    Py_CLEAR(self->prepare);
    Py_CLEAR(self->queue_table);
    Py_CLEAR(self->clock);
    Py_CLEAR(self->file);
    Py_CLEAR(self->mapping);
    Py_CLEAR(self->lock);
    rs_shape_memo_clear(&self->memo);
    return 0;
}

static void
appender_dealloc(Appender *self)
{
    PyObject_GC_UnTrack(self);
    appender_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
appender_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"result_cls", "result_slots", "status", "store_ip", "store_port", "msg_id_prefix",
                               "record_limit", "blank_size", "prepare", "queue_table", "clock", "lock", NULL};
    PyObject *cls, *slots, *status, *store_ip, *prefix, *prepare, *queue_table, *clock, *lock;
    long long store_port, record_limit, blank_size;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OSLULLO!O!OO!:Appender", keywords, &PyType_Type, &cls,
                                     &PyTuple_Type, &slots, &status, &store_ip, &store_port, &prefix,
                                     &record_limit, &blank_size, &PyTuple_Type, &prepare, &PyDict_Type,
                                     &queue_table, &clock, &rs_StoreLockType, &lock)) {
        return NULL;
    }
    Py_ssize_t ip_len = PyBytes_GET_SIZE(store_ip);
    if (PyTuple_GET_SIZE(slots) != 8 || PyTuple_GET_SIZE(prepare) != 8 || (ip_len != IPV4_WIDTH && ip_len != IPV6_WIDTH)
        || !PyUnicode_IS_ASCII(prefix) || store_port < JAVA_INT_MIN || store_port > JAVA_INT_MAX || record_limit < 0
        || record_limit > JAVA_INT_MAX || blank_size < 0 || blank_size > JAVA_INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "Appender: PutResult's 8 slots, prepare_plain's 8 arguments, a 4 or 16 "
                                          "byte store IP, an ASCII msg id prefix and int32 sizes expected");
        return NULL;
    }
    if (rs_check_slots((PyTypeObject *)cls, slots, "Appender") < 0 || ready(prefix) < 0) {
        return NULL;
    }
    PyObject *call_args[9] = {NULL};
    for (int i = 0; i < 8; i++) {
        call_args[i + 1] = PyTuple_GET_ITEM(prepare, i);
    }
    struct prepare_call call;
    if (rs_prepare_call_of(call_args, &call) < 0) {
        return NULL;
    }
    Appender *self = (Appender *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->result_cls = (PyTypeObject *)Py_NewRef(cls);
    self->result_slots = Py_NewRef(slots);
    self->status = Py_NewRef(status);
    self->store_ip = Py_NewRef(store_ip);
    self->prefix = Py_NewRef(prefix);
    self->prepare = Py_NewRef(prepare); /* keeps what `call` borrows */
    self->queue_table = Py_NewRef(queue_table);
    self->clock = Py_NewRef(clock);
    self->lock = (StoreLock *)Py_NewRef(lock);
    self->call = call;
    self->memo.share_queue_keys = 1; /* its puts share their queue keys, as prepare_many's messages do */
    self->store_port = store_port;
    self->record_limit = record_limit;
    self->blank_size = blank_size;
    return (PyObject *)self;
}

/* attach(file): the commitlog file to write from now on, a MappedFileState whose mapping is made (its
 * start offset, size and write position read from it now). */
static PyObject *
appender_attach(Appender *self, PyObject *file)
{
    if (!PyObject_TypeCheck(file, &rs_MappedFileStateType)) {
        PyErr_Format(PyExc_TypeError, "attach: a MappedFile expected, got %.100s", Py_TYPE(file)->tp_name);
        return NULL;
    }
    rs_MappedFileState *mf = (rs_MappedFileState *)file;
    long long from = 0, size = 0, pos = 0;
    if (!rs_state_int(mf->file_from_offset, &from) || !rs_state_int(mf->file_size, &size) || size > JAVA_INT_MAX
        || !rs_state_int(mf->wrote_position, &pos) || pos > size) {
        PyErr_SetString(PyExc_ValueError, "attach: a start offset, a file size and a position within it expected");
        return NULL;
    }
    if (mf->mapping == NULL || mf->mapping == Py_None) {
        PyErr_SetString(PyExc_ValueError, "attach: the file is not mapped");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(mf->mapping, &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (len < size) {
        PyErr_SetString(PyExc_ValueError, "attach: the mapping is shorter than the file");
        return NULL;
    }
    Py_XSETREF(self->file, Py_NewRef(file));
    Py_XSETREF(self->mapping, Py_NewRef(mf->mapping));
    self->from = from;
    self->size = size;
    self->pos = pos;
    Py_RETURN_NONE;
}

static PyObject *
appender_detach(Appender *self, PyObject *Py_UNUSED(unused))
{
    Py_CLEAR(self->file);
    Py_CLEAR(self->mapping);
    Py_RETURN_NONE;
}

/* The declined answer of put_behind. */
static PyObject *
appender_declined(Appender *self)
{
    self->declined++;
    Py_RETURN_NONE;
}

/* The queue offset of the prepared message `p` from the queue table (0 for a message without queue
 * entry): >= 0, -1 for a value it does not take, -2 after an error. */
static long long
appender_queue_offset(Appender *self, PyObject *p)
{
    if (PyTuple_GET_ITEM(p, P_IN_QUEUE) != Py_True) {
        return 0;
    }
    PyObject *in_table = PyDict_GetItemWithError(self->queue_table, PyTuple_GET_ITEM(p, P_QUEUE_KEY));
    if (in_table == NULL) {
        return PyErr_Occurred() ? -2 : 0;
    }
    int ok = 1;
    long long offset = PyLong_Check(in_table) ? rs_int_field(in_table, 0, LLONG_MAX / 32, &ok) : -1;
    return ok ? offset : -1;
}

/* The record of `p` at the held position, the queue table, the file's write position and clock bit and
 * `marks` moved on, the PutResult. NULL after an error, None (counted) when declined. */
static PyObject *
appender_write(Appender *self, PyObject *p, long long store_ts, PyObject *store_ts_obj, rs_WriteMarks *marks)
{
    struct packed r;
    long long queue_offset = appender_queue_offset(self, p);
    if (queue_offset == -2) {
        return NULL;
    }
    long long phy = self->from + self->pos;
    if (queue_offset < 0 || !rs_packed_of(p, store_ts, PyBytes_GET_SIZE(self->store_ip), &r)
        || r.size >= self->record_limit || r.size + self->blank_size > self->size - self->pos
        || phy > LLONG_MAX / 4) {
        return appender_declined(self); /* the file rolls, or the record goes in by pwrite: the Python way */
    }
    Py_buffer view;
    if (PyObject_GetBuffer(self->mapping, &view, PyBUF_WRITABLE) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
            return NULL;
        }
        PyErr_Clear(); /* the mapping was closed: the Python way maps the file again */
        return appender_declined(self);
    }
    if (view.len < self->size) {
        PyBuffer_Release(&view);
        return appender_declined(self);
    }
    /* every new object first: once the record is written, only assignments follow */
    PyObject *phy_obj = PyLong_FromLongLong(phy);
    PyObject *offset_obj = PyLong_FromLongLong(queue_offset);
    PyObject *next_obj = PyLong_FromLongLong(queue_offset + 1);
    PyObject *pos_obj = PyLong_FromLongLong(self->pos + r.size);
    PyObject *end_obj = PyLong_FromLongLong(phy + r.size);
    PyObject *answer = NULL;
    if (phy_obj != NULL && offset_obj != NULL && next_obj != NULL && pos_obj != NULL && end_obj != NULL) {
        answer = rs_put_result_of(self->result_cls, self->result_slots, self->status, self->prefix, p, phy_obj,
                                  offset_obj, store_ts_obj);
    }
    if (answer != NULL && PyTuple_GET_ITEM(p, P_IN_QUEUE) == Py_True
        && PyDict_SetItem(self->queue_table, PyTuple_GET_ITEM(p, P_QUEUE_KEY), next_obj) < 0) {
        Py_CLEAR(answer); /* the table unchanged: nothing is written */
    }
    if (answer != NULL) {
        rs_write_record((unsigned char *)view.buf + self->pos, &r, phy, queue_offset, store_ts, self->store_ip,
                        self->store_port);
        self->pos += r.size;
        self->written++;
        rs_MappedFileState *mf = (rs_MappedFileState *)self->file;
        Py_XSETREF(mf->wrote_position, Py_NewRef(pos_obj));
        rs_state_touch(&mf->touched); /* the mapping budget's clock bit: the file being written stays mapped */
        Py_XSETREF(marks->behind_to, Py_NewRef(end_obj));
        Py_XSETREF(marks->last_store_timestamp, Py_NewRef(store_ts_obj));
    }
    PyBuffer_Release(&view);
    Py_XDECREF(phy_obj);
    Py_XDECREF(offset_obj);
    Py_XDECREF(next_obj);
    Py_XDECREF(pos_obj);
    Py_XDECREF(end_obj);
    return answer;
}

/* put_behind's work, the store lock held. */
static PyObject *
appender_put_locked(Appender *self, PyObject *const *args)
{
    long long position = -1;
    if (self->file == NULL || !rs_state_int(((rs_MappedFileState *)self->file)->wrote_position, &position)
        || position != self->pos) {
        return appender_declined(self);
    }
    PyObject *p = rs_prepare_one(args[0], &self->call, &self->memo);
    if (p == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            return NULL;
        }
        PyErr_Clear(); /* a lone surrogate: the Python way names the field */
        return appender_declined(self);
    }
    if (p == Py_None) {
        Py_DECREF(p);
        return appender_declined(self);
    }
    PyObject *store_ts_obj = self->clock == Py_None ? system_clock_ms() : PyObject_CallNoArgs(self->clock);
    PyObject *answer = NULL;
    if (store_ts_obj != NULL) {
        int ok = 1;
        long long store_ts = PyLong_Check(store_ts_obj) ? rs_int_field(store_ts_obj, LLONG_MIN, LLONG_MAX, &ok) : 0;
        answer = ok && PyLong_Check(store_ts_obj)
                     ? appender_write(self, p, store_ts, store_ts_obj, (rs_WriteMarks *)args[1])
                     : appender_declined(self);
        Py_DECREF(store_ts_obj);
    }
    Py_DECREF(p);
    return answer;
}

/* put_behind(message, marks) -> PutResult or None: see the type's comment. It takes the store lock it
 * was made with for the whole call; while `marks.putting_behind` is not True (the store stopped leaving
 * dispatch behind) it writes nothing and answers None. `marks` is the WriteMarks the put moves on; a file
 * whose write position is not the one the appender holds was written by someone else, and the call
 * declines. */
static PyObject *
appender_put_behind(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyObject_TypeCheck(args[1], &rs_WriteMarksType)) {
        PyErr_SetString(PyExc_TypeError, "put_behind(message, marks): marks must be a WriteMarks");
        return NULL;
    }
    store_lock_take(self->lock, -1);
    PyObject *answer = ((rs_WriteMarks *)args[1])->putting_behind == Py_True ? appender_put_locked(self, args)
                                                                              : Py_NewRef(Py_None);
    store_lock_give(self->lock);
    return answer;
}

static PyMethodDef appender_methods[] = {
    {"attach", (PyCFunction)appender_attach, METH_O,
     "attach(file): the commitlog file (a mapped MappedFile) to write."},
    {"detach", (PyCFunction)appender_detach, METH_NOARGS, "Let the attached file's mapping go."},
    {"put_behind", (PyCFunction)(void (*)(void))appender_put_behind, METH_FASTCALL,
     "put_behind(message, marks) -> PutResult or None (declined: nothing written)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef appender_members[] = {
    {"position", T_LONGLONG, offsetof(Appender, pos), READONLY, "The write position in the attached file."},
    {"written", T_LONGLONG, offsetof(Appender, written), READONLY, "Records written."},
    {"declined", T_LONGLONG, offsetof(Appender, declined), READONLY, "Calls declined."},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject rs_AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._speedups.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The plain ASYNC put's record writer: its own write position, end and store timestamp.",
    .tp_new = appender_new,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_clear = (inquiry)appender_clear,
    .tp_methods = appender_methods,
    .tp_members = appender_members,
};

