/*
 * rocketstore._speedups, store layer: compiled twins of the write path of rocketstore.store, from a
 * message to the bytes of a run and the PutResults.
 *
 *   prepare_plain(message, ...)     rocketstore.store.prepare.Preparer.prepare_py (for the common message
 *                                   and the broker's: properties without DELAY, an IPv4 born host)
 *   prepare_many(messages, ...)     prepare_plain per message (Preparer.prepare_many)
 *   pack_run(prepared, ...)         rocketstore.store.append_run.pack_run_py
 *   put_one(cls, descs, ...)        rocketstore.store.write_path.StoreWritePath._append_one_py
 *   Appender(...).put_behind(m, pos) rocketstore.store.write_path.StoreWritePath._put_behind_py (a type of
 *                                   its own: the write position, end and store timestamp are its state)
 *   fill_slots(cls, descs, *values) rocketstore.store.write_path._put_result_factory's `make`
 *   install_message_call(cls, ...)  a call of Message as rocketstore.message.Message.__new__ makes it
 *   put_results(cls, descs, ...)    rocketstore.store.write_path.put_results_py
 *
 * The prepare takes BODYCRC from _crc32.c and splits the keys as format.c's rs_space_separated does for
 * a read; pack_run hashes the index keys with hash_units (common.h). The Message field names and "size"
 * it reads are interned by module.c.
 */
#include "common.h"

#include <structmember.h>
#include <time.h>

/* 0 when every item of `descriptors` is a slot (member descriptor) of `cls`, else -1 with a TypeError
 * naming `caller`. */
static int
check_slots(PyTypeObject *cls, PyObject *descriptors, const char *caller)
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
 * __setattr__ it passes by, like object.__setattr__). The descriptors were checked by check_slots. */
static PyObject *
new_with_slots(PyTypeObject *cls, PyObject *descriptors, PyObject *const *values, PyObject *empty)
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

/* fill_slots(cls, descriptors, *values): new_with_slots for one object. */
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
    if (check_slots(cls, descriptors, "fill_slots") < 0) {
        return NULL;
    }
    PyObject *empty = PyTuple_New(0);
    if (empty == NULL) {
        return NULL;
    }
    PyObject *obj = new_with_slots(cls, descriptors, args + 2, empty);
    Py_DECREF(empty);
    return obj;
}

#define MSG_ID_PHY_DIGITS (2 * REC_PHYSICALOFFSET_WIDTH) /* a message id ends with the physical offset in hex */
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
    return new_with_slots(message_call.cls, descriptors, values, message_call.empty);
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
    if (check_slots(cls, args[1], "install_message_call") < 0) {
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
static void
untrack_if_atomic(PyObject *tuple)
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
static long long
int_field(PyObject *value, long long lo, long long hi, int *ok)
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


static int
has_separator(PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    return PyUnicode_FindChar(text, 0x01, 0, n, 1) != -1 || PyUnicode_FindChar(text, 0x02, 0, n, 1) != -1;
}

/* Where a message's fields sit: the member definitions of the class (`type`) whose member descriptors
 * were given, or no class (the prepare declines every message). */
struct message_layout {
    PyTypeObject *type;
    PyMemberDef *member[MESSAGE_FIELDS];
};

/* The last `slots` tuple checked and its layout (a put passes the same tuple every time). */
static PyObject *checked_slots;
static struct message_layout checked_layout;

/* The layout of `slots`: None, or the member descriptors of one class for MESSAGE_FIELDS in order. */
static int
message_layout_of(PyObject *slots, struct message_layout *layout)
{
    layout->type = NULL;
    if (slots == Py_None) {
        return 0;
    }
    if (slots == checked_slots) {
        *layout = checked_layout;
        return 0;
    }
    if (!PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != MESSAGE_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "prepare: slots must be None or a tuple of the message's slots");
        return -1;
    }
    PyTypeObject *type = NULL;
    for (int i = 0; i < MESSAGE_FIELDS; i++) {
        PyObject *descriptor = PyTuple_GET_ITEM(slots, i);
        if (!Py_IS_TYPE(descriptor, &PyMemberDescr_Type)
            || ((PyMemberDescrObject *)descriptor)->d_member->type != T_OBJECT_EX
            || PyUnicode_Compare(((PyDescrObject *)descriptor)->d_name, rs_message_field_names[i]) != 0
            || (type != NULL && ((PyDescrObject *)descriptor)->d_type != type)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "prepare: slots must be one class's object slots, in "
                                                 "the order of rocketstore.store.prepare.MESSAGE_FIELDS");
            }
            return -1;
        }
        type = ((PyDescrObject *)descriptor)->d_type;
        layout->member[i] = ((PyMemberDescrObject *)descriptor)->d_member;
    }
    layout->type = type;
    Py_XSETREF(checked_slots, Py_NewRef(slots)); /* it keeps the descriptors, and they the class */
    checked_layout = *layout;
    return 0;
}

/* A new reference to field `field` of `message`, an object of exactly the layout's class, read through the
 * member its descriptor defines (AttributeError when the slot is unset). */
static PyObject *
message_field(PyObject *message, const struct message_layout *layout, int field)
{
    return PyMember_GetOne((const char *)message, layout->member[field]);
}

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

static void
shape_memo_clear(struct shape_memo *memo)
{
    Py_CLEAR(memo->sys_flag);
    Py_CLEAR(memo->tags);
    Py_CLEAR(memo->born_ip);
    Py_CLEAR(memo->shape);
    for (int i = 0; i < QUEUE_KEY_MEMO; i++) {
        Py_CLEAR(memo->queue_keys[i]);
    }
}

/* The (topic, queue_id) tuple of a message (a new reference), in prepare_many shared with an earlier
 * message of the same topic object and queue id; NULL after an error. */
static PyObject *
queue_key_of(struct shape_memo *memo, PyObject *topic, PyObject *queue_id, long long qid)
{
    if (!memo->share_queue_keys) { /* one message: nothing to share it with */
        PyObject *key = PyTuple_Pack(2, topic, queue_id);
        if (key != NULL) {
            untrack_if_atomic(key);
        }
        return key;
    }
    for (int i = 0; i < QUEUE_KEY_MEMO; i++) {
        PyObject *key = memo->queue_keys[i];
        if (key != NULL && PyTuple_GET_ITEM(key, 0) == topic && memo->queue_ids[i] == qid) {
            return Py_NewRef(key);
        }
    }
    PyObject *key = PyTuple_Pack(2, topic, queue_id);
    if (key == NULL) {
        return NULL;
    }
    untrack_if_atomic(key);
    int slot = memo->next_queue_key;
    memo->next_queue_key = (slot + 1) % QUEUE_KEY_MEMO;
    Py_XSETREF(memo->queue_keys[slot], Py_NewRef(key));
    memo->queue_ids[slot] = qid;
    return key;
}

/* What prepare_plain and prepare_many take after the messages, checked once per call. */
struct prepare_call {
    PyObject *topic_parts, *hosts, *store_ip, *shape_fn;
    PyTypeObject *prepared_cls;
    Py_ssize_t max_body, max_record;
    struct message_layout layout;
};

/* `call` from args[1..8] (topic_parts, hosts, max_body, max_record, store_ip, shape, prepared_cls, slots). */
static int
prepare_call_of(PyObject *const *args, struct prepare_call *call)
{
    call->topic_parts = args[1];
    call->hosts = args[2];
    call->store_ip = args[5];
    call->shape_fn = args[6];
    call->prepared_cls = (PyTypeObject *)args[7];
    call->max_body = PyLong_AsSsize_t(args[3]);
    call->max_record = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (!PyDict_Check(call->topic_parts) || !PyDict_Check(call->hosts) || !PyBytes_CheckExact(call->store_ip)
        || !PyType_Check(args[7]) || !PyType_IsSubtype(call->prepared_cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "prepare_plain: two dicts, bytes and a tuple class expected");
        return -1;
    }
    return message_layout_of(args[8], &call->layout);
}

static PyObject *prepare_one(PyObject *message, const struct prepare_call *call, struct shape_memo *memo);

/* prepare_plain(message, topic_parts, hosts, max_body, max_record, store_ip, shape, prepared_cls, slots):
 * rocketstore.store.prepare.Preparer.prepare for the message it takes: no properties or an exact dict of
 * str to str without DELAY (the twin parks delayed messages), its text encoded as encode_properties
 * encodes it after the TAGS/KEYS shorthands are merged in as _properties_of merges them, WAIT read as the
 * twin reads it; no born host, one found in hosts (the dict of born hosts parse_host parsed, as (IP bytes,
 * port)) or an IPv4 "ip:port"; bytes body, str tags, str keys, int queue id and sys flag, a topic found in
 * topic_parts (the dict of topics that passed checked_topic). Anything else, and anything the Python path
 * would refuse, gives None: Preparer.prepare_py then runs and raises its own error. `shape` is message_shape,
 * `prepared_cls` Prepared, `slots` Message's slot descriptors for MESSAGE_FIELDS (read straight from a
 * Message; a subclass goes through getattr) or None. */
PyObject *
speedups_prepare_plain(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "prepare_plain takes nine arguments");
        return NULL;
    }
    struct prepare_call call;
    if (prepare_call_of(args, &call) < 0) {
        return NULL;
    }
    struct shape_memo memo = {0};
    PyObject *result = prepare_one(args[0], &call, &memo);
    shape_memo_clear(&memo);
    return result;
}

/* A born host "a.b.c.d:port" as parse_host parses it (inet_pton's dotted quad: four decimal parts of at
 * most 255 without a leading zero; a port of ASCII digits up to 65535) into ip[4] and *port: 1, or 0 for
 * any other text (the twin parses or refuses it). */
static int
ipv4_host(PyObject *host, unsigned char ip[4], long *port)
{
    if (!PyUnicode_IS_ASCII(host)) {
        return 0;
    }
    const char *s = (const char *)PyUnicode_1BYTE_DATA(host);
    Py_ssize_t n = PyUnicode_GET_LENGTH(host), colon = n - 1;
    while (colon >= 0 && s[colon] != ':') {
        colon--;
    }
    if (colon <= 0 || colon == n - 1) {
        return 0;
    }
    long value = 0;
    for (Py_ssize_t i = colon + 1; i < n; i++) {
        if (s[i] < '0' || s[i] > '9' || (value = value * 10 + (s[i] - '0')) > 0xFFFF) {
            return 0;
        }
    }
    *port = value;
    int part = 0, digits = 0;
    value = 0;
    for (Py_ssize_t i = 0; i <= colon; i++) {
        if (i == colon || s[i] == '.') {
            if (digits == 0 || part > 3 || (i == colon) != (part == 3)) {
                return 0;
            }
            ip[part++] = (unsigned char)value;
            value = digits = 0;
        } else if (s[i] >= '0' && s[i] <= '9' && !(digits > 0 && value == 0)
                   && (value = value * 10 + (s[i] - '0')) <= 255) {
            digits++;
        } else {
            return 0;
        }
    }
    return part == 4;
}

/* The fields of a message prepare_one reads (new references or NULL; topic_part borrowed). */
struct prepare_parts {
    PyObject *topic, *body, *queue_id, *sys_flag, *tags, *keys, *properties, *born_ip, *born_port;
    PyObject *topic_part;
    long long qid;
};

static void
prepare_parts_clear(struct prepare_parts *m)
{
    Py_CLEAR(m->topic);
    Py_CLEAR(m->body);
    Py_CLEAR(m->queue_id);
    Py_CLEAR(m->sys_flag);
    Py_CLEAR(m->tags);
    Py_CLEAR(m->keys);
    Py_CLEAR(m->properties);
    Py_CLEAR(m->born_ip);
    Py_CLEAR(m->born_port);
}

/* m->born_ip and m->born_port of `host` (a born host or None): the store's host and port 0 for None, a
 * host found in call->hosts (parse_host's answers), or an IPv4 "ip:port". 1, 0 to decline, -1 error. */
static int
born_host_of(PyObject *host, const struct prepare_call *call, struct prepare_parts *m)
{
    if (host == Py_None) {
        m->born_ip = Py_NewRef(call->store_ip);
        m->born_port = PyLong_FromLong(0);
        return m->born_port == NULL ? -1 : 1;
    }
    if (!PyUnicode_CheckExact(host)) {
        return 0;
    }
    PyObject *parsed = PyDict_GetItemWithError(call->hosts, host); /* borrowed */
    if (parsed == NULL) {
        unsigned char ip[4];
        long port;
        if (PyErr_Occurred() || !ipv4_host(host, ip, &port)) {
            return PyErr_Occurred() ? -1 : 0;
        }
        m->born_ip = PyBytes_FromStringAndSize((const char *)ip, 4);
        m->born_port = PyLong_FromLong(port);
        return m->born_ip == NULL || m->born_port == NULL ? -1 : 1;
    }
    if (!PyTuple_CheckExact(parsed) || PyTuple_GET_SIZE(parsed) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(parsed, 0))
        || !PyLong_CheckExact(PyTuple_GET_ITEM(parsed, 1))
        || (PyBytes_GET_SIZE(PyTuple_GET_ITEM(parsed, 0)) != IPV4_WIDTH
            && PyBytes_GET_SIZE(PyTuple_GET_ITEM(parsed, 0)) != IPV6_WIDTH)) {
        return 0;
    }
    m->born_ip = Py_NewRef(PyTuple_GET_ITEM(parsed, 0));
    m->born_port = Py_NewRef(PyTuple_GET_ITEM(parsed, 1));
    return 1;
}

/* The fields of `message` the prepare reads, each of the type and range it takes: 1, 0 to decline (the
 * twin answers), -1 after an error. The properties are None or an exact dict (an empty one is None). */
static int
prepare_parts_of(PyObject *message, const struct prepare_call *call, struct prepare_parts *m)
{
    const struct message_layout *layout = &call->layout;
    if (layout->type == NULL || Py_TYPE(message) != layout->type) {
        return 0; /* a subclass may override a field: prepare_py reads it */
    }
    PyObject *host = NULL;
#define GET(var, field) \
    if ((var = message_field(message, layout, field)) == NULL) { return -1; }
    GET(m->properties, M_PROPERTIES);
    if (m->properties != Py_None && !(PyDict_CheckExact(m->properties))) {
        return 0;
    }
    GET(host, M_BORN_HOST);
    int got = born_host_of(host, call, m);
    Py_DECREF(host);
    if (got <= 0) {
        return got;
    }
    GET(m->topic, M_TOPIC);
    if (!PyUnicode_CheckExact(m->topic)) {
        return 0;
    }
    m->topic_part = PyDict_GetItemWithError(call->topic_parts, m->topic);
    if (m->topic_part == NULL || !PyBytes_CheckExact(m->topic_part)) {
        return PyErr_Occurred() ? -1 : 0;
    }
    GET(m->body, M_BODY);
    GET(m->queue_id, M_QUEUE_ID);
    GET(m->sys_flag, M_SYS_FLAG);
    GET(m->tags, M_TAGS);
    GET(m->keys, M_KEYS);
#undef GET
    if (!PyBytes_CheckExact(m->body) || PyBytes_GET_SIZE(m->body) > call->max_body || !PyLong_CheckExact(m->queue_id)
        || !PyLong_CheckExact(m->sys_flag) || !PyTuple_CheckExact(m->keys)) {
        return 0;
    }
    int ok = 1;
    m->qid = int_field(m->queue_id, 0, JAVA_INT_MAX, &ok);
    return ok;
}

/* The properties text of a message: the pairs of its properties dict (NULL: none) in the dict's order,
 * then TAGS and KEYS from the shorthands when the dict has none; and what the store reads of it. */
struct props_text {
    PyObject *mapping;               /* borrowed, or NULL */
    PyObject *add_tags, *add_keys;   /* the shorthands' TAGS (borrowed) and KEYS (new) values, or NULL */
    PyObject *tags, *keys, *uniq;    /* the TAGS, KEYS and UNIQ_KEY values stored (new), or NULL */
    int wait;
    Py_ssize_t pairs, chars, bytes; /* pairs, length in characters and in UTF-8 bytes */
};

static void
props_text_clear(struct props_text *t)
{
    Py_CLEAR(t->add_keys);
    Py_CLEAR(t->tags);
    Py_CLEAR(t->keys);
    Py_CLEAR(t->uniq);
}

/* check_property of a name or value: an exact, non-empty str without a separator, UTF-8 encodable
 * (its UTF-8 is cached in it). 1, 0 (decline), -1 after an error other than a lone surrogate. */
static int
property_text(PyObject *text, Py_ssize_t *utf8_bytes)
{
    if (!PyUnicode_CheckExact(text) || PyUnicode_GET_LENGTH(text) == 0 || has_separator(text)) {
        return 0;
    }
    if (PyUnicode_AsUTF8AndSize(text, utf8_bytes) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            return -1;
        }
        PyErr_Clear(); /* a lone surrogate: the twin names it */
        return 0;
    }
    return 1;
}

/* One name=value pair into `t`'s sizes (property_text's answers). */
static int
props_text_count(struct props_text *t, PyObject *name, PyObject *value)
{
    Py_ssize_t name_bytes, value_bytes;
    int got = property_text(name, &name_bytes);
    if (got > 0) {
        got = property_text(value, &value_bytes);
    }
    if (got > 0) {
        t->chars += (t->pairs > 0) + PyUnicode_GET_LENGTH(name) + 1 + PyUnicode_GET_LENGTH(value);
        t->bytes += (t->pairs > 0) + name_bytes + 1 + value_bytes;
        t->pairs++;
    }
    return got;
}

/* Which of the names the store reads `name` is (an exact str). */
enum property_name { P_OTHER, P_NAME_TAGS, P_NAME_KEYS, P_NAME_WAIT, P_NAME_DELAY, P_NAME_UNIQ_KEY };

static enum property_name
property_name_of(PyObject *name)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(name);
    if (!PyUnicode_IS_ASCII(name) || (n != 4 && n != 5 && n != 8)) {
        return P_OTHER;
    }
    const char *s = (const char *)PyUnicode_1BYTE_DATA(name);
    return n == 8 ? (memcmp(s, "UNIQ_KEY", 8) == 0 ? P_NAME_UNIQ_KEY : P_OTHER)
         : n == 5 ? (memcmp(s, "DELAY", 5) == 0 ? P_NAME_DELAY : P_OTHER)
         : memcmp(s, "TAGS", 4) == 0 ? P_NAME_TAGS : memcmp(s, "KEYS", 4) == 0 ? P_NAME_KEYS
         : memcmp(s, "WAIT", 4) == 0 ? P_NAME_WAIT : P_OTHER;
}

/* WAIT as the twin reads it: no wait only for a value whose lower() is "false". 1/0, -1 after an error. */
static int
wait_of(PyObject *value)
{
    if (PyUnicode_IS_ASCII(value)) {
        const char *s = (const char *)PyUnicode_1BYTE_DATA(value);
        if (PyUnicode_GET_LENGTH(value) != 5) {
            return 1;
        }
        for (int i = 0; i < 5; i++) {
            if ((s[i] | 0x20) != "false"[i]) {
                return 1;
            }
        }
        return 0;
    }
    PyObject *lower = PyObject_CallMethod(value, "lower", NULL);
    if (lower == NULL) {
        return -1;
    }
    int wait = PyUnicode_CompareWithASCIIString(lower, "false") != 0;
    Py_DECREF(lower);
    return wait;
}

/* Counts the pairs of t->mapping and notes the values the store reads: 1, 0 to decline (a pair
 * check_property refuses, or a DELAY: the twin parks delayed messages), -1 after an error. */
static int
props_text_mapping(struct props_text *t)
{
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(t->mapping, &pos, &name, &value)) {
        int got = props_text_count(t, name, value);
        if (got <= 0) {
            return got;
        }
        switch (property_name_of(name)) {
        case P_NAME_DELAY:
            return 0;
        case P_NAME_TAGS:
            Py_XSETREF(t->tags, Py_NewRef(value));
            break;
        case P_NAME_KEYS:
            Py_XSETREF(t->keys, Py_NewRef(value));
            break;
        case P_NAME_UNIQ_KEY:
            Py_XSETREF(t->uniq, Py_NewRef(value));
            break;
        case P_NAME_WAIT:
            if ((t->wait = wait_of(value)) < 0) {
                return -1;
            }
            break;
        default:
            break;
        }
    }
    return 1;
}

/* A shorthand's pair (TAGS or KEYS: four letters) into `t`'s sizes: 1, 0 (decline), -1. */
static int
props_text_shorthand(struct props_text *t, PyObject *value)
{
    Py_ssize_t value_bytes;
    if (PyUnicode_AsUTF8AndSize(value, &value_bytes) == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            return -1;
        }
        PyErr_Clear(); /* a lone surrogate: the twin names it */
        return 0;
    }
    t->chars += (t->pairs > 0) + 5 + PyUnicode_GET_LENGTH(value);
    t->bytes += (t->pairs > 0) + 5 + value_bytes;
    t->pairs++;
    return 1;
}

/* The joined keys shorthand (new), or NULL with no error to decline (a key that is not a str). */
static PyObject *
joined_keys(PyObject *keys)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); i++) {
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, i))) {
            return NULL;
        }
    }
    PyObject *space = PyUnicode_FromOrdinal(' ');
    PyObject *joined = space == NULL ? NULL : PyUnicode_Join(space, keys);
    Py_XDECREF(space);
    return joined;
}

/* `t` for the parts `m` (Preparer._properties_of and shorthand_properties): 1, 0 to decline, -1. A
 * shorthand the mapping overrides is not looked at (the twin ignores it); the tags of the shape in
 * `memo` passed the checks. */
static int
props_text_of(const struct prepare_parts *m, const struct shape_memo *memo, struct props_text *t)
{
    int got = 1;
    t->wait = 1;
    t->mapping = m->properties != Py_None && PyDict_GET_SIZE(m->properties) > 0 ? m->properties : NULL;
    if (t->mapping != NULL && (got = props_text_mapping(t)) <= 0) {
        return got;
    }
    if (m->tags != Py_None && t->tags == NULL) {
        if (!((memo->shape != NULL && m->tags == memo->tags)
              || (PyUnicode_CheckExact(m->tags) && PyUnicode_GET_LENGTH(m->tags) > 0 && !has_separator(m->tags)))) {
            return 0;
        }
        t->add_tags = m->tags;
        t->tags = Py_NewRef(m->tags);
        if ((got = props_text_shorthand(t, m->tags)) <= 0) {
            return got;
        }
    }
    if (PyTuple_GET_SIZE(m->keys) > 0 && t->keys == NULL) {
        if ((t->add_keys = joined_keys(m->keys)) == NULL) {
            return PyErr_Occurred() ? -1 : 0;
        }
        t->keys = Py_NewRef(t->add_keys);
        Py_ssize_t unused;
        if ((got = property_text(t->add_keys, &unused)) <= 0 || (got = props_text_shorthand(t, t->add_keys)) <= 0) {
            return got;
        }
    }
    return t->chars <= MAX_PROPERTIES_LENGTH && t->bytes <= MAX_PROPERTIES_LENGTH;
}

/* "name\x01value" (after a \x02 unless `first`) at `out`, from the UTF-8 cached in the strs; the end. */
static char *
pair_into(char *out, int first, const char *name, Py_ssize_t name_bytes, PyObject *value)
{
    Py_ssize_t value_bytes;
    const char *value_utf8 = PyUnicode_AsUTF8AndSize(value, &value_bytes); /* cached: it cannot fail */
    if (!first) {
        *out++ = '\x02';
    }
    memcpy(out, name, (size_t)name_bytes);
    out[name_bytes] = '\x01';
    memcpy(out + name_bytes + 1, value_utf8, (size_t)value_bytes);
    return out + name_bytes + 1 + value_bytes;
}

/* TOPICLENGTH + TOPIC (`topic_part`), PROPERTIESLENGTH (int16), PROPERTIES (the text `t` measured: no
 * Python code ran since, so the dict is as it was), as a new bytes object. */
static PyObject *
tail_of(PyObject *topic_part, const struct props_text *t)
{
    Py_ssize_t topic_bytes = PyBytes_GET_SIZE(topic_part);
    PyObject *tail = PyBytes_FromStringAndSize(NULL, topic_bytes + 2 + t->bytes);
    if (tail == NULL) {
        return NULL;
    }
    char *out = PyBytes_AS_STRING(tail);
    memcpy(out, PyBytes_AS_STRING(topic_part), (size_t)topic_bytes);
    out += topic_bytes;
    *out++ = (char)((t->bytes >> 8) & 0xFF);
    *out++ = (char)(t->bytes & 0xFF);
    Py_ssize_t pos = 0, name_bytes, written = 0;
    PyObject *name, *value;
    while (t->mapping != NULL && PyDict_Next(t->mapping, &pos, &name, &value)) {
        const char *name_utf8 = PyUnicode_AsUTF8AndSize(name, &name_bytes); /* cached */
        out = pair_into(out, written++ == 0, name_utf8, name_bytes, value);
    }
    if (t->add_tags != NULL) {
        out = pair_into(out, written++ == 0, "TAGS", 4, t->add_tags);
    }
    if (t->add_keys != NULL) {
        out = pair_into(out, written++ == 0, "KEYS", 4, t->add_keys);
    }
    return tail;
}

/* props.split_keys of the stored KEYS value (NULL: none) as a tuple; `keys` is the message's keys
 * tuple, which is the answer when it is the one key the value holds. */
static PyObject *
split_keys_of(const struct props_text *t, PyObject *keys)
{
    if (t->keys == NULL) {
        return PyTuple_New(0);
    }
    if (PyUnicode_FindChar(t->keys, ' ', 0, PyUnicode_GET_LENGTH(t->keys), 1) == -1) {
        return t->keys == t->add_keys && PyTuple_GET_SIZE(keys) == 1 ? Py_NewRef(keys) : PyTuple_Pack(1, t->keys);
    }
    PyObject *kept = rs_space_separated(t->keys);
    if (kept == NULL) {
        return NULL;
    }
    PyObject *split = PyList_AsTuple(kept);
    Py_DECREF(kept);
    return split;
}

/* message_shape(sys_flag, tags, born_ip, store_ip) (new), through `memo`; *header its head's size. */
static PyObject *
shape_of(struct shape_memo *memo, const struct prepare_call *call, PyObject *sys_flag, PyObject *tags,
         PyObject *born_ip, Py_ssize_t *header)
{
    if (memo->shape != NULL && memo->sys_flag == sys_flag && memo->tags == tags
        && (memo->born_ip == born_ip || (PyBytes_GET_SIZE(memo->born_ip) == PyBytes_GET_SIZE(born_ip)
                                         && memcmp(PyBytes_AS_STRING(memo->born_ip), PyBytes_AS_STRING(born_ip),
                                                   (size_t)PyBytes_GET_SIZE(born_ip)) == 0))) {
        *header = memo->header;
        return Py_NewRef(memo->shape);
    }
    PyObject *shape = PyObject_CallFunctionObjArgs(call->shape_fn, sys_flag, tags, born_ip, call->store_ip, NULL);
    if (shape == NULL) {
        return NULL;
    }
    if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 6 || !PyLong_CheckExact(PyTuple_GET_ITEM(shape, 5))) {
        PyErr_SetString(PyExc_TypeError, "prepare_plain: shape must return a 6-tuple ending in the header size");
        Py_DECREF(shape);
        return NULL;
    }
    *header = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, 5));
    if (*header < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "prepare_plain: a negative header size");
        }
        Py_DECREF(shape);
        return NULL;
    }
    shape_memo_clear(memo);
    memo->sys_flag = Py_NewRef(sys_flag);
    memo->tags = Py_NewRef(tags);
    memo->born_ip = Py_NewRef(born_ip);
    memo->shape = Py_NewRef(shape);
    memo->header = *header;
    return shape;
}

/* flag, born_timestamp, reconsume_times, prepared_transaction_offset of `message` (new references into
 * `out`), each an int within its header field (born_timestamp also None), with `sys_flag`: 1, 0 (decline:
 * prepare_py names the one out of range), -1 after an error. */
static int
header_fields_of(PyObject *message, const struct message_layout *layout, PyObject *sys_flag, PyObject *out[4])
{
    static const int fields[4] = {M_FLAG, M_BORN_TIMESTAMP, M_RECONSUME_TIMES, M_PREPARED_TRANSACTION_OFFSET};
    for (int i = 0; i < 4; i++) {
        if ((out[i] = message_field(message, layout, fields[i])) == NULL) {
            return -1;
        }
    }
    int ok = PyLong_CheckExact(out[0]) && PyLong_CheckExact(out[2]) && PyLong_CheckExact(out[3])
             && (out[1] == Py_None || PyLong_CheckExact(out[1]));
    if (ok) {
        (void)int_field(out[0], JAVA_INT_MIN, JAVA_INT_MAX, &ok);
        (void)int_field(out[2], JAVA_INT_MIN, JAVA_INT_MAX, &ok);
        (void)int_field(out[3], LLONG_MIN, LLONG_MAX, &ok);
        (void)int_field(sys_flag, JAVA_INT_MIN, JAVA_INT_MAX, &ok);
        if (out[1] != Py_None) {
            (void)int_field(out[1], LLONG_MIN, LLONG_MAX, &ok);
        }
    }
    return ok;
}

/* The body's CRC as prepare_py gives it (the GIL let go for a large body: a bytes object cannot change). */
static PyObject *
body_crc_of(PyObject *body)
{
    uint32_t body_crc;
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(body);
    size_t n = (size_t)PyBytes_GET_SIZE(body);
    if (n >= CRC_RELEASE_GIL_BYTES) {
        Py_BEGIN_ALLOW_THREADS
        body_crc = rs_crc32(0, data, n);
        Py_END_ALLOW_THREADS
    }
    else {
        body_crc = rs_crc32(0, data, n);
    }
    return PyLong_FromUnsignedLong(body_crc & CRC_MASK);
}

/* What prepare_one computed of a message, for its Prepared (new references). */
struct prepare_answer {
    PyObject *tail, *split, *shape, *crc, *queue_key, *size, *header[4];
    Py_ssize_t record;
};

static void
prepare_answer_clear(struct prepare_answer *a)
{
    Py_CLEAR(a->tail);
    Py_CLEAR(a->split);
    Py_CLEAR(a->shape);
    Py_CLEAR(a->crc);
    Py_CLEAR(a->queue_key);
    Py_CLEAR(a->size);
    for (int i = 0; i < 4; i++) {
        Py_CLEAR(a->header[i]);
    }
}

/* The Prepared tuple of `m`, `t` and `a` (Prepared's fields in order), untracked. */
static PyObject *
prepared_of(PyTypeObject *prepared_cls, const struct prepare_parts *m, const struct props_text *t,
            const struct prepare_answer *a)
{
    PyObject *delay_level = PyLong_FromLong(0);
    PyObject *prepared = delay_level == NULL ? NULL : prepared_cls->tp_alloc(prepared_cls, PREPARED_FIELDS);
    if (prepared == NULL) {
        Py_XDECREF(delay_level);
        return NULL;
    }
    PyObject *shape = a->shape;
    PyObject *fields[PREPARED_FIELDS] = {
        [P_TOPIC] = m->topic, [P_QUEUE_ID] = m->queue_id, [P_QUEUE_KEY] = a->queue_key, [P_BODY] = m->body,
        [P_BODY_CRC] = a->crc, [P_HEAD] = PyTuple_GET_ITEM(shape, 0), [P_TAIL] = a->tail, [P_FLAG] = a->header[0],
        [P_SYS_FLAG] = m->sys_flag, [P_RECORD_SYS_FLAG] = PyTuple_GET_ITEM(shape, 1),
        [P_BORN_TIMESTAMP] = a->header[1], [P_BORN_IP] = m->born_ip, [P_BORN_PORT] = m->born_port,
        [P_RECONSUME_TIMES] = a->header[2], [P_PREPARED_OFFSET] = a->header[3], [P_SIZE] = a->size,
        [P_WAIT] = t->wait ? Py_True : Py_False, [P_IN_QUEUE] = PyTuple_GET_ITEM(shape, 2),
        [P_INDEXED] = PyTuple_GET_ITEM(shape, 3), [P_DELAY_LEVEL] = delay_level,
        [P_TAGS_CODE] = PyTuple_GET_ITEM(shape, 4), [P_KEYS] = a->split, [P_UNIQ_KEY] = t->uniq ? t->uniq : Py_None,
    };
    for (int i = 0; i < PREPARED_FIELDS; i++) {
        PyTuple_SET_ITEM(prepared, i, Py_NewRef(fields[i]));
    }
    Py_DECREF(delay_level);
    /* Its items are ints, strings, bytes, None, two untracked tuples and the header Struct shared
     * through message_shape's cache: none can refer back to it, so it is part of no cycle (see
     * untrack_if_atomic for why that matters to a batch). */
    PyObject_GC_UnTrack(prepared);
    return prepared;
}

/* The tail, keys, shape, size, CRC, queue key and header fields of the checked message into `a`: 1,
 * 0 to decline, -1 after an error. */
static int
prepare_answer_of(PyObject *message, const struct prepare_call *call, struct shape_memo *memo,
                  const struct prepare_parts *m, const struct props_text *t, struct prepare_answer *a)
{
    Py_ssize_t header;
    if ((a->tail = tail_of(m->topic_part, t)) == NULL || (a->split = split_keys_of(t, m->keys)) == NULL
        || (a->shape = shape_of(memo, call, m->sys_flag, t->tags ? t->tags : Py_None, m->born_ip, &header))
               == NULL) {
        return -1;
    }
    untrack_if_atomic(a->split);
    a->record = header + PyBytes_GET_SIZE(m->body) + PyBytes_GET_SIZE(a->tail);
    if (a->record > call->max_record) {
        return 0;
    }
    int got = header_fields_of(message, &call->layout, m->sys_flag, a->header);
    if (got <= 0) {
        return got;
    }
    a->crc = body_crc_of(m->body);
    a->queue_key = queue_key_of(memo, m->topic, m->queue_id, m->qid);
    a->size = PyLong_FromSsize_t(a->record);
    return a->crc == NULL || a->queue_key == NULL || a->size == NULL ? -1 : 1;
}

/* prepare_plain for `message`, with `memo` carried from the message before: its Prepared, None to
 * decline (prepare_py answers), NULL after an error. */
static PyObject *
prepare_one(PyObject *message, const struct prepare_call *call, struct shape_memo *memo)
{
    struct prepare_parts m = {0};
    struct props_text t = {0};
    struct prepare_answer a = {0};
    int got = prepare_parts_of(message, call, &m);
    if (got > 0) {
        got = props_text_of(&m, memo, &t);
    }
    if (got > 0) {
        got = prepare_answer_of(message, call, memo, &m, &t, &a);
    }
    PyObject *result = got < 0 ? NULL : got == 0 ? Py_NewRef(Py_None) : prepared_of(call->prepared_cls, &m, &t, &a);
    prepare_answer_clear(&a);
    props_text_clear(&t);
    prepare_parts_clear(&m);
    return result;
}

/* pack_run reads the fields of rocketstore.store.prepare.Prepared by the generated enum prepared_field. */

/* What pack_run checked of one prepared message (pass 1) and writes (pass 2). */
struct packed {
    PyObject *p; /* borrowed */
    long long size, crc, queue_id, flag, record_flag, born_ts, born_port, reconsume, prepared_offset, code;
    int in_queue, indexed, born_has_ts, queue; /* queue: its slot in the run's queues */
    Py_ssize_t keys;                            /* its index keys: UNIQ_KEY and KEYS, the empty left out */
};

/* Reads the fields of the Prepared tuple `p` into `r` (its record being stored at `store_ts` next to a
 * store host of `store_ip_len` bytes): 1 when each is within its header field and the parts add up to
 * its size, 0 when not (the Python twin then encodes it, and raises for a value out of range). The queue
 * and index parts are the caller's. */
static int
packed_of(PyObject *p, long long store_ts, Py_ssize_t store_ip_len, struct packed *r)
{
    if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != PREPARED_FIELDS) {
        return 0;
    }
    int ok = 1;
    r->p = p;
    r->size = int_field(PyTuple_GET_ITEM(p, P_SIZE), 0, JAVA_INT_MAX, &ok);
    r->crc = int_field(PyTuple_GET_ITEM(p, P_BODY_CRC), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->queue_id = int_field(PyTuple_GET_ITEM(p, P_QUEUE_ID), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->flag = int_field(PyTuple_GET_ITEM(p, P_FLAG), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->record_flag = int_field(PyTuple_GET_ITEM(p, P_RECORD_SYS_FLAG), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    PyObject *born_ts = PyTuple_GET_ITEM(p, P_BORN_TIMESTAMP);
    r->born_has_ts = born_ts != Py_None;
    r->born_ts = r->born_has_ts ? int_field(born_ts, LLONG_MIN, LLONG_MAX, &ok) : store_ts;
    r->born_port = int_field(PyTuple_GET_ITEM(p, P_BORN_PORT), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->reconsume = int_field(PyTuple_GET_ITEM(p, P_RECONSUME_TIMES), JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    r->prepared_offset = int_field(PyTuple_GET_ITEM(p, P_PREPARED_OFFSET), LLONG_MIN, LLONG_MAX, &ok);
    r->code = int_field(PyTuple_GET_ITEM(p, P_TAGS_CODE), LLONG_MIN, LLONG_MAX, &ok);
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
static void
write_record(unsigned char *out, const struct packed *r, long long phy, long long queue_offset, long long store_ts,
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
        next = int_field(known, 0, LLONG_MAX / 2, &fits);
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
        int ok = packed_of(p, c->store_ts, c->store_ip_len, r);
        if (ok) {
            (void)int_field(PyTuple_GET_ITEM(p, P_DELAY_LEVEL), 0, 0, &ok); /* delayed: the twin */
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
        untrack_if_atomic(place);
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
        write_record(out, r, phy, queue_offset, c->store_ts, c->store_ip, c->store_port);
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
    if (check_slots((PyTypeObject *)args[0], args[1], "put_results") < 0) {
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
    PyObject *result = new_with_slots(cls, descriptors, values, empty);
    Py_DECREF(msg_id);
    if (result == NULL) {
        return NULL;
    }
    /* Its fields are the status, one of PutStatus's members (module constants that refer to no
     * result), ints and strings: unless the topic or queue id is of a type the collector tracks,
     * it is part of no cycle (see untrack_if_atomic). */
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

/* prepare_many(messages, topic_parts, hosts, max_body, max_record, store_ip, shape, prepared_cls, slots) ->
 * (prepared, declined): prepare_plain for each message of a list or tuple; `prepared` holds None for
 * each message it declined, `declined` counts them (Preparer.prepare_py answers for those). */
PyObject *
speedups_prepare_many(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "prepare_many takes nine arguments");
        return NULL;
    }
    if (!PyList_Check(args[0]) && !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "prepare_many: a list or tuple of messages expected");
        return NULL;
    }
    PyObject *messages = args[0];
    struct prepare_call call;
    if (prepare_call_of(args, &call) < 0) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(messages);
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    struct shape_memo memo = {0};
    memo.share_queue_keys = 1;
    Py_ssize_t declined = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *one = prepare_one(PySequence_Fast_GET_ITEM(messages, i), &call, &memo);
        if (one == NULL) {
            shape_memo_clear(&memo);
            Py_DECREF(out);
            return NULL;
        }
        declined += one == Py_None;
        PyList_SET_ITEM(out, i, one);
    }
    shape_memo_clear(&memo);
    return Py_BuildValue("(Nn)", out, declined);
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
static PyObject *
put_result_of(PyTypeObject *cls, PyObject *descriptors, PyObject *status, PyObject *prefix, PyObject *p,
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
        answer = new_with_slots(cls, descriptors, values, empty);
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
 * with TypeError (or check_slots' / ready's error). */
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
    if (check_slots(c->cls, c->descriptors, "put_one") < 0 || ready(c->prefix) < 0) {
        return -1;
    }
    int ok = 1;
    c->store_port = int_field(args[5], JAVA_INT_MIN, JAVA_INT_MAX, &ok);
    c->store_ts = int_field(args[9], LLONG_MIN, LLONG_MAX, &ok);
    c->queue_offset = int_field(args[10], 0, LLONG_MAX / 32, &ok);
    c->tags_code = int_field(args[11], LLONG_MIN, LLONG_MAX, &ok);
    Py_ssize_t store_ip_len = PyBytes_GET_SIZE(c->store_ip);
    if (!ok || (store_ip_len != IPV4_WIDTH && store_ip_len != IPV6_WIDTH) || !PyUnicode_IS_ASCII(c->prefix)
        || !packed_of(c->p, c->store_ts, store_ip_len, &c->r)) {
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
    long long max_physic = got ? int_field(max_physic_of, -1, LLONG_MAX / 4, &got) : 0;
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
    if (check_slots(Py_TYPE(header), descriptors, "an index header") < 0) {
        return -1;
    }
    for (int i = 0; i < INDEX_HEADER_FIELDS; i++) {
        PyObject *descriptor = PyTuple_GET_ITEM(descriptors, i);
        PyObject *value = Py_TYPE(descriptor)->tp_descr_get(descriptor, header, (PyObject *)Py_TYPE(header));
        if (value == NULL) {
            return -1;
        }
        int fits = PyLong_Check(value);
        fields[i] = fits ? int_field(value, i == INDEX_HEADER_HASHSLOTCOUNT_FIELD ? JAVA_INT_MIN : 0, LLONG_MAX / 4,
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
    write_record((unsigned char *)t->log.view.buf + t->log.pos, &c->r, phy, c->queue_offset, c->store_ts,
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
        answer = put_result_of(c->cls, c->descriptors, c->status, c->prefix, c->p, phy_obj, c->queue_offset_obj,
                               c->store_ts_obj);
    }
    Py_DECREF(phy_obj);
    return answer;
}

/* put_one(cls, descriptors, status, header_descriptors, store_ip, store_port, prefix, p, log_file,
 * store_ts, queue_offset, tags_code, queue, index_file) -> PutResult or None: the writes of
 * StoreWritePath._append_one_py for the prepared message `p` in one call, when they are the plain case:
 * its record at the write position of the commitlog file `log_file` (a mapped MappedFile with room for
 * it and more), its entry `queue_offset` with `tags_code` at the end of the last file of `queue` (a
 * ConsumeQueue, or None for a message without queue entry) when that is where the entry goes next and
 * the file keeps room after it, and its keys in `index_file` (the last IndexFile, or None for a message
 * that is not indexed) when they fit and the file holds nothing at or after its offset. Then the
 * PutResult, made as put_results makes one (cls, descriptors, status, prefix: see there).
 * `header_descriptors` are IndexHeader's six slots in file order. In any other case it writes nothing
 * and returns None: _append_one_py then does the same for that message. */
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

/* The time now in epoch milliseconds, as rocketstore.store.core._system_clock reads it
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


/* Appender: the state of the plain ASYNC put whose dispatch is left behind the log (the record only),
 * owned by this type rather than read from the store's objects. The log layer creates one per store
 * with what does not change (the PutResult class and its slots, the store host, the msg id prefix, the
 * limits, prepare_plain's arguments, the store's queue offsets table and its clock), then attaches the
 * commitlog file being written: its mapping, start offset, size and write position. `put_behind`
 * prepares a message as prepare_plain does and writes its record at the write position it holds,
 * stamped by the clock, with the next queue offset of its queue; it moves its own position, end and
 * last store timestamp on and answers the PutResult. The caller holds the store lock around the call
 * and copies the position back to its MappedFile: this code takes no lock and touches no attribute.
 * Anything it does not take (a message prepare_plain declines, a record of `record_limit` bytes or more,
 * a file without room for the record and `blank_size` bytes, a position other than the caller's) is
 * declined: nothing is written, None is answered, and `declined` counts it. */
typedef struct {
    PyObject_HEAD
    PyTypeObject *result_cls;
    PyObject *result_slots, *status, *store_ip, *prefix, *prepare, *queue_table, *clock, *mapping;
    struct prepare_call call;
    long long store_port, record_limit, blank_size;
    long long from, size, pos, end, last_store_timestamp;
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
    Py_VISIT(self->mapping);
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
    Py_CLEAR(self->mapping);
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
                               "record_limit", "blank_size", "prepare", "queue_table", "clock", NULL};
    PyObject *cls, *slots, *status, *store_ip, *prefix, *prepare, *queue_table, *clock;
    long long store_port, record_limit, blank_size;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OSLULLO!O!O:Appender", keywords, &PyType_Type, &cls,
                                     &PyTuple_Type, &slots, &status, &store_ip, &store_port, &prefix,
                                     &record_limit, &blank_size, &PyTuple_Type, &prepare, &PyDict_Type,
                                     &queue_table, &clock)) {
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
    if (check_slots((PyTypeObject *)cls, slots, "Appender") < 0 || ready(prefix) < 0) {
        return NULL;
    }
    PyObject *call_args[9] = {NULL};
    for (int i = 0; i < 8; i++) {
        call_args[i + 1] = PyTuple_GET_ITEM(prepare, i);
    }
    struct prepare_call call;
    if (prepare_call_of(call_args, &call) < 0) {
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
    self->call = call;
    self->store_port = store_port;
    self->record_limit = record_limit;
    self->blank_size = blank_size;
    return (PyObject *)self;
}

/* attach(mapping, file_from, file_size, position): the commitlog file to write from now on. */
static PyObject *
appender_attach(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "attach(mapping, file_from, file_size, position)");
        return NULL;
    }
    int ok = 1;
    long long from = int_field(args[1], 0, LLONG_MAX / 4, &ok);
    long long size = int_field(args[2], 0, JAVA_INT_MAX, &ok);
    long long pos = int_field(args[3], 0, JAVA_INT_MAX, &ok);
    Py_buffer view;
    if (!ok || pos > size) {
        PyErr_SetString(PyExc_ValueError, "attach: a start offset, a file size and a position within it expected");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (len < size) {
        PyErr_SetString(PyExc_ValueError, "attach: the mapping is shorter than the file");
        return NULL;
    }
    Py_XSETREF(self->mapping, Py_NewRef(args[0]));
    self->from = from;
    self->size = size;
    self->pos = pos;
    Py_RETURN_NONE;
}

static PyObject *
appender_detach(Appender *self, PyObject *Py_UNUSED(unused))
{
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
    long long offset = PyLong_Check(in_table) ? int_field(in_table, 0, LLONG_MAX / 32, &ok) : -1;
    return ok ? offset : -1;
}

/* The record of `p` at the held position, the queue table moved on, the PutResult. NULL after an error,
 * None (counted) when declined. */
static PyObject *
appender_write(Appender *self, PyObject *p, long long store_ts, PyObject *store_ts_obj)
{
    struct packed r;
    long long queue_offset = appender_queue_offset(self, p);
    if (queue_offset == -2) {
        return NULL;
    }
    long long phy = self->from + self->pos;
    if (queue_offset < 0 || !packed_of(p, store_ts, PyBytes_GET_SIZE(self->store_ip), &r)
        || r.size >= self->record_limit || r.size + self->blank_size > self->size - self->pos
        || phy > LLONG_MAX / 4) {
        return appender_declined(self); /* the file rolls, or the record goes in by pwrite: the Python way */
    }
    Py_buffer view;
    if (PyObject_GetBuffer(self->mapping, &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (view.len < self->size) {
        PyBuffer_Release(&view);
        return appender_declined(self);
    }
    PyObject *phy_obj = PyLong_FromLongLong(phy);
    PyObject *offset_obj = PyLong_FromLongLong(queue_offset);
    PyObject *next_obj = PyLong_FromLongLong(queue_offset + 1);
    PyObject *answer = NULL;
    if (phy_obj != NULL && offset_obj != NULL && next_obj != NULL
        && (PyTuple_GET_ITEM(p, P_IN_QUEUE) != Py_True
            || PyDict_SetItem(self->queue_table, PyTuple_GET_ITEM(p, P_QUEUE_KEY), next_obj) == 0)) {
        write_record((unsigned char *)view.buf + self->pos, &r, phy, queue_offset, store_ts, self->store_ip,
                     self->store_port);
        self->pos += r.size;
        self->end = phy + r.size;
        self->last_store_timestamp = store_ts;
        self->written++;
        answer = put_result_of(self->result_cls, self->result_slots, self->status, self->prefix, p, phy_obj,
                               offset_obj, store_ts_obj);
    }
    PyBuffer_Release(&view);
    Py_XDECREF(phy_obj);
    Py_XDECREF(offset_obj);
    Py_XDECREF(next_obj);
    return answer;
}

/* put_behind(message, position) -> PutResult or None: see the type's comment. `position` is the write
 * position the caller's MappedFile holds: another one means someone else wrote, and the call declines. */
static PyObject *
appender_put_behind(Appender *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "put_behind(message, position)");
        return NULL;
    }
    int ok = 1;
    long long position = int_field(args[1], 0, LLONG_MAX, &ok);
    if (self->mapping == NULL || !ok || position != self->pos) {
        return appender_declined(self);
    }
    struct shape_memo memo = {0};
    PyObject *p = prepare_one(args[0], &self->call, &memo);
    shape_memo_clear(&memo);
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
        long long store_ts = PyLong_Check(store_ts_obj) ? int_field(store_ts_obj, LLONG_MIN, LLONG_MAX, &ok) : 0;
        answer = ok && PyLong_Check(store_ts_obj) ? appender_write(self, p, store_ts, store_ts_obj)
                                                  : appender_declined(self);
        Py_DECREF(store_ts_obj);
    }
    Py_DECREF(p);
    return answer;
}

static PyMethodDef appender_methods[] = {
    {"attach", (PyCFunction)(void (*)(void))appender_attach, METH_FASTCALL,
     "attach(mapping, file_from, file_size, position): the commitlog file to write from now on."},
    {"detach", (PyCFunction)appender_detach, METH_NOARGS, "Let the attached file's mapping go."},
    {"put_behind", (PyCFunction)(void (*)(void))appender_put_behind, METH_FASTCALL,
     "put_behind(message, position) -> PutResult or None (declined: nothing written)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef appender_members[] = {
    {"position", T_LONGLONG, offsetof(Appender, pos), READONLY, "The write position in the attached file."},
    {"end", T_LONGLONG, offsetof(Appender, end), READONLY, "The end offset of the newest record written."},
    {"last_store_timestamp", T_LONGLONG, offsetof(Appender, last_store_timestamp), READONLY,
     "The store timestamp of the newest record written."},
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
