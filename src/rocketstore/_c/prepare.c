/*
 * rocketstore._speedups, store layer: the compiled prepare (rocketstore.store.prepare.Preparer.prepare_py
 * for the common message and the broker's).
 */
#include "common.h"
#include "store.h"

static int
has_separator(PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    return PyUnicode_FindChar(text, 0x01, 0, n, 1) != -1 || PyUnicode_FindChar(text, 0x02, 0, n, 1) != -1;
}

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

void
rs_shape_memo_clear(struct shape_memo *memo)
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
            rs_untrack_if_atomic(key);
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
    rs_untrack_if_atomic(key);
    int slot = memo->next_queue_key;
    memo->next_queue_key = (slot + 1) % QUEUE_KEY_MEMO;
    Py_XSETREF(memo->queue_keys[slot], Py_NewRef(key));
    memo->queue_ids[slot] = qid;
    return key;
}

/* `call` from args[1..8] (topic_parts, hosts, max_body, max_record, store_ip, shape, prepared_cls, slots). */
int
rs_prepare_call_of(PyObject *const *args, struct prepare_call *call)
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
    if (rs_prepare_call_of(args, &call) < 0) {
        return NULL;
    }
    struct shape_memo memo = {0};
    PyObject *result = rs_prepare_one(args[0], &call, &memo);
    rs_shape_memo_clear(&memo);
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

/* The fields of a message rs_prepare_one reads (new references or NULL; topic_part borrowed). */
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
    m->qid = rs_int_field(m->queue_id, 0, JAVA_INT_MAX, &ok);
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
    rs_shape_memo_clear(memo);
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
        (void)rs_int_field(out[0], JAVA_INT_MIN, JAVA_INT_MAX, &ok);
        (void)rs_int_field(out[2], JAVA_INT_MIN, JAVA_INT_MAX, &ok);
        (void)rs_int_field(out[3], LLONG_MIN, LLONG_MAX, &ok);
        (void)rs_int_field(sys_flag, JAVA_INT_MIN, JAVA_INT_MAX, &ok);
        if (out[1] != Py_None) {
            (void)rs_int_field(out[1], LLONG_MIN, LLONG_MAX, &ok);
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

/* What rs_prepare_one computed of a message, for its Prepared (new references). */
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
     * rs_untrack_if_atomic for why that matters to a batch). */
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
    rs_untrack_if_atomic(a->split);
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
PyObject *
rs_prepare_one(PyObject *message, const struct prepare_call *call, struct shape_memo *memo)
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
    if (rs_prepare_call_of(args, &call) < 0) {
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
        PyObject *one = rs_prepare_one(PySequence_Fast_GET_ITEM(messages, i), &call, &memo);
        if (one == NULL) {
            rs_shape_memo_clear(&memo);
            Py_DECREF(out);
            return NULL;
        }
        declined += one == Py_None;
        PyList_SET_ITEM(out, i, one);
    }
    rs_shape_memo_clear(&memo);
    return Py_BuildValue("(Nn)", out, declined);
}
