/* The compiled helpers of the services layer (rocketstore.services), each the twin of a Python function:
 *
 *   walk_records(buf, pos, ...)       rocketstore.services.recovery.walk_records_py: the recovery walk
 *                                     over one commitlog file, checking each record
 *   dispatch_requests(cls, buf, ...)  rocketstore.services.dispatch.dispatch_requests_py: the catch-up's
 *                                     dispatch requests of a run of records
 *   pack_requests(reqs, ...)          rocketstore.services.dispatch.pack_requests_py: what write_packed
 *                                     writes for them (queue runs, index groups)
 *   dispatch_packed(cls, buf, ...)    rocketstore.services.dispatch.dispatch_packed_py: the two above in
 *                                     one pass over the bytes (the catch-up's path)
 *
 * They read records with format.c's checks (rs_layout_of) and stop where the twin must decide. */

#include "common.h"

/* What lies at `at`, with `room` bytes of the buffer from there and `within` of them before the limit
 * (within <= room): RECORD_WHOLE with `total` and `l` filled for a whole, well-formed record that ends
 * within the limit (the checks decode_message makes, with rs_layout_of's), RECORD_BLANK for a blank
 * record, RECORD_OTHER for anything else (the twin's full decode says what). */
enum record_here { RECORD_WHOLE, RECORD_BLANK, RECORD_OTHER };

static enum record_here
record_here(const unsigned char *at, long long room, long long within, long long *total, struct layout *l)
{
    if (room < 8) {
        return RECORD_OTHER;
    }
    *total = read_be(at + REC_TOTALSIZE_POS, REC_TOTALSIZE_WIDTH);
    unsigned long magic = (unsigned long)(read_be(at + REC_MAGICCODE_POS, REC_MAGICCODE_WIDTH) & 0xFFFFFFFFLL);
    if (magic == BLANK_MAGIC) {
        return RECORD_BLANK;
    }
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || *total < MIN_RECORD_SIZE || *total > within) {
        return RECORD_OTHER;
    }
    if (rs_layout_of(at, *total, magic, l) < 0) {
        PyErr_Clear(); /* lengths that do not add up: the twin names them */
        return RECORD_OTHER;
    }
    return RECORD_WHOLE;
}

/* walk_records(buffer, pos, file_start, check_crc) -> (pos, count, stop): the recovery walk over one
 * commitlog file's mapping from `pos`, passing every record that is whole and well formed (the checks
 * of layout_of), claims its own physical offset (file_start + its position), has a body CRC that
 * matches when check_crc is true, and is not torn (its last byte of data is not zero); it stops at a
 * blank record (WALK_BLANK) or at anything else (WALK_CHECK: the twin's full decode says why).
 * rocketstore.services.recovery.walk_records_py is its twin. */
PyObject *
speedups_walk_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "walk_records(buffer, pos, file_start, check_crc) takes four arguments");
        return NULL;
    }
    long long pos = PyLong_AsLongLong(args[1]);
    long long file_start = PyLong_AsLongLong(args[2]);
    int check_crc = PyObject_IsTrue(args[3]);
    if ((pos == -1 || file_start == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (check_crc < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    long long size = (long long)view.len;
    long long count = 0;
    int stop = WALK_CHECK;
    if (pos < 0 || pos > size) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "walk_records: position outside the buffer");
        return NULL;
    }
    while (1) {
        const unsigned char *at = buf + pos;
        long long total;
        struct layout l;
        enum record_here here = record_here(at, size - pos, size - pos, &total, &l);
        if (here != RECORD_WHOLE) {
            stop = here == RECORD_BLANK ? WALK_BLANK : WALK_CHECK;
            break;
        }
        if (l.phy_offset != file_start + pos) {
            break;
        }
        if (check_crc && l.body_end > l.body_start) {
            uint32_t crc = rs_crc32(0, at + l.body_start, (size_t)(l.body_end - l.body_start)) & CRC_MASK;
            if ((long long)crc != read_be(at + REC_BODYCRC_POS, REC_BODYCRC_WIDTH)) {
                break;
            }
        }
        long long last = total - 1 - (total > l.props_start ? 0 : 2); /* torn: see recovery._torn */
        if (at[last] == 0) {
            break;
        }
        pos += total;
        count++;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(LLi)", pos, count, stop);
}

/* The value of property `name` of the record's properties text [p, end) as a str (UTF-8, bad bytes
 * replaced, as the properties dict would hold it), or NULL with no error when there is none. */
static PyObject *
property_value(const char *p, const char *end, const char *name)
{
    const char *value, *value_end;
    if (p >= end || !rs_last_property(p, end, name, strlen(name), &value, &value_end)) {
        return NULL;
    }
    return PyUnicode_DecodeUTF8(value, value_end - value, "replace");
}

/* dispatch_request's tuple from the record's TAGS, KEYS and UNIQ_KEY values (each borrowed, or NULL). */
static PyObject *
dispatch_request_of(PyTypeObject *cls, const unsigned char *at, const struct layout *l, long long total,
                    PyObject *topic, PyObject *tags, PyObject *keys_text, PyObject *uniq)
{
    long long code = 0; /* format.javahash.tags_code */
    if (tags != NULL && PyUnicode_GET_LENGTH(tags) > 0) {
        if (ready(tags) < 0) {
            return NULL;
        }
        code = (int32_t)hash_units(0, tags);
    }
    PyObject *keys; /* format.properties.split_keys, as a tuple */
    if (keys_text != NULL && PyUnicode_GET_LENGTH(keys_text) > 0) {
        PyObject *tokens = rs_space_separated(keys_text);
        keys = tokens == NULL ? NULL : PyList_AsTuple(tokens);
        Py_XDECREF(tokens);
    } else {
        keys = PyTuple_New(0);
    }
    if (keys == NULL) {
        return NULL;
    }
    long long born_ip_len = l->sys_flag & BORN_V6 ? IPV6_WIDTH : IPV4_WIDTH;
    long long store_ts = read_be(at + FIXED_HEAD_SIZE + born_ip_len + REC_AFTER_BORN_IP_STORETIMESTAMP_POS, REC_STORETIMESTAMP_WIDTH);
    PyObject *req = cls->tp_alloc(cls, DISPATCH_FIELDS);
    if (req == NULL) {
        Py_DECREF(keys);
        return NULL;
    }
    PyObject *items[DISPATCH_FIELDS] = {
        [D_TOPIC] = Py_NewRef(topic),
        [D_QUEUE_ID] = PyLong_FromLongLong(read_be(at + REC_QUEUEID_POS, REC_QUEUEID_WIDTH)),
        [D_PHY_OFFSET] = PyLong_FromLongLong(l->phy_offset),
        [D_SIZE] = PyLong_FromLongLong(total),
        [D_TAGS_CODE] = PyLong_FromLongLong(code),
        [D_STORE_TIMESTAMP] = PyLong_FromLongLong(store_ts),
        [D_QUEUE_OFFSET] = PyLong_FromLongLong(read_be(at + REC_QUEUEOFFSET_POS, REC_QUEUEOFFSET_WIDTH)),
        [D_KEYS] = keys,
        [D_UNIQ_KEY] = Py_NewRef(uniq != NULL ? uniq : Py_None),
        [D_SYS_FLAG] = PyLong_FromLongLong(l->sys_flag),
    };
    int failed = 0;
    for (int i = 0; i < DISPATCH_FIELDS; i++) {
        failed |= items[i] == NULL;
        PyTuple_SET_ITEM(req, i, items[i]);
    }
    if (failed) {
        Py_DECREF(req);
        return NULL;
    }
    return req;
}

/* The DispatchRequest of the record at `at` (`total` bytes, checked by layout_of into `l`): a new
 * reference, NULL after an error. Only TAGS, KEYS and UNIQ_KEY of its properties are decoded. */
static PyObject *
dispatch_request(PyTypeObject *cls, const unsigned char *at, long long total, const struct layout *l,
                 PyObject *topic)
{
    const char *props = (const char *)at + l->props_start, *props_end = (const char *)at + total;
    PyObject *found[3]; /* new references: TAGS, KEYS, UNIQ_KEY or NULL */
    const char *names[3] = {"TAGS", "KEYS", "UNIQ_KEY"};
    for (int i = 0; i < 3; i++) {
        found[i] = property_value(props, props_end, names[i]);
        if (found[i] == NULL && PyErr_Occurred()) {
            for (int j = 0; j < i; j++) {
                Py_XDECREF(found[j]);
            }
            return NULL;
        }
    }
    PyObject *req = dispatch_request_of(cls, at, l, total, topic, found[0], found[1], found[2]);
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(found[i]);
    }
    return req;
}

/* The buffer of a run of records [pos, limit) into `view` (released by the caller): 0, or -1 with
 * ValueError naming `who` when the positions fall outside it. */
static int
run_view(PyObject *buffer, long long pos, long long limit, const char *who, Py_buffer *view)
{
    if (PyObject_GetBuffer(buffer, view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (pos < 0 || limit < pos || limit > (long long)view->len) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s: positions outside the buffer", who);
        return -1;
    }
    return 0;
}

/* dispatch_requests(cls, buffer, pos, limit, max_count, held_topic, out) -> (pos, stop): the catch-up's
 * requests for the records of one commitlog file's mapping from `pos`: for each whole, well-formed
 * record that ends by `limit` (the file's written bytes), `cls` (services.dispatch.DispatchRequest) made
 * as request_from_message makes it, appended to `out`; at most `max_count` of them. It stops at `limit`
 * or after max_count (REQUESTS_MORE), at a blank record (REQUESTS_BLANK), and before anything else: a
 * record that is not whole or well formed, or one of `held_topic` (SCHEDULE_TOPIC_XXXX, whose delay
 * the twin reads) (REQUESTS_CHECK). services.dispatch.dispatch_requests_py is its twin. */
PyObject *
speedups_dispatch_requests(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "dispatch_requests takes seven arguments");
        return NULL;
    }
    PyObject *cls = args[0], *held_topic = args[5], *out = args[6];
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type) || !PyUnicode_Check(held_topic)
        || !PyList_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "dispatch_requests: a tuple class, a str and a list expected");
        return NULL;
    }
    long long pos = PyLong_AsLongLong(args[2]);
    long long limit = PyLong_AsLongLong(args[3]);
    long long max_count = PyLong_AsLongLong(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (run_view(args[1], pos, limit, "dispatch_requests", &view) < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    struct topic_cache cache = {.len = -1, .text = NULL};
    int stop = REQUESTS_MORE, failed = 0;
    for (long long count = 0; pos < limit && count < max_count; count++) {
        const unsigned char *at = buf + pos;
        long long total;
        struct layout l;
        enum record_here here = record_here(at, (long long)view.len - pos, limit - pos, &total, &l);
        if (here != RECORD_WHOLE) { /* a blank record is seen as decode_message sees it: in the whole buffer */
            stop = here == RECORD_BLANK ? REQUESTS_BLANK : REQUESTS_CHECK;
            break;
        }
        PyObject *topic = rs_topic_of((const char *)at + l.topic_start, l.topic_len, &cache);
        if (topic == NULL) {
            failed = 1;
            break;
        }
        int held = PyUnicode_Compare(topic, held_topic);
        if (held == -1 && PyErr_Occurred()) {
            Py_DECREF(topic);
            failed = 1;
            break;
        }
        if (held == 0) {
            Py_DECREF(topic);
            stop = REQUESTS_CHECK;
            break;
        }
        PyObject *req = dispatch_request((PyTypeObject *)cls, at, total, &l, topic);
        Py_DECREF(topic);
        if (req == NULL || PyList_Append(out, req) < 0) {
            Py_XDECREF(req);
            failed = 1;
            break;
        }
        Py_DECREF(req);
        pos += total;
    }
    Py_XDECREF(cache.text);
    PyBuffer_Release(&view);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(Li)", pos, stop);
}

/* The run of entries being filled for one queue: a list [first offset, units, ends, newest request,
 * next offset] (pack_requests_py's shape), appended to `runs_of` when `queue_offset` does not follow
 * its last run. A borrowed reference, NULL after an error. */
static PyObject *
queue_run_for(PyObject *runs_of, PyObject *req, long long queue_offset)
{
    Py_ssize_t n = PyList_GET_SIZE(runs_of);
    if (n > 0) {
        PyObject *last = PyList_GET_ITEM(runs_of, n - 1);
        long long next = PyLong_AsLongLong(PyList_GET_ITEM(last, 4));
        if (next == -1 && PyErr_Occurred()) {
            return NULL;
        }
        if (next == queue_offset) {
            return last;
        }
    }
    PyObject *offset = PyTuple_GET_ITEM(req, D_QUEUE_OFFSET);
    PyObject *units = PyByteArray_FromStringAndSize(NULL, 0);
    PyObject *ends = units == NULL ? NULL : PyByteArray_FromStringAndSize(NULL, 0);
    PyObject *run = ends == NULL ? NULL : PyList_New(5);
    if (run == NULL) {
        Py_XDECREF(units);
        Py_XDECREF(ends);
        return NULL;
    }
    PyList_SET_ITEM(run, 0, Py_NewRef(offset));
    PyList_SET_ITEM(run, 1, units);
    PyList_SET_ITEM(run, 2, ends);
    PyList_SET_ITEM(run, 3, Py_NewRef(req));
    PyList_SET_ITEM(run, 4, Py_NewRef(offset));
    int failed = PyList_Append(runs_of, run);
    Py_DECREF(run);
    return failed ? NULL : run;
}

/* `n` more bytes at the end of a bytearray: where they go, NULL after an error. */
static unsigned char *
grow(PyObject *bytes, Py_ssize_t n)
{
    Py_ssize_t had = PyByteArray_GET_SIZE(bytes);
    if (PyByteArray_Resize(bytes, had + n) < 0) {
        return NULL;
    }
    return (unsigned char *)PyByteArray_AS_STRING(bytes) + had;
}

/* One request's queue entry into its queue's run. 0, or -1 after an error. */
static int
add_queue_entry(PyObject *queues, PyObject *order, PyObject *req, long long phy, long long size, long long tags,
                long long queue_offset)
{
    PyObject *key = PyTuple_Pack(2, PyTuple_GET_ITEM(req, D_TOPIC), PyTuple_GET_ITEM(req, D_QUEUE_ID));
    if (key == NULL) {
        return -1;
    }
    PyObject *runs_of = PyDict_GetItemWithError(queues, key); /* borrowed */
    if (runs_of == NULL) {
        runs_of = PyErr_Occurred() ? NULL : PyList_New(0);
        int failed = runs_of == NULL || PyDict_SetItem(queues, key, runs_of) < 0 || PyList_Append(order, key) < 0;
        Py_XDECREF(runs_of); /* the dict holds it */
        if (failed) {
            Py_DECREF(key);
            return -1;
        }
    }
    Py_DECREF(key);
    PyObject *run = queue_run_for(runs_of, req, queue_offset);
    unsigned char *unit = run == NULL ? NULL : grow(PyList_GET_ITEM(run, 1), UNIT_SIZE);
    unsigned char *end = unit == NULL ? NULL : grow(PyList_GET_ITEM(run, 2), 8);
    PyObject *next = end == NULL ? NULL : PyLong_FromLongLong(queue_offset + 1);
    if (next == NULL) {
        return -1;
    }
    write_be(unit + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, (uint64_t)phy, CQ_COMMITLOG_PHYSICAL_OFFSET_WIDTH);
    write_be(unit + CQ_MESSAGE_SIZE_POS, (uint64_t)size, CQ_MESSAGE_SIZE_WIDTH);
    write_be(unit + CQ_TAGS_HASH_CODE_POS, (uint64_t)tags, CQ_TAGS_HASH_CODE_WIDTH);
    int64_t record_end = phy + size;
    memcpy(end, &record_end, 8);
    Py_SETREF(PyList_GET_ITEM(run, 3), Py_NewRef(req)); /* the newest of the run */
    Py_SETREF(PyList_GET_ITEM(run, 4), next);
    return 0;
}

/* The index group being filled: the records of one store millisecond. */
struct index_group {
    long long store_ts;
    PyObject *keys; /* bytearray, NULL while no group is open */
    int last_keyless;
    long long with_keys;
};

/* Close the open group into `groups` as (store timestamp, keys, ends keyless, with keys). */
static int
close_group(struct index_group *g, PyObject *groups)
{
    if (g->keys == NULL) {
        return 0;
    }
    PyObject *group = Py_BuildValue("(LNOL)", g->store_ts, g->keys, g->last_keyless ? Py_True : Py_False,
                                    g->with_keys);
    g->keys = NULL;
    int failed = group == NULL || PyList_Append(groups, group) < 0;
    Py_XDECREF(group);
    return failed ? -1 : 0;
}

/* Make `g` the open group of store millisecond `store_ts`, closing the one open for another millisecond
 * into `groups`: 0, or -1 after an error. */
static int
open_group(struct index_group *g, PyObject *groups, long long store_ts)
{
    if (g->keys != NULL && g->store_ts != store_ts && close_group(g, groups) < 0) {
        return -1;
    }
    if (g->keys == NULL) {
        *g = (struct index_group){.store_ts = store_ts, .keys = PyByteArray_FromStringAndSize(NULL, 0)};
        if (g->keys == NULL) {
            return -1;
        }
    }
    return 0;
}

/* What pack_requests builds as it goes: the queues' runs (queues, in `order`), the closed index groups
 * and the open one (g), all owned by it; the last topic's hash (borrowed topic). */
struct request_pack {
    long long queue_from, index_from;
    int inclusive;
    PyObject *queues, *order, *groups;
    struct index_group g;
    PyObject *last_topic;
    uint32_t topic_hash;
};

/* The index keys of the request `req` (phy offset `phy`, store time `store_ts`) into the open group of its
 * store millisecond (the previous group closed when the millisecond changes): 0, or -1 after an error
 * (TypeError for keys of another shape). */
static int
pack_request_keys(struct request_pack *s, PyObject *req, long long phy, long long store_ts)
{
    struct index_group *g = &s->g;
    if (open_group(g, s->groups, store_ts) < 0) {
        return -1;
    }
    PyObject *topic = PyTuple_GET_ITEM(req, D_TOPIC), *keys = PyTuple_GET_ITEM(req, D_KEYS);
    PyObject *uniq = PyTuple_GET_ITEM(req, D_UNIQ_KEY);
    Py_ssize_t count = rs_index_key_count(topic, keys, uniq);
    if (count < 0) {
        if (count == -1) {
            PyErr_SetString(PyExc_TypeError, "pack_requests: keys must be a tuple of str, uniq_key a str or None");
        }
        return -1;
    }
    g->last_keyless = count == 0;
    if (count > 0) {
        g->with_keys++;
        if (topic != s->last_topic) {
            s->topic_hash = 31u * hash_units(0, topic) + '#';
            s->last_topic = topic;
        }
        unsigned char *out = grow(g->keys, count * INDEX_KEY_SIZE);
        if (out == NULL) {
            return -1;
        }
        rs_pack_index_keys(out, s->topic_hash, phy, keys, uniq);
    }
    return 0;
}

/* One DispatchRequest `req` into `s`: its queue entry and its index keys, as far as the record takes
 * them. 0, or -1 after an error (TypeError for a value that is not a DispatchRequest). */
static int
pack_request(struct request_pack *s, PyObject *req)
{
    if (!PyTuple_Check(req) || PyTuple_GET_SIZE(req) != DISPATCH_FIELDS
        || !PyUnicode_Check(PyTuple_GET_ITEM(req, D_TOPIC))) {
        PyErr_SetString(PyExc_TypeError, "pack_requests: DispatchRequests expected");
        return -1;
    }
    long long phy = PyLong_AsLongLong(PyTuple_GET_ITEM(req, D_PHY_OFFSET));
    long long size = PyLong_AsLongLong(PyTuple_GET_ITEM(req, D_SIZE));
    long long tags = PyLong_AsLongLong(PyTuple_GET_ITEM(req, D_TAGS_CODE));
    long long store_ts = PyLong_AsLongLong(PyTuple_GET_ITEM(req, D_STORE_TIMESTAMP));
    long long queue_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(req, D_QUEUE_OFFSET));
    long long sys_flag = PyLong_AsLongLong(PyTuple_GET_ITEM(req, D_SYS_FLAG));
    if (PyErr_Occurred()) {
        return -1;
    }
    int type = 1 << ((sys_flag & TRANSACTION_MASK) >> TRANSACTION_SHIFT);
    if (phy >= s->queue_from && (QUEUED_TRANSACTION_TYPES & type)
        && add_queue_entry(s->queues, s->order, req, phy, size, tags, queue_offset) < 0) {
        return -1;
    }
    if (!(s->inclusive ? phy >= s->index_from : phy > s->index_from) || !(INDEXED_TRANSACTION_TYPES & type)) {
        return 0;
    }
    return pack_request_keys(s, req, phy, store_ts);
}

/* The runs of the queues in `order` (their runs in `queues`), as (key, first offset, units, ends, newest
 * request) in a new list; NULL after an error. */
static PyObject *
runs_in_order(PyObject *queues, PyObject *order)
{
    PyObject *runs = PyList_New(0);
    for (Py_ssize_t q = 0; runs != NULL && q < PyList_GET_SIZE(order); q++) {
        PyObject *key = PyList_GET_ITEM(order, q);
        PyObject *runs_of = PyDict_GetItem(queues, key); /* borrowed; there by construction */
        for (Py_ssize_t r = 0; runs != NULL && r < PyList_GET_SIZE(runs_of); r++) {
            PyObject *run = PyList_GET_ITEM(runs_of, r);
            PyObject *item = Py_BuildValue("(OOOOO)", key, PyList_GET_ITEM(run, 0), PyList_GET_ITEM(run, 1),
                                           PyList_GET_ITEM(run, 2), PyList_GET_ITEM(run, 3));
            if (item == NULL || PyList_Append(runs, item) < 0) {
                Py_CLEAR(runs);
            }
            Py_XDECREF(item);
        }
    }
    return runs;
}

/* pack_requests(reqs, queue_from, index_from, inclusive) -> (runs, groups): what Dispatcher.write_packed
 * writes for the DispatchRequests `reqs` (log order): each queue's runs of entries with consecutive queue
 * offsets (key, first offset, units, ends, newest request), queues in the order they first appear, and
 * the index keys of each store millisecond (store timestamp, keys, ends keyless, with keys); which
 * records get which is format.sysflag's rule, generated into _layout.h.
 * services.dispatch.pack_requests_py is its twin. */
PyObject *
speedups_pack_requests(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "pack_requests(reqs, queue_from, index_from, inclusive) takes four arguments");
        return NULL;
    }
    PyObject *reqs = args[0];
    struct request_pack s = {.g = {.keys = NULL}, .last_topic = NULL, .topic_hash = 0};
    s.queue_from = PyLong_AsLongLong(args[1]);
    s.index_from = PyLong_AsLongLong(args[2]);
    s.inclusive = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred() || s.inclusive < 0) {
        return NULL;
    }
    if (!PyList_Check(reqs)) {
        PyErr_SetString(PyExc_TypeError, "pack_requests: reqs must be a list");
        return NULL;
    }
    PyObject *result = NULL;
    s.queues = PyDict_New(), s.order = PyList_New(0), s.groups = PyList_New(0);
    if (s.queues == NULL || s.order == NULL || s.groups == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(reqs); i++) {
        if (pack_request(&s, PyList_GET_ITEM(reqs, i)) < 0) {
            goto done;
        }
    }
    if (close_group(&s.g, s.groups) < 0) {
        goto done;
    }
    PyObject *runs = runs_in_order(s.queues, s.order);
    if (runs != NULL) {
        result = Py_BuildValue("(NO)", runs, s.groups);
    }
done:
    Py_XDECREF(s.g.keys);
    Py_XDECREF(s.queues);
    Py_XDECREF(s.order);
    Py_XDECREF(s.groups);
    return result;
}

/* Java's String.hashCode continued from `h` over the UTF-16 units of the UTF-8 bytes [p, p + n) decoded
 * as the properties are (bad bytes replaced): on the bytes when they are ASCII, else through the str.
 * 0 with *out set, -1 after an error. */
static int
hash_utf8(uint32_t h, const char *p, Py_ssize_t n, uint32_t *out)
{
    Py_ssize_t i = 0;
    while (i < n && !(p[i] & 0x80)) {
        h = 31u * h + (unsigned char)p[i++];
    }
    if (i == n) {
        *out = h;
        return 0;
    }
    PyObject *text = PyUnicode_DecodeUTF8(p + i, n - i, "replace");
    if (text == NULL || ready(text) < 0) {
        Py_XDECREF(text);
        return -1;
    }
    *out = hash_units(h, text);
    Py_DECREF(text);
    return 0;
}

/* One index key into the group's keys (put_index_pair), hashed from its UTF-8 bytes. */
static int
put_index_key(PyObject *keys, uint32_t topic_hash, long long phy, const char *key, Py_ssize_t len)
{
    uint32_t h;
    unsigned char *out = hash_utf8(topic_hash, key, len, &h) < 0 ? NULL : grow(keys, INDEX_KEY_SIZE);
    if (out == NULL) {
        return -1;
    }
    put_index_pair(out, h, phy);
    return 0;
}

/* The values dispatch reads of a record's properties: TAGS, KEYS and UNIQ_KEY, each [start, end) of the
 * last well-formed segment of that name (rs_last_property's rule), start NULL when there is none. */
struct dispatch_values {
    const char *tags, *tags_end, *keys, *keys_end, *uniq, *uniq_end;
};

/* The three values of the UTF-8 properties text [p, end) in one pass (three rs_last_property calls'
 * answers). */
static void
dispatch_values_of(const char *p, const char *end, struct dispatch_values *v)
{
    *v = (struct dispatch_values){NULL, NULL, NULL, NULL, NULL, NULL};
    while (p < end) {
        const char *stop = memchr(p, 0x02, (size_t)(end - p));
        if (stop == NULL) {
            stop = end;
        }
        const char *sep = memchr(p, 0x01, (size_t)(stop - p));
        if (sep != NULL && sep >= p + 1 && sep < stop - 1) {
            size_t len = (size_t)(sep - p);
            if (len == 4 && memcmp(p, "TAGS", 4) == 0) {
                v->tags = sep + 1;
                v->tags_end = stop;
            } else if (len == 4 && memcmp(p, "KEYS", 4) == 0) {
                v->keys = sep + 1;
                v->keys_end = stop;
            } else if (len == 8 && memcmp(p, "UNIQ_KEY", 8) == 0) {
                v->uniq = sep + 1;
                v->uniq_end = stop;
            }
        }
        p = stop + 1;
    }
}

/* The index keys of one record into the group: UNIQ_KEY, then each non-empty KEYS token, as
 * index_keys_of orders them. How many it wrote, -1 after an error. */
static Py_ssize_t
put_index_keys(PyObject *keys, uint32_t topic_hash, long long phy, const struct dispatch_values *v)
{
    Py_ssize_t count = 0;
    if (v->uniq != NULL) {
        if (put_index_key(keys, topic_hash, phy, v->uniq, v->uniq_end - v->uniq) < 0) {
            return -1;
        }
        count++;
    }
    if (v->keys != NULL) {
        for (const char *token = v->keys; token < v->keys_end;) { /* a space is never inside a replaced sequence */
            const char *space = memchr(token, ' ', (size_t)(v->keys_end - token));
            const char *token_end = space == NULL ? v->keys_end : space;
            if (token_end > token) {
                if (put_index_key(keys, topic_hash, phy, token, token_end - token) < 0) {
                    return -1;
                }
                count++;
            }
            token = token_end + 1;
        }
    }
    return count;
}

/* A queue met by dispatch_packed: (topic, queue id) as its runs' key and the hash of "topic#". */
struct packed_queue {
    const unsigned char *topic; /* into the buffer */
    long long topic_len, queue_id;
    PyObject *key;
    uint32_t topic_hash;
    Py_ssize_t rank; /* the order of its first queue entry among the queues', -1 before it has one */
};

/* A queue entry dispatch_packed will write: its queue's rank (packed_queue.rank), the record's place. */
struct packed_entry {
    Py_ssize_t queue;
    long long queue_offset, phy, size, tags, pos;
};

#define QUEUE_SLOTS 64 /* packed_queue_of's direct-mapped cache of queues */

/* The index of the queue of the record at `at` in `queues` (added, with its key and topic hash, when
 * new), -1 after an error. `slots` (QUEUE_SLOTS of them, -1 when empty) remembers the queue last found
 * for a hash of the queue id and the topic's length and ends, so most records compare one queue; a miss
 * compares every queue met in this call (at most max_count of them). */
static Py_ssize_t
packed_queue_of(struct packed_queue **queues, Py_ssize_t *count, Py_ssize_t *cap, Py_ssize_t *slots,
                const unsigned char *at, const struct layout *l)
{
    const unsigned char *topic = at + l->topic_start;
    long long queue_id = read_be(at + REC_QUEUEID_POS, REC_QUEUEID_WIDTH);
    uint32_t spread = (uint32_t)queue_id * 2654435761u ^ (uint32_t)l->topic_len * 40503u;
    if (l->topic_len > 0) {
        spread ^= (uint32_t)topic[0] * 97u ^ (uint32_t)topic[l->topic_len - 1] * 7919u;
    }
    Py_ssize_t *slot = &slots[(spread ^ spread >> 16) % QUEUE_SLOTS];
    for (Py_ssize_t probe = -1; probe < *count; probe++) {
        Py_ssize_t q = probe < 0 ? *slot : probe;
        if (q < 0) {
            continue;
        }
        struct packed_queue *s = &(*queues)[q];
        if (s->queue_id == queue_id && s->topic_len == l->topic_len && memcmp(s->topic, topic, (size_t)s->topic_len) == 0) {
            *slot = q;
            return q;
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)topic, l->topic_len, "replace");
    if (text == NULL || ready(text) < 0) {
        Py_XDECREF(text);
        return -1;
    }
    for (Py_ssize_t q = 0; q < *count; q++) { /* other bytes, the same str (bad bytes replaced): one queue */
        struct packed_queue *s = &(*queues)[q];
        int same = s->queue_id == queue_id ? PyUnicode_Compare(PyTuple_GET_ITEM(s->key, 0), text) : 1;
        if (same == -1 && PyErr_Occurred()) {
            Py_DECREF(text);
            return -1;
        }
        if (same == 0) {
            Py_DECREF(text);
            *slot = q;
            return q;
        }
    }
    if (*count == *cap) {
        Py_ssize_t grown = *cap * 2 + 8;
        struct packed_queue *more = PyMem_Realloc(*queues, (size_t)grown * sizeof(**queues));
        if (more == NULL) {
            Py_DECREF(text);
            PyErr_NoMemory();
            return -1;
        }
        *queues = more;
        *cap = grown;
    }
    PyObject *qid = PyLong_FromLongLong(queue_id);
    PyObject *key = qid == NULL ? NULL : PyTuple_Pack(2, text, qid);
    if (key == NULL) {
        Py_DECREF(text);
        Py_XDECREF(qid);
        return -1;
    }
    (*queues)[*count] = (struct packed_queue){.topic = topic, .topic_len = l->topic_len, .queue_id = queue_id,
                                              .key = key, .topic_hash = 31u * hash_units(0, text) + '#',
                                              .rank = -1};
    Py_DECREF(text);
    Py_DECREF(qid);
    *slot = *count;
    return (*count)++;
}

/* The queue runs of dispatch_packed's entries: each queue's entries (queues in the order of their first
 * entry, entries in log order) cut where a queue offset does not follow the last, each run as (key, first offset, units,
 * ends, newest request), the newest made by dispatch_request from its record. A new list, NULL after
 * an error. */
static PyObject *
packed_runs(PyTypeObject *cls, const unsigned char *buf, Py_ssize_t len, const struct packed_queue *queues,
            Py_ssize_t queue_count, const struct packed_entry *entries, Py_ssize_t count)
{
    PyObject **keys = PyMem_Malloc((size_t)(queue_count + 1) * sizeof(PyObject *)); /* by rank */
    if (keys == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t q = 0; q < queue_count; q++) {
        if (queues[q].rank >= 0) {
            keys[queues[q].rank] = queues[q].key;
        }
    }
    Py_ssize_t *order = PyMem_Malloc((size_t)(count + 1) * sizeof(Py_ssize_t)); /* entries by queue */
    Py_ssize_t *start = PyMem_Calloc((size_t)queue_count + 1, sizeof(Py_ssize_t));
    PyObject *runs = order == NULL || start == NULL ? NULL : PyList_New(0);
    if (runs == NULL) {
        if (order == NULL || start == NULL) {
            PyErr_NoMemory();
        }
        PyMem_Free(order);
        PyMem_Free(start);
        PyMem_Free(keys);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) { /* a stable counting sort by queue rank */
        start[entries[i].queue + 1]++;
    }
    for (Py_ssize_t q = 0; q < queue_count; q++) {
        start[q + 1] += start[q];
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        order[start[entries[i].queue]++] = i;
    }
    for (Py_ssize_t from = 0; runs != NULL && from < count;) {
        const struct packed_entry *first = &entries[order[from]];
        Py_ssize_t to = from + 1;
        while (to < count && entries[order[to]].queue == first->queue
               && entries[order[to]].queue_offset == entries[order[to - 1]].queue_offset + 1) {
            to++;
        }
        PyObject *units = PyByteArray_FromStringAndSize(NULL, (to - from) * UNIT_SIZE);
        PyObject *ends = units == NULL ? NULL : PyByteArray_FromStringAndSize(NULL, (to - from) * 8);
        const struct packed_entry *newest = &entries[order[to - 1]];
        long long total;
        struct layout l;
        PyObject *req = NULL;
        if (ends != NULL && record_here(buf + newest->pos, len - newest->pos, len - newest->pos, &total, &l) == RECORD_WHOLE) {
            PyObject *topic = PyTuple_GET_ITEM(keys[first->queue], 0);
            req = dispatch_request(cls, buf + newest->pos, total, &l, topic);
        } else if (ends != NULL) {
            PyErr_SetString(PyExc_RuntimeError, "dispatch_packed: a record changed under the dispatch");
        }
        PyObject *item = req == NULL ? NULL : Py_BuildValue("(OLOOO)", keys[first->queue], first->queue_offset,
                                                            units, ends, req);
        if (item != NULL) {
            unsigned char *unit = (unsigned char *)PyByteArray_AS_STRING(units);
            unsigned char *end = (unsigned char *)PyByteArray_AS_STRING(ends);
            for (Py_ssize_t k = from; k < to; k++, unit += UNIT_SIZE, end += 8) {
                const struct packed_entry *e = &entries[order[k]];
                write_be(unit + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, (uint64_t)e->phy, CQ_COMMITLOG_PHYSICAL_OFFSET_WIDTH);
                write_be(unit + CQ_MESSAGE_SIZE_POS, (uint64_t)e->size, CQ_MESSAGE_SIZE_WIDTH);
                write_be(unit + CQ_TAGS_HASH_CODE_POS, (uint64_t)e->tags, CQ_TAGS_HASH_CODE_WIDTH);
                int64_t record_end = e->phy + e->size;
                memcpy(end, &record_end, 8);
            }
        }
        if (item == NULL || PyList_Append(runs, item) < 0) {
            Py_CLEAR(runs);
        }
        Py_XDECREF(item);
        Py_XDECREF(units);
        Py_XDECREF(ends);
        Py_XDECREF(req);
        from = to;
    }
    PyMem_Free(order);
    PyMem_Free(start);
    PyMem_Free(keys);
    return runs;
}

/* The tags code of a record: format.javahash.tags_code of its TAGS, 0 without. 0 with *code set, -1
 * after an error. */
static int
tags_code_of(const struct dispatch_values *v, long long *code)
{
    uint32_t h = 0;
    if (v->tags != NULL && hash_utf8(0, v->tags, v->tags_end - v->tags, &h) < 0) {
        return -1;
    }
    *code = (int32_t)h;
    return 0;
}

/* What dispatch_packed reads its records with (the held topic, the bounds of the queue entries and the
 * index keys; borrowed) and builds as it goes (the queues met, the queue entries, the closed index
 * groups and the open one: owned, freed by packed_scan_release). */
struct packed_scan {
    PyObject *held_topic;
    const char *held;
    Py_ssize_t held_len;
    int held_by_bytes, inclusive;
    long long queue_from, index_from;
    struct packed_queue *queues;
    struct packed_entry *entries;
    Py_ssize_t queue_count, queue_cap, entry_count, entry_cap, ranks, slots[QUEUE_SLOTS];
    PyObject *groups;
    struct index_group g;
};

/* dispatch_packed's arguments but the buffer into `s` (nothing owned yet) and pos, limit, max_count: 0,
 * or -1 with TypeError (or the error of reading one). */
static int
packed_scan_of(PyObject *const *args, Py_ssize_t nargs, struct packed_scan *s, long long *pos, long long *limit,
               long long *max_count)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "dispatch_packed takes nine arguments");
        return -1;
    }
    PyObject *cls = args[0], *held_topic = args[5];
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type) || !PyUnicode_Check(held_topic)) {
        PyErr_SetString(PyExc_TypeError, "dispatch_packed: a tuple class and a str expected");
        return -1;
    }
    *pos = PyLong_AsLongLong(args[2]);
    *limit = PyLong_AsLongLong(args[3]);
    *max_count = PyLong_AsLongLong(args[4]);
    s->queue_from = PyLong_AsLongLong(args[6]);
    s->index_from = PyLong_AsLongLong(args[7]);
    s->inclusive = PyObject_IsTrue(args[8]);
    if (PyErr_Occurred() || s->inclusive < 0) {
        return -1;
    }
    s->held_topic = held_topic;
    s->held = PyUnicode_AsUTF8AndSize(held_topic, &s->held_len);
    if (s->held == NULL) {
        return -1;
    }
    s->held_by_bytes = PyUnicode_FindChar(held_topic, 0xFFFD, 0, PyUnicode_GET_LENGTH(held_topic), 1) == -1;
    return 0;
}

/* What packed_scan_of did not set: nothing met yet, every queue slot empty, no group. */
static void
packed_scan_init(struct packed_scan *s)
{
    s->queues = NULL, s->entries = NULL, s->groups = NULL;
    s->queue_count = 0, s->queue_cap = 0, s->entry_count = 0, s->entry_cap = 0, s->ranks = 0;
    for (int k = 0; k < QUEUE_SLOTS; k++) {
        s->slots[k] = -1;
    }
    s->g = (struct index_group){.keys = NULL};
}

static void
packed_scan_release(struct packed_scan *s)
{
    Py_XDECREF(s->g.keys);
    Py_XDECREF(s->groups);
    for (Py_ssize_t q = 0; q < s->queue_count; q++) {
        Py_DECREF(s->queues[q].key);
    }
    PyMem_Free(s->queues);
    PyMem_Free(s->entries);
}

/* The queue entry of the record at `at` (its layout `l`, `total` bytes at `pos`, tags in `values`) in
 * the queue q: 0, or -1 after an error. */
static inline int
scan_entry(struct packed_scan *s, Py_ssize_t q, const unsigned char *at, const struct layout *l, long long total,
           long long pos, const struct dispatch_values *values)
{
    if (s->entry_count == s->entry_cap) {
        Py_ssize_t grown = s->entry_cap * 2 + 64;
        struct packed_entry *more = PyMem_Realloc(s->entries, (size_t)grown * sizeof(*s->entries));
        if (more == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        s->entries = more;
        s->entry_cap = grown;
    }
    if (s->queues[q].rank < 0) {
        s->queues[q].rank = s->ranks++;
    }
    struct packed_entry *e = &s->entries[s->entry_count];
    *e = (struct packed_entry){.queue = s->queues[q].rank,
                               .queue_offset = read_be(at + REC_QUEUEOFFSET_POS, REC_QUEUEOFFSET_WIDTH),
                               .phy = l->phy_offset, .size = total, .pos = pos};
    if (tags_code_of(values, &e->tags) < 0) {
        return -1;
    }
    s->entry_count++;
    return 0;
}

/* The index keys of a record of queue q (at `phy`, stored at `store_ts`, keys in `values`) into the open
 * group of its store millisecond (the previous one closed when it changes): 0, or -1 after an error. */
static inline int
scan_keys(struct packed_scan *s, Py_ssize_t q, long long phy, long long store_ts, const struct dispatch_values *values)
{
    struct index_group *g = &s->g;
    if (open_group(g, s->groups, store_ts) < 0) {
        return -1;
    }
    Py_ssize_t written = put_index_keys(g->keys, s->queues[q].topic_hash, phy, values);
    if (written < 0) {
        return -1;
    }
    g->last_keyless = written == 0;
    g->with_keys += written > 0;
    return 0;
}

/* The whole record at `at` (layout `l`, `total` bytes at `pos`) into `s`: its queue, its queue entry and
 * index keys as far as the record takes them. 1 with *store_ts its store timestamp, 0 when it is of the
 * held topic (the run stops before it), -1 after an error. */
static inline int
scan_record(struct packed_scan *s, const unsigned char *at, const struct layout *l, long long total, long long pos,
            long long *store_ts)
{
    if (s->held_by_bytes ? l->topic_len == s->held_len && memcmp(at + l->topic_start, s->held, (size_t)s->held_len) == 0
                         : 0) {
        return 0;
    }
    Py_ssize_t q = packed_queue_of(&s->queues, &s->queue_count, &s->queue_cap, s->slots, at, l);
    if (q < 0) {
        return -1;
    }
    if (!s->held_by_bytes) {
        int same = PyUnicode_Compare(PyTuple_GET_ITEM(s->queues[q].key, 0), s->held_topic);
        if (same == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (same == 0) {
            return 0;
        }
    }
    struct dispatch_values values;
    dispatch_values_of((const char *)at + l->props_start, (const char *)at + total, &values);
    long long born_ip_len = l->sys_flag & BORN_V6 ? IPV6_WIDTH : IPV4_WIDTH;
    *store_ts = read_be(at + FIXED_HEAD_SIZE + born_ip_len + REC_AFTER_BORN_IP_STORETIMESTAMP_POS, REC_STORETIMESTAMP_WIDTH);
    long long phy = l->phy_offset;
    int type = 1 << ((l->sys_flag & TRANSACTION_MASK) >> TRANSACTION_SHIFT);
    if (phy >= s->queue_from && (QUEUED_TRANSACTION_TYPES & type) && scan_entry(s, q, at, l, total, pos, &values) < 0) {
        return -1;
    }
    if ((s->inclusive ? phy >= s->index_from : phy > s->index_from) && (INDEXED_TRANSACTION_TYPES & type)
        && scan_keys(s, q, phy, *store_ts, &values) < 0) {
        return -1;
    }
    return 1;
}

/* dispatch_packed(cls, buffer, pos, limit, max_count, held_topic, queue_from, index_from, inclusive)
 *   -> (pos, stop, runs, groups, count, last store timestamp or None):
 * what dispatch_requests and then pack_requests make of the same records, in one pass over the bytes
 * with no object per record: the records dispatch_requests would make requests of (it stops where that
 * stops, with the same pos and stop), packed as pack_requests packs them (runs and groups of the same
 * shapes; a run's newest request made from its record), how many records it took and the store
 * timestamp of the last. services.dispatch.dispatch_packed_py is its twin. */
PyObject *
speedups_dispatch_packed(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    struct packed_scan s;
    long long pos, limit, max_count;
    if (packed_scan_of(args, nargs, &s, &pos, &limit, &max_count) < 0) {
        return NULL;
    }
    Py_buffer view;
    if (run_view(args[1], pos, limit, "dispatch_packed", &view) < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    packed_scan_init(&s);
    s.groups = PyList_New(0);
    PyObject *runs = NULL, *result = NULL;
    long long last_ts = -1; /* a record's store timestamp is any int64: `count` says whether there is one */
    int stop = REQUESTS_MORE;
    long long count = 0;
    if (s.groups == NULL) {
        goto done;
    }
    for (; pos < limit && count < max_count; count++) {
        const unsigned char *at = buf + pos;
        long long total, store_ts;
        struct layout l;
        enum record_here here = record_here(at, (long long)view.len - pos, limit - pos, &total, &l);
        if (here != RECORD_WHOLE) {
            stop = here == RECORD_BLANK ? REQUESTS_BLANK : REQUESTS_CHECK;
            break;
        }
        if (pos + 2 * total <= limit) { /* the next record's head and, if it is as long, its tail */
            __builtin_prefetch(at + total);
            __builtin_prefetch(at + 2 * total - 64);
        }
        int took = scan_record(&s, at, &l, total, pos, &store_ts);
        if (took < 0) {
            goto done;
        }
        if (took == 0) {
            stop = REQUESTS_CHECK;
            break;
        }
        last_ts = store_ts;
        pos += total;
    }
    if (close_group(&s.g, s.groups) < 0) {
        goto done;
    }
    runs = packed_runs((PyTypeObject *)args[0], buf, (Py_ssize_t)view.len, s.queues, s.queue_count, s.entries,
                       s.entry_count);
    PyObject *last = runs == NULL ? NULL : count > 0 ? PyLong_FromLongLong(last_ts) : Py_NewRef(Py_None);
    if (last != NULL) {
        result = Py_BuildValue("(LiOOLN)", pos, stop, runs, s.groups, count, last);
    }
    Py_XDECREF(runs);
done:
    packed_scan_release(&s);
    PyBuffer_Release(&view);
    return result;
}
