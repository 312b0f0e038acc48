/*
 * rocketstore._speedups, store layer: the append pipeline's kernels: pack_run (a run of prepared messages
 * into one commitlog file's records, their queue units and index keys), put_results, and put_one (the
 * single put's fast branch).
 */
#include "common.h"
#include "store.h"

/* pack_run reads the fields of rocketstore.store.prepare.Prepared by the generated enum prepared_field. */

/* Reads the fields of the Prepared tuple `p` into `r` (its record being stored at `store_ts` next to a
 * store host of `store_ip_len` bytes): 1 when each is within its header field and the parts add up to
 * its size, 0 when not (the Python twin then encodes it, and raises for a value out of range). The queue
 * and index parts are the caller's. */
int
rs_packed_of(PyObject *p, long long store_ts, Py_ssize_t store_ip_len, struct packed *r)
{
    if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != PREPARED_FIELDS) {
        return 0;
    }
    int ok = 1;
    r->p = p;
    r->size = rs_int_field(PyTuple_GET_ITEM(p, P_SIZE), 0, JAVA_INT_MAX, &ok);
    r->crc = rs_int_field(PyTuple_GET_ITEM(p, P_BODY_CRC), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->queue_id = rs_int_field(PyTuple_GET_ITEM(p, P_QUEUE_ID), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->flag = rs_int_field(PyTuple_GET_ITEM(p, P_FLAG), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->record_flag = rs_int_field(PyTuple_GET_ITEM(p, P_RECORD_SYS_FLAG), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    PyObject *born_ts = PyTuple_GET_ITEM(p, P_BORN_TIMESTAMP);
    r->born_has_ts = born_ts != Py_None;
    r->born_ts = r->born_has_ts ? rs_int_field(born_ts, LLONG_MIN, LLONG_MAX, &ok) : store_ts;
    r->born_port = rs_int_field(PyTuple_GET_ITEM(p, P_BORN_PORT), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->reconsume = rs_int_field(PyTuple_GET_ITEM(p, P_RECONSUME_TIMES), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->prepared_offset = rs_int_field(PyTuple_GET_ITEM(p, P_PREPARED_OFFSET), LLONG_MIN, LLONG_MAX, &ok);
    r->code = rs_int_field(PyTuple_GET_ITEM(p, P_TAGS_CODE), LLONG_MIN, LLONG_MAX, &ok);
    PyObject *body = PyTuple_GET_ITEM(p, P_BODY), *tail = PyTuple_GET_ITEM(p, P_TAIL);
    PyObject *born_ip = PyTuple_GET_ITEM(p, P_BORN_IP);
    if (!ok || !PyBytes_Check(body) || !PyBytes_Check(tail) || !PyBytes_Check(born_ip)
        || (PyBytes_GET_SIZE(born_ip) != IPV4_WIDTH && PyBytes_GET_SIZE(born_ip) != IPV6_WIDTH) || PyBytes_GET_SIZE(body) > JAVA_INT_MAX) {
        return 0;
    }
    long long header = REC_HEADER_V4_SIZE - 2 * IPV4_WIDTH + PyBytes_GET_SIZE(born_ip) + store_ip_len;
    return r->size == header + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(tail);
}

/* The record of `r` at `out` (r->size bytes), as append_run.encode_record encodes it: the header
 * (MAGIC_V1, the born timestamp or else the store timestamp, the store host), BODY and the tail. */
void
rs_write_record(unsigned char *out, const struct packed *r, long long phy, long long queue_offset, long long store_ts,
             PyObject *store_ip, long long store_port)
{
    PyObject *p = r->p;
    PyObject *body = PyTuple_GET_ITEM(p, P_BODY), *tail = PyTuple_GET_ITEM(p, P_TAIL);
    PyObject *born_ip = PyTuple_GET_ITEM(p, P_BORN_IP);
    write_be(out + REC_TOTALSIZE_POS, (uint64_t)r->size, REC_TOTALSIZE_WIDTH);
    write_be(out + REC_MAGICCODE_POS, MAGIC_V1, REC_MAGICCODE_WIDTH);
    write_be(out + REC_BODYCRC_POS, (uint64_t)r->crc, REC_BODYCRC_WIDTH);
    write_be(out + REC_QUEUEID_POS, (uint64_t)r->queue_id, REC_QUEUEID_WIDTH);
    write_be(out + REC_FLAG_POS, (uint64_t)r->flag, REC_FLAG_WIDTH);
    write_be(out + REC_QUEUEOFFSET_POS, (uint64_t)queue_offset, REC_QUEUEOFFSET_WIDTH);
    write_be(out + REC_PHYSICALOFFSET_POS, (uint64_t)phy, REC_PHYSICALOFFSET_WIDTH);
    write_be(out + REC_SYSFLAG_POS, (uint64_t)r->record_flag, REC_SYSFLAG_WIDTH);
    write_be(out + REC_BORNTIMESTAMP_POS, (uint64_t)r->born_ts, REC_BORNTIMESTAMP_WIDTH);
    unsigned char *at = out + FIXED_HEAD_SIZE;
    memcpy(at, PyBytes_AS_STRING(born_ip), (size_t)PyBytes_GET_SIZE(born_ip));
    at += PyBytes_GET_SIZE(born_ip);
    write_be(at + REC_AFTER_BORN_IP_BORNHOST_PORT_POS, (uint64_t)r->born_port, REC_BORNHOST_PORT_WIDTH);
    write_be(at + REC_AFTER_BORN_IP_STORETIMESTAMP_POS, (uint64_t)store_ts, REC_STORETIMESTAMP_WIDTH);
    at += REC_AFTER_BORN_IP_SIZE;
    memcpy(at, PyBytes_AS_STRING(store_ip), (size_t)PyBytes_GET_SIZE(store_ip));
    at += PyBytes_GET_SIZE(store_ip);
    write_be(at + REC_AFTER_STORE_IP_STOREHOST_PORT_POS, (uint64_t)store_port, REC_STOREHOST_PORT_WIDTH);
    write_be(at + REC_AFTER_STORE_IP_RECONSUMETIMES_POS, (uint64_t)r->reconsume, REC_RECONSUMETIMES_WIDTH);
    write_be(at + REC_AFTER_STORE_IP_PREPAREDTRANSACTIONOFFSET_POS, (uint64_t)r->prepared_offset, REC_PREPAREDTRANSACTIONOFFSET_WIDTH);
    write_be(at + REC_AFTER_STORE_IP_BODYLENGTH_POS, (uint64_t)PyBytes_GET_SIZE(body), REC_BODYLENGTH_WIDTH);
    at += REC_AFTER_STORE_IP_SIZE;
    memcpy(at, PyBytes_AS_STRING(body), (size_t)PyBytes_GET_SIZE(body));
    at += PyBytes_GET_SIZE(body);
    memcpy(at, PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail));
}

/* The queues of one pack_run call, so that each message costs no dictionary lookups: a queue's key
 * (the first key object met for it, borrowed from its Prepared), the next queue offset (written back to
 * queue_table at the end), how many of the call's messages it takes and, in pass 2, where the next of
 * their 20-byte units goes in its per_queue bytearray. A run stops before a message of a queue beyond
 * RUN_QUEUES: the next call takes it. */
#define RUN_QUEUES 16

struct run_queue {
    PyObject *key;
    long long next;
    Py_ssize_t count;   /* this call's entries of the queue (pass 1) */
    unsigned char *out; /* where the next of them goes in the queue's units (pass 2) */
};

/* 1 when two queue keys are equal, 0 when not, -1 after an error: the common keys, (str, int) tuples,
 * compared item by item without a rich comparison; any other pair by ==. */
static int
same_queue_key(PyObject *a, PyObject *b)
{
    if (a == b) {
        return 1;
    }
    if (PyTuple_CheckExact(a) && PyTuple_CheckExact(b) && PyTuple_GET_SIZE(a) == 2 && PyTuple_GET_SIZE(b) == 2) {
        PyObject *topic_a = PyTuple_GET_ITEM(a, 0), *topic_b = PyTuple_GET_ITEM(b, 0);
        PyObject *queue_a = PyTuple_GET_ITEM(a, 1), *queue_b = PyTuple_GET_ITEM(b, 1);
        if (PyUnicode_CheckExact(topic_a) && PyUnicode_CheckExact(topic_b) && PyLong_CheckExact(queue_a)
            && PyLong_CheckExact(queue_b)) {
            int overflow_a = 0, overflow_b = 0;
            long long id_a = PyLong_AsLongLongAndOverflow(queue_a, &overflow_a);
            long long id_b = PyLong_AsLongLongAndOverflow(queue_b, &overflow_b);
            if (!overflow_a && !overflow_b && !PyErr_Occurred()) {
                if (id_a != id_b) {
                    return 0;
                }
                return topic_a == topic_b || PyUnicode_Compare(topic_a, topic_b) == 0;
            }
            PyErr_Clear();
        }
    }
    return PyObject_RichCompareBool(a, b, Py_EQ);
}

/* The slot of `key` (a (topic, queue id) tuple) among the run's `n` queues: -1 when it is not there,
 * -2 after an error. Two keys match as the dict matches them, by equality. */
static int
run_queue_of(struct run_queue *queues, int n, PyObject *key)
{
    for (int q = 0; q < n; q++) {
        int equal = same_queue_key(queues[q].key, key);
        if (equal != 0) {
            return equal < 0 ? -2 : q;
        }
    }
    return -1;
}

/* Each queue's next queue offset into queue_table (under the key object met first). */
static int
write_back_queues(PyObject *queue_table, const struct run_queue *queues, int n)
{
    for (int q = 0; q < n; q++) {
        PyObject *next = PyLong_FromLongLong(queues[q].next);
        int failed = next == NULL || PyDict_SetItem(queue_table, queues[q].key, next) < 0;
        Py_XDECREF(next);
        if (failed) {
            return -1;
        }
    }
    return 0;
}

/* How many index keys a message of `topic` (a str) has: its UNIQ_KEY (None or a str) and each of its
 * KEYS (a tuple of str), the empty left out; -1 for other types (pack_run leaves the message to its twin), -2 after an
 * error. */
Py_ssize_t
rs_index_key_count(PyObject *topic, PyObject *keys, PyObject *uniq)
{
    if (!PyUnicode_Check(topic) || !PyTuple_Check(keys) || (uniq != Py_None && !PyUnicode_Check(uniq))) {
        return -1;
    }
    if (ready(topic) < 0) {
        return -2;
    }
    Py_ssize_t count = 0;
    if (uniq != Py_None) {
        if (ready(uniq) < 0) {
            return -2;
        }
        count += PyUnicode_GET_LENGTH(uniq) > 0;
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(keys); k++) {
        PyObject *key = PyTuple_GET_ITEM(keys, k);
        if (!PyUnicode_Check(key)) {
            return -1;
        }
        if (ready(key) < 0) {
            return -2;
        }
        count += PyUnicode_GET_LENGTH(key) > 0;
    }
    return count;
}

/* One index key as IndexFile.put_keys takes it (put_index_pair), the hash being Java's hash of
 * "topic#key" (topic_hash: the hash of "topic#"). */
static unsigned char *
pack_index_key(unsigned char *out, uint32_t topic_hash, long long phy, PyObject *key)
{
    return put_index_pair(out, hash_units(topic_hash, key), phy);
}

/* The keys that index_key_count counted, UNIQ_KEY first. */
unsigned char *
rs_pack_index_keys(unsigned char *out, uint32_t topic_hash, long long phy, PyObject *keys, PyObject *uniq)
{
    if (uniq != Py_None && PyUnicode_GET_LENGTH(uniq) > 0) {
        out = pack_index_key(out, topic_hash, phy, uniq);
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(keys); k++) {
        PyObject *key = PyTuple_GET_ITEM(keys, k);
        if (PyUnicode_GET_LENGTH(key) > 0) {
            out = pack_index_key(out, topic_hash, phy, key);
        }
    }
    return out;
}

/* The 20-byte units of the queue `key` in per_queue, (first queue offset, bytearray), grown by `count`
 * units: where the first of them goes. A queue met for the first time in the batch gets
 * (first_offset, bytearray()). NULL after an error (TypeError for a per_queue value of another shape). */
static unsigned char *
grow_queue_units(PyObject *per_queue, PyObject *key, long long first_offset, Py_ssize_t count)
{
    PyObject *run = PyDict_GetItemWithError(per_queue, key); /* borrowed */
    if (run == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        PyObject *units = PyByteArray_FromStringAndSize(NULL, 0);
        PyObject *first = units == NULL ? NULL : PyLong_FromLongLong(first_offset);
        run = first == NULL ? NULL : PyTuple_Pack(2, first, units);
        Py_XDECREF(units);
        Py_XDECREF(first);
        if (run == NULL || PyDict_SetItem(per_queue, key, run) < 0) {
            Py_XDECREF(run);
            return NULL;
        }
        Py_DECREF(run); /* the dict holds it */
    }
    if (!PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 2 || !PyByteArray_Check(PyTuple_GET_ITEM(run, 1))) {
        PyErr_SetString(PyExc_TypeError, "pack_run: a per_queue value must be (first queue offset, bytearray)");
        return NULL;
    }
    PyObject *units = PyTuple_GET_ITEM(run, 1);
    Py_ssize_t had = PyByteArray_GET_SIZE(units);
    if (PyByteArray_Resize(units, had + count * UNIT_SIZE) < 0) {
        return NULL;
    }
    unsigned char *at = (unsigned char *)PyByteArray_AS_STRING(units) + had;
    memset(at, 0, (size_t)(count * UNIT_SIZE)); /* written in pass 2; zeros if it stops on an error */
    return at;
}

/* The per-message table of pack_run: freed unless it is the call's own small array. */
static void
release_runs(struct packed *runs, struct packed *few)
{
    if (runs != few) {
        PyMem_Free(runs);
    }
}

/* The arguments of one pack_run call, checked (borrowed references). */
struct pack_call {
    PyObject *prepared, *queue_table, *store_ip, *per_queue, *index_keys, *placed;
    Py_ssize_t i, stop, store_ip_len;
    long long phy, room, store_ts, store_port;
};

/* pack_run's twelve arguments into `c`: 0, or -1 with TypeError / ValueError (or the int's error). */
static int
pack_call_of(PyObject *const *args, Py_ssize_t nargs, struct pack_call *c)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "pack_run takes twelve arguments");
        return -1;
    }
    c->prepared = args[0], c->queue_table = args[6], c->store_ip = args[7], c->per_queue = args[9];
    c->index_keys = args[10], c->placed = args[11];
    if (!PyList_Check(c->prepared) || !PyDict_Check(c->queue_table) || !PyBytes_Check(c->store_ip)
        || !PyDict_Check(c->per_queue) || !PyByteArray_Check(c->index_keys) || !PyList_Check(c->placed)) {
        PyErr_SetString(PyExc_TypeError, "pack_run: lists, dicts, bytes and a bytearray expected");
        return -1;
    }
    c->i = PyLong_AsSsize_t(args[1]);
    c->stop = PyLong_AsSsize_t(args[2]);
    c->phy = PyLong_AsLongLong(args[3]);
    c->room = PyLong_AsLongLong(args[4]);
    c->store_ts = PyLong_AsLongLong(args[5]);
    c->store_port = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred()) {
        return -1;
    }
    c->store_ip_len = PyBytes_GET_SIZE(c->store_ip);
    if (c->i < 0 || c->stop > PyList_GET_SIZE(c->prepared) || c->phy < 0 || c->phy > LLONG_MAX / 2
        || (c->store_ip_len != IPV4_WIDTH && c->store_ip_len != IPV6_WIDTH) || c->store_port < JAVA_INT_MIN
        || c->store_port > JAVA_INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "pack_run: index, offset or store host out of range");
        return -1;
    }
    return 0;
}

/* What pass 1 of pack_run takes: the messages (runs[:taken]), their bytes and index keys, their queues.
 * `runs` is `few` or a PyMem block: the caller frees it with release_runs, on every path. */
struct pack_plan {
    struct packed few[8]; /* a single put, a small batch: no allocation */
    struct packed *runs;
    Py_ssize_t taken, total_keys;
    long long total;
    struct run_queue queues[RUN_QUEUES];
    int queue_count;
};

/* The run's slot of the queue `key` (a new one, at the queue_table's next offset or 0, for a queue met
 * first): its index; -1 when the run stops before this message (no slot left, an offset at the edge);
 * -2 after an error. */
static int
plan_queue_of(struct pack_plan *plan, PyObject *queue_table, PyObject *key)
{
    int q = run_queue_of(plan->queues, plan->queue_count, key);
    if (q != -1) {
        return q;
    }
    if (plan->queue_count == RUN_QUEUES) {
        return -1;
    }
    PyObject *known = PyDict_GetItemWithError(queue_table, key);
    if (known == NULL && PyErr_Occurred()) {
        return -2;
    }
    int fits = 1;
    long long next = 0;
    if (known != NULL) {
        /* a queue offset must stay an int64 after this run's messages: leave the edge to the twin */
        next = rs_int_field(known, 0, LLONG_MAX / 2, &fits);
    }
    if (!fits) {
        return -1;
    }
    q = plan->queue_count++;
    plan->queues[q].key = key;
    plan->queues[q].next = next;
    plan->queues[q].count = 0;
    plan->queues[q].out = NULL;
    return q;
}

/* Pass 1 of pack_run into `plan`: how many messages fit and are within their fields; nothing is changed
 * yet. 0, or -1 after an error (MemoryError, a truth value's or a key's error). */
static int
pack_plan_of(const struct pack_call *c, struct pack_plan *plan)
{
    Py_ssize_t count = c->stop > c->i ? c->stop - c->i : 0;
    plan->runs = count <= 8 ? plan->few : PyMem_Malloc(sizeof(struct packed) * (size_t)count);
    plan->taken = 0, plan->total_keys = 0, plan->total = 0, plan->queue_count = 0;
    if (plan->runs == NULL) {
        plan->runs = plan->few;
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = c->i; j < c->stop; j++) {
        PyObject *p = PyList_GET_ITEM(c->prepared, j);
        struct packed *r = &plan->runs[plan->taken];
        int ok = rs_packed_of(p, c->store_ts, c->store_ip_len, r);
        if (ok) {
            (void)rs_int_field(PyTuple_GET_ITEM(p, P_DELAY_LEVEL), 0, 0, &ok); /* delayed: the twin */
        }
        if (!ok || plan->total + r->size > c->room) {
            break;
        }
        int in_queue = PyObject_IsTrue(PyTuple_GET_ITEM(p, P_IN_QUEUE));
        int indexed = PyObject_IsTrue(PyTuple_GET_ITEM(p, P_INDEXED));
        if (in_queue < 0 || indexed < 0) {
            return -1;
        }
        r->keys = 0;
        if (indexed) {
            r->keys = rs_index_key_count(PyTuple_GET_ITEM(p, P_TOPIC), PyTuple_GET_ITEM(p, P_KEYS),
                                         PyTuple_GET_ITEM(p, P_UNIQ_KEY));
            if (r->keys == -2) {
                return -1;
            }
            if (r->keys < 0) {
                break;
            }
        }
        if (in_queue) {
            int q = plan_queue_of(plan, c->queue_table, PyTuple_GET_ITEM(p, P_QUEUE_KEY));
            if (q == -2) {
                return -1;
            }
            if (q == -1) {
                break;
            }
            plan->queues[q].count++;
            r->queue = q;
        }
        r->in_queue = in_queue;
        r->indexed = indexed;
        plan->total += r->size;
        plan->total_keys += r->keys;
        plan->taken++;
    }
    return 0;
}

/* The outputs of pass 2 grown once for the plan: each queue's units in per_queue (plan->queues[q].out)
 * and the index keys' bytearray; where the keys go, or NULL after an error. */
static unsigned char *
pack_outputs_of(const struct pack_call *c, struct pack_plan *plan)
{
    for (int q = 0; q < plan->queue_count; q++) {
        struct run_queue *queue = &plan->queues[q];
        queue->out = grow_queue_units(c->per_queue, queue->key, queue->next, queue->count);
        if (queue->out == NULL) {
            return NULL;
        }
    }
    Py_ssize_t keys_had = PyByteArray_GET_SIZE(c->index_keys);
    if (PyByteArray_Resize(c->index_keys, keys_had + plan->total_keys * INDEX_KEY_SIZE) < 0) {
        return NULL;
    }
    return (unsigned char *)PyByteArray_AS_STRING(c->index_keys) + keys_had;
}

/* The placement (phy, queue offset, store timestamp `stamp`) of a message at `phy`, a new tuple, with its
 * queue unit written when `queue` is not NULL (its next offset then taken); NULL after an error.
 * `*queue_offset` is the message's queue offset (0 without a queue). */
static inline PyObject *
placement_of(struct run_queue *queue, const struct packed *r, long long phy, PyObject *stamp,
             long long *queue_offset)
{
    PyObject *phy_obj = PyLong_FromLongLong(phy);
    PyObject *qo_obj = NULL;
    *queue_offset = 0;
    if (phy_obj == NULL) {
        return NULL;
    }
    if (queue != NULL) {
        *queue_offset = queue->next++;
        qo_obj = PyLong_FromLongLong(*queue_offset);
        if (qo_obj == NULL) {
            Py_DECREF(phy_obj);
            return NULL;
        }
        write_be(queue->out + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, (uint64_t)phy, CQ_COMMITLOG_PHYSICAL_OFFSET_WIDTH);
        write_be(queue->out + CQ_MESSAGE_SIZE_POS, (uint64_t)r->size, CQ_MESSAGE_SIZE_WIDTH);
        write_be(queue->out + CQ_TAGS_HASH_CODE_POS, (uint64_t)r->code, CQ_TAGS_HASH_CODE_WIDTH);
        queue->out += UNIT_SIZE;
    } else {
        qo_obj = PyLong_FromLong(0);
    }
    PyObject *place = qo_obj == NULL ? NULL : PyTuple_Pack(3, phy_obj, qo_obj, stamp);
    if (place != NULL) {
        rs_untrack_if_atomic(place);
    }
    Py_DECREF(phy_obj);
    Py_XDECREF(qo_obj);
    return place;
}

/* Pass 2 of pack_run: queue offsets, queue units, index keys, placements and the bytes (into `records`,
 * plan->total bytes) of the plan's messages, then the queue_table's next offsets: 0, or -1 after an
 * error. Owns nothing. */
static int
pack_write(const struct pack_call *c, struct pack_plan *plan, PyObject *records, PyObject *stamp)
{
    unsigned char *key_out = pack_outputs_of(c, plan);
    if (key_out == NULL) {
        return -1;
    }
    PyObject *last_topic = NULL; /* borrowed: messages of one topic reuse its hash */
    uint32_t topic_hash = 0;
    long long phy = c->phy;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(records);
    for (Py_ssize_t k = 0; k < plan->taken; k++) {
        const struct packed *r = &plan->runs[k];
        PyObject *p = r->p;
        long long queue_offset;
        PyObject *place = placement_of(r->in_queue ? &plan->queues[r->queue] : NULL, r, phy, stamp, &queue_offset);
        if (place == NULL) {
            return -1;
        }
        if (r->keys > 0) {
            PyObject *topic = PyTuple_GET_ITEM(p, P_TOPIC);
            if (topic != last_topic) {
                topic_hash = 31u * hash_units(0, topic) + '#';
                last_topic = topic;
            }
            key_out = rs_pack_index_keys(key_out, topic_hash, phy, PyTuple_GET_ITEM(p, P_KEYS),
                                         PyTuple_GET_ITEM(p, P_UNIQ_KEY));
        }
        int failed = PyList_Append(c->placed, place) < 0;
        Py_DECREF(place);
        if (failed) {
            return -1;
        }
        rs_write_record(out, r, phy, queue_offset, c->store_ts, c->store_ip, c->store_port);
        out += r->size;
        phy += r->size;
    }
    return write_back_queues(c->queue_table, plan->queues, plan->queue_count);
}

/* pack_run(prepared, i, stop, phy, room, store_ts, queue_table, store_ip, store_port, per_queue,
 * index_keys, placed) -> (next, records): the write loop of MessageStore._append for the
 * messages prepared[i:stop] that fit in `room` bytes of one commitlog file starting at `phy`, all with
 * store timestamp `store_ts`; rocketstore.store.append_run.pack_run_py is its twin and documents the rules. It
 * stops before a message it does not take (a delayed one, a value outside its header field): the twin
 * then runs for that message. */
PyObject *
speedups_pack_run(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    struct pack_call c;
    if (pack_call_of(args, nargs, &c) < 0) {
        return NULL;
    }
    struct pack_plan plan;
    if (pack_plan_of(&c, &plan) < 0) {
        release_runs(plan.runs, plan.few);
        return NULL;
    }
    PyObject *records = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)plan.total);
    PyObject *stamp = PyLong_FromLongLong(c.store_ts);
    if (records == NULL || stamp == NULL || pack_write(&c, &plan, records, stamp) < 0) {
        release_runs(plan.runs, plan.few);
        Py_XDECREF(records);
        Py_XDECREF(stamp);
        return NULL;
    }
    release_runs(plan.runs, plan.few);
    Py_DECREF(stamp);
    PyObject *next = PyLong_FromSsize_t(c.i + plan.taken);
    PyObject *answer = next == NULL ? NULL : PyTuple_Pack(2, next, records);
    Py_XDECREF(next);
    Py_DECREF(records);
    return answer;
}

/* put_results' arguments checked (a class with the eight slots, an ASCII prefix, lists of one length):
 * 0, or -1 with TypeError / ValueError. */
static int
put_results_check(PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) || !PyUnicode_Check(args[3])
        || !PyList_Check(args[4]) || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "put_results(cls, descriptors, status, prefix, prepared, placed): a class, a tuple, "
                        "a status, a str and two lists");
        return -1;
    }
    if (PyTuple_GET_SIZE(args[1]) != 8) {
        PyErr_SetString(PyExc_TypeError, "put_results: eight descriptors expected");
        return -1;
    }
    if (rs_check_slots((PyTypeObject *)args[0], args[1], "put_results") < 0) {
        return -1;
    }
    if (ready(args[3]) < 0) {
        return -1;
    }
    if (!PyUnicode_IS_ASCII(args[3])) {
        PyErr_SetString(PyExc_ValueError, "put_results: the message id prefix must be ASCII");
        return -1;
    }
    if (PyList_GET_SIZE(args[5]) != PyList_GET_SIZE(args[4])) {
        PyErr_SetString(PyExc_ValueError, "put_results: prepared and placed differ in length");
        return -1;
    }
    return 0;
}

/* The PutResult (a new reference) of the prepared message `p` placed at `where` (phy, queue offset,
 * store time), made with `empty` as put_results documents; NULL after an error (TypeError for a value
 * of another shape). */
static PyObject *
put_results_row(PyTypeObject *cls, PyObject *descriptors, PyObject *status, PyObject *prefix, PyObject *p,
                PyObject *where, PyObject *empty)
{
    static const char hex[] = "0123456789ABCDEF";
    if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) < PREPARED_FIELDS || !PyTuple_Check(where)
        || PyTuple_GET_SIZE(where) != 3) {
        PyErr_SetString(PyExc_TypeError, "put_results: a Prepared and a (phy, queue offset, store time) "
                                         "tuple expected");
        return NULL;
    }
    PyObject *phy = PyTuple_GET_ITEM(where, 0);
    unsigned long long phy_value = PyLong_AsUnsignedLongLong(phy);
    if (phy_value == (unsigned long long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t prefix_length = PyUnicode_GET_LENGTH(prefix);
    PyObject *msg_id = PyUnicode_New(prefix_length + MSG_ID_PHY_DIGITS, 127);
    if (msg_id == NULL) {
        return NULL;
    }
    char *id_chars = (char *)PyUnicode_DATA(msg_id);
    memcpy(id_chars, PyUnicode_DATA(prefix), (size_t)prefix_length);
    for (int k = MSG_ID_PHY_DIGITS - 1; k >= 0; k--) {
        id_chars[prefix_length + k] = hex[phy_value & 0xF];
        phy_value >>= 4;
    }
    PyObject *values[8] = {
        status, phy, PyTuple_GET_ITEM(where, 1), PyTuple_GET_ITEM(p, P_SIZE), msg_id,
        PyTuple_GET_ITEM(where, 2), PyTuple_GET_ITEM(p, P_TOPIC), PyTuple_GET_ITEM(p, P_QUEUE_ID),
    };
    PyObject *result = rs_new_with_slots(cls, descriptors, values, empty);
    Py_DECREF(msg_id);
    if (result == NULL) {
        return NULL;
    }
    /* Its fields are the status, one of PutStatus's members (module constants that refer to no
     * result), ints and strings: unless the topic or queue id is of a type the collector tracks,
     * it is part of no cycle (see rs_untrack_if_atomic). */
    if (!PyType_IS_GC(Py_TYPE(values[6])) && !PyType_IS_GC(Py_TYPE(values[7]))
        && !PyType_IS_GC(Py_TYPE(values[1])) && !PyType_IS_GC(Py_TYPE(values[2]))
        && !PyType_IS_GC(Py_TYPE(values[3])) && !PyType_IS_GC(Py_TYPE(values[5]))) {
        PyObject_GC_UnTrack(result);
    }
    return result;
}

/* put_results(cls, descriptors, status, prefix, prepared, placed): the PutResult of each prepared
 * message and its (phy, queue offset, store timestamp), as fill_slots(cls, descriptors, status, phy,
 * queue offset, size, prefix + "%016X" % phy, store timestamp, topic, queue id) makes them one by one
 * (rocketstore.store.write_path.put_results_py). `prefix` is the store host's hex (ASCII). */
PyObject *
speedups_put_results(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (put_results_check(args, nargs) < 0) {
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *descriptors = args[1], *status = args[2], *prefix = args[3], *prepared = args[4];
    PyObject *placed = args[5];
    Py_ssize_t n = PyList_GET_SIZE(prepared);
    PyObject *results = PyList_New(n);
    PyObject *empty = PyTuple_New(0);
    if (results == NULL || empty == NULL) {
        Py_XDECREF(results);
        Py_XDECREF(empty);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *result = put_results_row(cls, descriptors, status, prefix, PyList_GET_ITEM(prepared, i),
                                           PyList_GET_ITEM(placed, i), empty);
        if (result == NULL) {
            Py_DECREF(empty);
            Py_DECREF(results);
            return NULL;
        }
        PyList_SET_ITEM(results, i, result);
    }
    Py_DECREF(empty);
    return results;
}

/* A MappedFile being appended to: its state, its mapping as a writable buffer, write position, size and
 * start. */
struct appended {
    rs_MappedFileState *file; /* borrowed */
    Py_buffer view;
    long long pos, size, from;
    int mapped; /* the view is held */
};

/* 1 with `a` filled (a view held) when `file` is a mapped MappedFile whose fields are plain; 0 when not
 * (the caller declines); -1 after an error. */
static int
appended_of(PyObject *file, struct appended *a)
{
    a->mapped = 0;
    if (!PyObject_TypeCheck(file, &rs_MappedFileStateType)) {
        return 0;
    }
    rs_MappedFileState *state = a->file = (rs_MappedFileState *)file;
    if (!rs_state_int(state->wrote_position, &a->pos) || !rs_state_int(state->file_size, &a->size)
        || !rs_state_int(state->file_from_offset, &a->from) || state->mapping == NULL || state->mapping == Py_None) {
        return 0;
    }
    if (PyObject_GetBuffer(state->mapping, &a->view, PyBUF_WRITABLE) < 0) {
        return -1;
    }
    a->mapped = 1;
    return a->view.len >= a->size && a->pos <= a->size;
}

static void
release_appended(struct appended *a)
{
    if (a->mapped) {
        PyBuffer_Release(&a->view);
        a->mapped = 0;
    }
}

/* `file`'s write position moved to `pos`, and its mapping marked touched for the mapping budget. */
static int
appended_to(const struct appended *a, long long pos)
{
    if (rs_state_set_int(&a->file->wrote_position, pos) < 0) {
        return -1;
    }
    rs_state_touch(&a->file->touched);
    return 0;
}

#define PUT_ONE_KEYS 8 /* a message with more index keys goes the Python way */

/* What a call that may decline answers: NULL after an error (got < 0; `answer`, if any, is dropped),
 * None when it declined (no answer), else the answer. */
static PyObject *
declined_or(int got, PyObject *answer)
{
    if (got < 0) {
        Py_XDECREF(answer);
        return NULL;
    }
    return answer != NULL ? answer : Py_NewRef(Py_None);
}

/* The PutResult of the prepared message `p` written at `phy` (also as `phy_obj`), as put_results makes
 * one: the message id is `prefix` (ASCII) and `phy` in MSG_ID_PHY_DIGITS hex digits. */
PyObject *
rs_put_result_of(PyTypeObject *cls, PyObject *descriptors, PyObject *status, PyObject *prefix, PyObject *p,
              PyObject *phy_obj, PyObject *queue_offset, PyObject *store_ts)
{
    long long phy = PyLong_AsLongLong(phy_obj);
    if (phy == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t prefix_length = PyUnicode_GET_LENGTH(prefix);
    PyObject *msg_id = PyUnicode_New(prefix_length + MSG_ID_PHY_DIGITS, 127);
    PyObject *empty = PyTuple_New(0);
    PyObject *answer = NULL;
    if (msg_id != NULL && empty != NULL) {
        static const char hex[] = "0123456789ABCDEF";
        char *id_chars = (char *)PyUnicode_DATA(msg_id);
        memcpy(id_chars, PyUnicode_DATA(prefix), (size_t)prefix_length);
        unsigned long long digits = (unsigned long long)phy;
        for (int k = MSG_ID_PHY_DIGITS - 1; k >= 0; k--) {
            id_chars[prefix_length + k] = hex[digits & 0xF];
            digits >>= 4;
        }
        PyObject *values[8] = {
            status, phy_obj, queue_offset, PyTuple_GET_ITEM(p, P_SIZE), msg_id, store_ts,
            PyTuple_GET_ITEM(p, P_TOPIC), PyTuple_GET_ITEM(p, P_QUEUE_ID),
        };
        answer = rs_new_with_slots(cls, descriptors, values, empty);
    }
    Py_XDECREF(msg_id);
    Py_XDECREF(empty);
    return answer;
}

/* The arguments of one put_one call (borrowed references) and the plain ints among them. */
struct put_one_call {
    PyTypeObject *cls;
    PyObject *descriptors, *status, *header_descriptors, *store_ip, *prefix, *p, *log_file, *queue, *index_file;
    PyObject *store_ts_obj, *queue_offset_obj;
    long long store_port, store_ts, queue_offset, tags_code;
    struct packed r; /* the record of p, r.code its tags_code */
};

/* put_one's fourteen arguments into `c`: 1 when they are the plain case, 0 when put_one declines, -1
 * with TypeError (or rs_check_slots' / ready's error). */
static int
put_one_call_of(PyObject *const *args, Py_ssize_t nargs, struct put_one_call *c)
{
    if (nargs != 14 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != 8
        || !PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) != 6 || !PyBytes_Check(args[4])
        || !PyUnicode_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "put_one(cls, descriptors, status, header_descriptors, store_ip, store_port, "
                                         "prefix, p, log_file, store_ts, queue_offset, tags_code, queue, index_file)");
        return -1;
    }
    c->cls = (PyTypeObject *)args[0];
    c->descriptors = args[1], c->status = args[2], c->header_descriptors = args[3], c->store_ip = args[4];
    c->prefix = args[6], c->p = args[7], c->log_file = args[8], c->queue = args[12], c->index_file = args[13];
    c->store_ts_obj = args[9], c->queue_offset_obj = args[10];
    if (rs_check_slots(c->cls, c->descriptors, "put_one") < 0 || ready(c->prefix) < 0) {
        return -1;
    }
    int ok = 1;
    c->store_port = rs_int_field(args[5], JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    c->store_ts = rs_int_field(args[9], LLONG_MIN, LLONG_MAX, &ok);
    c->queue_offset = rs_int_field(args[10], 0, LLONG_MAX / 32, &ok);
    c->tags_code = rs_int_field(args[11], LLONG_MIN, LLONG_MAX, &ok);
    Py_ssize_t store_ip_len = PyBytes_GET_SIZE(c->store_ip);
    if (!ok || (store_ip_len != IPV4_WIDTH && store_ip_len != IPV6_WIDTH) || !PyUnicode_IS_ASCII(c->prefix)
        || !rs_packed_of(c->p, c->store_ts, store_ip_len, &c->r)) {
        return 0;
    }
    c->r.code = c->tags_code;
    return 1;
}

/* Where put_one writes: the commitlog file (log), the queue's last file (entry), the index file's mapping
 * and header with the message's index keys. Zeroed first; put_one_targets_release frees what it holds. */
struct put_one_targets {
    struct appended log, entry;
    Py_buffer index_view;
    int index_mapped;
    rs_IndexFileState *index; /* the index file (borrowed) */
    PyObject *header; /* its IndexHeader, owned */
    long long phy, fields[INDEX_HEADER_FIELDS], slots;
    Py_ssize_t keys;
    unsigned char pairs[INDEX_KEY_SIZE * PUT_ONE_KEYS];
};

static void
put_one_targets_release(struct put_one_targets *t)
{
    release_appended(&t->log);
    release_appended(&t->entry);
    if (t->index_mapped) {
        PyBuffer_Release(&t->index_view);
    }
    Py_XDECREF(t->header);
}

/* The queue entry's place (t->entry): 1 when it goes at the end of the queue's last file, which keeps
 * room after it; 0 when put_one declines (the Python way's rules); -1 after an error. */
static int
put_one_queue_of(const struct put_one_call *c, struct put_one_targets *t)
{
    if (!PyObject_TypeCheck(c->queue, &rs_ConsumeQueueStateType)) {
        return 0;
    }
    rs_ConsumeQueueState *queue = (rs_ConsumeQueueState *)c->queue;
    PyObject *file_queue = queue->queue;
    if (file_queue == NULL || !PyObject_TypeCheck(file_queue, &rs_FileQueueStateType)) {
        return 0;
    }
    PyObject *files = ((rs_FileQueueState *)file_queue)->files;
    if (files == NULL || !PyList_Check(files) || PyList_GET_SIZE(files) == 0) {
        return 0; /* the queue's first file: the Python way creates it */
    }
    PyObject *max_physic_of = queue->max_physic_offset;
    int got = max_physic_of != NULL && PyLong_Check(max_physic_of);
    long long max_physic = got ? rs_int_field(max_physic_of, -1, LLONG_MAX / 4, &got) : 0;
    if (got == 1) { /* the last file, which the queue's list keeps */
        got = appended_of(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1), &t->entry);
    }
    if (got != 1) {
        return got;
    }
    if (t->phy + c->r.size <= max_physic || t->entry.pos + UNIT_SIZE >= t->entry.size
        || t->entry.from + t->entry.pos != c->queue_offset * UNIT_SIZE) {
        return 0; /* already there, a gap, or the file's last entry: the Python way's rules */
    }
    return 1;
}

/* The index file's header fields (t->header, t->fields), hash slots and the message's keys (t->pairs,
 * t->keys), its mapping held when there are keys: 1 when they fit, 0 when put_one declines, -1 after an
 * error. */
int
rs_header_fields(PyObject *header, PyObject *descriptors, long long fields[INDEX_HEADER_FIELDS])
{
    if (PyTuple_GET_SIZE(descriptors) != INDEX_HEADER_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "IndexHeader's six slots in file order expected");
        return -1;
    }
    if (rs_check_slots(Py_TYPE(header), descriptors, "an index header") < 0) {
        return -1;
    }
    for (int i = 0; i < INDEX_HEADER_FIELDS; i++) {
        PyObject *descriptor = PyTuple_GET_ITEM(descriptors, i);
        PyObject *value = Py_TYPE(descriptor)->tp_descr_get(descriptor, header, (PyObject *)Py_TYPE(header));
        if (value == NULL) {
            return -1;
        }
        int fits = PyLong_Check(value);
        fields[i] = fits ? rs_int_field(value, i == INDEX_HEADER_HASHSLOTCOUNT_FIELD ? JAVA_INT_MIN : 0, LLONG_MAX / 4,
                                     &fits) : 0;
        Py_DECREF(value);
        if (!fits) {
            return 0;
        }
    }
    return 1;
}

static int
put_one_index_of(const struct put_one_call *c, struct put_one_targets *t)
{
    PyObject *p = c->p;
    t->keys = rs_index_key_count(PyTuple_GET_ITEM(p, P_TOPIC), PyTuple_GET_ITEM(p, P_KEYS),
                                 PyTuple_GET_ITEM(p, P_UNIQ_KEY));
    if (t->keys == -2) {
        return -1;
    }
    if (!PyObject_TypeCheck(c->index_file, &rs_IndexFileStateType)) {
        return 0;
    }
    t->index = (rs_IndexFileState *)c->index_file;
    long long max_entries = 0;
    if (t->index->header == NULL || !rs_state_int(t->index->max_entries, &max_entries)
        || !rs_state_int(t->index->slots, &t->slots)) {
        return 0;
    }
    t->header = Py_NewRef(t->index->header);
    int got = rs_header_fields(t->header, c->header_descriptors, t->fields);
    if (got != 1) {
        return got;
    }
    if (t->keys < 0 || t->keys > PUT_ONE_KEYS || t->fields[5] + t->keys > max_entries
        || t->fields[5] >= max_entries || t->phy < t->fields[3]) {
        return 0; /* a full file rolls, keys the message had already: the Python way */
    }
    rs_pack_index_keys(t->pairs, 31u * hash_units(0, PyTuple_GET_ITEM(p, P_TOPIC)) + '#', t->phy,
                       PyTuple_GET_ITEM(p, P_KEYS), PyTuple_GET_ITEM(p, P_UNIQ_KEY));
    if (t->keys > 0) {
        PyObject *mm = t->index->mapping;
        if (mm == NULL || mm == Py_None) {
            return 0; /* not mapped now: the Python way maps it */
        }
        if (PyObject_GetBuffer(mm, &t->index_view, PyBUF_WRITABLE) < 0) {
            return -1;
        }
        t->index_mapped = 1;
        if (!rs_index_fits(t->index_view.len, t->slots, t->fields, t->pairs, t->keys)) {
            return 0;
        }
    }
    return 1;
}

/* put_one's writes, in the Python way's order: the record, the queue entry, the index keys; then the
 * PutResult (a new reference), or NULL after an error. */
static PyObject *
put_one_write(const struct put_one_call *c, struct put_one_targets *t)
{
    long long phy = t->phy;
    PyObject *phy_obj = PyLong_FromLongLong(phy);
    if (phy_obj == NULL) {
        return NULL;
    }
    rs_write_record((unsigned char *)t->log.view.buf + t->log.pos, &c->r, phy, c->queue_offset, c->store_ts,
                 c->store_ip, c->store_port);
    int failed = appended_to(&t->log, t->log.pos + c->r.size) < 0;
    if (!failed && c->queue != Py_None) {
        unsigned char *unit = (unsigned char *)t->entry.view.buf + t->entry.pos;
        write_be(unit + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, (uint64_t)phy, CQ_COMMITLOG_PHYSICAL_OFFSET_WIDTH);
        write_be(unit + CQ_MESSAGE_SIZE_POS, (uint64_t)c->r.size, CQ_MESSAGE_SIZE_WIDTH);
        write_be(unit + CQ_TAGS_HASH_CODE_POS, (uint64_t)c->tags_code, CQ_TAGS_HASH_CODE_WIDTH);
        failed = appended_to(&t->entry, t->entry.pos + UNIT_SIZE) < 0
                 || rs_state_set_int(&((rs_ConsumeQueueState *)c->queue)->max_physic_offset, phy + c->r.size) < 0;
    }
    if (!failed && t->keys > 0) {
        rs_index_put((unsigned char *)t->index_view.buf, t->index_view.len, t->slots, t->fields, t->pairs, t->keys,
                     c->store_ts);
        rs_state_touch(&t->index->touched);
        for (int i = 0; !failed && i < INDEX_HEADER_FIELDS; i++) {
            PyObject *descriptor = PyTuple_GET_ITEM(c->header_descriptors, i);
            PyObject *value = PyLong_FromLongLong(t->fields[i]);
            failed = value == NULL || Py_TYPE(descriptor)->tp_descr_set(descriptor, t->header, value) < 0;
            Py_XDECREF(value);
        }
    }
    PyObject *answer = NULL;
    if (!failed) {
        answer = rs_put_result_of(c->cls, c->descriptors, c->status, c->prefix, c->p, phy_obj, c->queue_offset_obj,
                               c->store_ts_obj);
    }
    Py_DECREF(phy_obj);
    return answer;
}

/* put_one(cls, descriptors, status, header_descriptors, store_ip, store_port, prefix, p, log_file,
 * store_ts, queue_offset, tags_code, queue, index_file) -> PutResult or None: the writes of
 * WritePath._put_one_py for the prepared message `p` in one call, when they are the plain case:
 * its record at the write position of the commitlog file `log_file` (a mapped MappedFile with room for
 * it and more), its entry `queue_offset` with `tags_code` at the end of the last file of `queue` (a
 * ConsumeQueue, or None for a message without queue entry) when that is where the entry goes next and
 * the file keeps room after it, and its keys in `index_file` (the last IndexFile, or None for a message
 * that is not indexed) when they fit and the file holds nothing at or after its offset. Then the
 * PutResult, made as put_results makes one (cls, descriptors, status, prefix: see there).
 * `header_descriptors` are IndexHeader's six slots in file order. In any other case it writes nothing
 * and returns None: the append pipeline's general steps then write that message. */
PyObject *
speedups_put_one(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    struct put_one_call c;
    int got = put_one_call_of(args, nargs, &c);
    if (got <= 0) {
        return got < 0 ? NULL : Py_NewRef(Py_None);
    }
    struct put_one_targets t = {0};
    PyObject *answer = NULL;
    /* what would be written, all checked before anything is */
    got = appended_of(c.log_file, &t.log);
    if (got == 1) {
        t.phy = t.log.from + t.log.pos;
        if (t.log.pos + c.r.size >= t.log.size || t.phy > LLONG_MAX / 4) {
            got = 0;
        }
    }
    if (got == 1 && c.queue != Py_None) {
        got = put_one_queue_of(&c, &t);
    }
    if (got == 1 && c.index_file != Py_None) {
        got = put_one_index_of(&c, &t);
    }
    if (got == 1) {
        answer = put_one_write(&c, &t);
        got = answer == NULL ? -1 : 1;
    }
    put_one_targets_release(&t);
    return declined_or(got, answer);
}

