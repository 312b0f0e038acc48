/* The store layer's C files share these (store.c, prepare.c, append.c, appender.c). */
#ifndef RS_STORE_H
#define RS_STORE_H

#include "common.h"

#include <structmember.h>

/* Where a message's fields sit: the member definitions of the class (`type`) whose member descriptors
 * were given, or no class (the prepare declines every message). */
struct message_layout {
    PyTypeObject *type;
    PyMemberDef *member[MESSAGE_FIELDS];
};

/* The last shape prepare_one asked message_shape for, kept over the messages of one prepare_many
 * call: message_shape is a pure function of its arguments, so the same sys flag and tags objects (and
 * the call's one store host) give the same shape; and the tags object of that shape passed the tags
 * checks. Also the last QUEUE_KEY_MEMO queue keys made, (topic, queue id) tuples that messages of the
 * same topic object and queue id share. Strong references, or NULL. */
#define QUEUE_KEY_MEMO 8

struct shape_memo {
    PyObject *sys_flag, *tags, *born_ip, *shape;
    Py_ssize_t header;
    PyObject *queue_keys[QUEUE_KEY_MEMO];
    long long queue_ids[QUEUE_KEY_MEMO];
    int next_queue_key, share_queue_keys; /* share_queue_keys: set by prepare_many, whose messages share */
};

/* What prepare_plain and prepare_many take after the messages, checked once per call. */
struct prepare_call {
    PyObject *topic_parts, *hosts, *store_ip, *shape_fn;
    PyTypeObject *prepared_cls;
    Py_ssize_t max_body, max_record;
    struct message_layout layout;
};

/* What pack_run checked of one prepared message (pass 1) and writes (pass 2). */
struct packed {
    PyObject *p; /* borrowed */
    long long size, crc, queue_id, flag, record_flag, born_ts, born_port, reconsume, prepared_offset, code;
    int in_queue, indexed, born_has_ts, queue; /* queue: its slot in the run's queues */
    Py_ssize_t keys;                            /* its index keys: UNIQ_KEY and KEYS, the empty left out */
};

#define MSG_ID_PHY_DIGITS (2 * REC_PHYSICALOFFSET_WIDTH) /* a message id ends with the physical offset in hex */

/* store.c */
/* 0 when every item of `descriptors` is a slot (member descriptor) of `cls`, else -1 with a TypeError naming
 * `caller`. */
int rs_check_slots(PyTypeObject *cls, PyObject *descriptors, const char *caller);
/* A new `cls` with values[i] stored through descriptors[i] (checked by rs_check_slots). */
PyObject *rs_new_with_slots(PyTypeObject *cls, PyObject *descriptors, PyObject *const *values, PyObject *empty);
/* Untrack a tuple of atomic items from the cycle collector. */
void rs_untrack_if_atomic(PyObject *tuple);
/* An int field as int64 within [lo, hi]; 0 with *ok cleared when it is not an int or out of range. */
long long rs_int_field(PyObject *value, long long lo, long long hi, int *ok);

/* prepare.c */
/* `call` from args[1..8] (topic_parts, hosts, max_body, max_record, store_ip, shape, prepared_cls, slots). */
int rs_prepare_call_of(PyObject *const *args, struct prepare_call *call);
/* prepare_plain for `message`, with `memo` carried from the message before: its Prepared, None to
 * decline (prepare_py answers), NULL after an error. */
PyObject *rs_prepare_one(PyObject *message, const struct prepare_call *call, struct shape_memo *memo);
/* Drop the references `memo` holds. */
void rs_shape_memo_clear(struct shape_memo *memo);

/* append.c */
/* Reads the fields of the Prepared tuple `p` into `r` (its record being stored at `store_ts` next to a
 * store host of `store_ip_len` bytes): 1 when each is within its header field and the parts add up to
 * its size, 0 when not (the Python twin then encodes it, and raises for a value out of range). The queue
 * and index parts are the caller's. */
int rs_packed_of(PyObject *p, long long store_ts, Py_ssize_t store_ip_len, struct packed *r);
/* The record of `r` at `out` (r->size bytes), as append_run.encode_record encodes it: the header
 * (MAGIC_V1, the born timestamp or else the store timestamp, the store host), BODY and the tail. */
void rs_write_record(unsigned char *out, const struct packed *r, long long phy, long long queue_offset,
                     long long store_ts, PyObject *store_ip, long long store_port);
/* The PutResult of the prepared message `p` written at `phy` (also as `phy_obj`), as put_results makes
 * one: the message id is `prefix` (ASCII) and `phy` in MSG_ID_PHY_DIGITS hex digits. */
PyObject *rs_put_result_of(PyTypeObject *cls, PyObject *descriptors, PyObject *status, PyObject *prefix, PyObject *p,
                           PyObject *phy_obj, PyObject *queue_offset, PyObject *store_ts);

#endif
