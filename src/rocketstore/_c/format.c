/*
 * rocketstore._speedups, format layer: compiled twins of the pure codecs of rocketstore.format (bytes in,
 * values out; no files).
 *
 *   java_hash(text)                 rocketstore.format.javahash.java_hash_py
 *   java_hash_concat(prefix, text)  java_hash_py(prefix + text), without building the string
 *   decode_properties(text)         rocketstore.format.properties.decode_properties_py
 *   properties_at(raw, start)       rocketstore.format.message.properties_at_py
 *   MessageBase                     rocketstore.format.message._MessageFields
 *   build_message(cls, raw, magic)  rocketstore.format.message.build_message_py
 *   record_at(cls, buffer, ...)     rocketstore.format.message.record_at_py
 *   crc32(data, value=0)            zlib.crc32 (carry-less multiplication, _crc32.c)
 *   crc32_portable(data, value=0)   zlib.crc32, through _crc32.c's table code only
 *
 * Lent to the other files (common.h): rs_record_in and rs_check_message_class (log.c's decode_run
 * decodes the records of a run in place) and rs_space_separated (store.c's prepare splits the keys as a
 * read does). Java's String.hashCode is hash_units in common.h, which pack_run (store.c) also uses.
 */
#include "common.h"

#include <structmember.h>

PyObject *
speedups_java_hash(PyObject *Py_UNUSED(module), PyObject *text)
{
    if (ready(text) < 0) {
        return NULL;
    }
    return PyLong_FromLong((long)(int32_t)hash_units(0, text));
}

PyObject *
speedups_java_hash_concat(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "java_hash_concat(prefix, text) takes two arguments");
        return NULL;
    }
    if (ready(args[0]) < 0 || ready(args[1]) < 0) {
        return NULL;
    }
    return PyLong_FromLong((long)(int32_t)hash_units(hash_units(0, args[0]), args[1]));
}

/* RocketMQ's properties rule: split on U+0002; keep a segment whose first U+0001 is at index >= 1
 * and <= len - 2; name before it, value after it; a later name wins and takes the later place. */
static PyObject *
parse_properties(PyObject *text)
{
    PyObject *result = PyDict_New();
    if (result == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t start = 0;
    while (start <= n) {
        Py_ssize_t end = n > start ? PyUnicode_FindChar(text, 0x02, start, n, 1) : -1;
        if (end == -2) {
            goto error;
        }
        if (end < 0) {
            end = n;
        }
        Py_ssize_t sep = end > start ? PyUnicode_FindChar(text, 0x01, start, end, 1) : -1;
        if (sep == -2) {
            goto error;
        }
        if (sep >= start + 1 && sep <= end - 2) {
            PyObject *name = PyUnicode_Substring(text, start, sep);
            if (name == NULL) {
                goto error;
            }
            PyObject *value = PyUnicode_Substring(text, sep + 1, end);
            if (value == NULL) {
                Py_DECREF(name);
                goto error;
            }
            int present = PyDict_Contains(result, name);
            int failed = present < 0 || (present && PyDict_DelItem(result, name) < 0)
                         || PyDict_SetItem(result, name, value) < 0;
            Py_DECREF(name);
            Py_DECREF(value);
            if (failed) {
                goto error;
            }
        }
        start = end + 1;
    }
    return result;
error:
    Py_DECREF(result);
    return NULL;
}

PyObject *
speedups_decode_properties(PyObject *Py_UNUSED(module), PyObject *text)
{
    if (ready(text) < 0) {
        return NULL;
    }
    return parse_properties(text);
}

/* properties_at(raw, start): the properties of a record whose properties text (UTF-8, bad bytes
 * replaced) runs from `start` to the end of `raw`. */
PyObject *
speedups_properties_at(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "properties_at(raw, start) takes two arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result;
    if (start < 0 || start >= view.len) {
        result = PyDict_New();
    } else {
        PyObject *text = PyUnicode_DecodeUTF8((const char *)view.buf + start, view.len - start, "replace");
        result = text == NULL ? NULL : parse_properties(text);
        Py_XDECREF(text);
    }
    PyBuffer_Release(&view);
    return result;
}

/* The checks of rocketstore.format.message.record_layout (build_message_py's) on a buffer holding exactly one record
 * whose magic (v1 or v2) and minimum size the caller checked, touching no Python object (callers run it
 * without the GIL): LAYOUT_OK with `out` filled, else what does not add up, with `*value` the length it is
 * about (the body's, the topic's, or what the lengths add up to). */
enum layout_fault
rs_layout_check(const unsigned char *raw, long long total, unsigned long magic, struct layout *out, long long *value)
{
    if (total < REC_SYSFLAG_POS + REC_SYSFLAG_WIDTH) {
        return LAYOUT_SHORT_HEADER;
    }
    out->phy_offset = read_be(raw + REC_PHYSICALOFFSET_POS, REC_PHYSICALOFFSET_WIDTH);
    out->sys_flag = read_be(raw + REC_SYSFLAG_POS, REC_SYSFLAG_WIDTH);
    long long body_start = REC_HEADER_V4_SIZE;
    if (out->sys_flag & BORN_V6) {
        body_start += REC_V6_EXTRA;
    }
    if (out->sys_flag & STORE_V6) {
        body_start += REC_V6_EXTRA;
    }
    if (total < body_start) {
        return LAYOUT_SHORT_HEADER;
    }
    long long body_len = read_be(raw + body_start - REC_BODYLENGTH_WIDTH, REC_BODYLENGTH_WIDTH);
    long long body_end = body_start + body_len;
    int topic_field = magic == MAGIC_V1 ? REC_V1_TOPICLENGTH_WIDTH : REC_V2_TOPICLENGTH_WIDTH;
    if (body_len < 0 || body_end + topic_field > total) {
        *value = body_len;
        return LAYOUT_BODY;
    }
    long long topic_len = topic_field == REC_V1_TOPICLENGTH_WIDTH ? (long long)(signed char)raw[body_end]
                                           : (long long)(int16_t)(uint16_t)((raw[body_end] << 8) | raw[body_end + 1]);
    long long topic_start = body_end + topic_field;
    long long props_len_pos = topic_start + topic_len;
    if (topic_len < 0 || props_len_pos + REC_PROPERTIESLENGTH_WIDTH > total) {
        *value = topic_len;
        return LAYOUT_TOPIC;
    }
    long long props_len = (int16_t)(uint16_t)((raw[props_len_pos] << 8) | raw[props_len_pos + 1]);
    long long props_start = props_len_pos + REC_PROPERTIESLENGTH_WIDTH;
    long long expected = props_start + (props_len > 0 ? props_len : 0);
    if (expected != total) {
        *value = expected;
        return LAYOUT_LENGTHS;
    }
    out->body_start = body_start;
    out->body_end = body_end;
    out->topic_start = topic_start;
    out->topic_len = topic_len;
    out->props_start = props_start;
    return LAYOUT_OK;
}

/* rs_layout_check with ValueError set when the lengths do not add up: 0 with `out` filled, or -1. */
int
rs_layout_of(const unsigned char *raw, long long total, unsigned long magic, struct layout *out)
{
    long long value = 0;
    switch (rs_layout_check(raw, total, magic, out, &value)) {
    case LAYOUT_OK:
        return 0;
    case LAYOUT_SHORT_HEADER:
        PyErr_Format(PyExc_ValueError, "total size %lld shorter than the header", total);
        break;
    case LAYOUT_BODY:
        PyErr_Format(PyExc_ValueError, "body length %lld does not fit total size %lld", value, total);
        break;
    case LAYOUT_TOPIC:
        PyErr_Format(PyExc_ValueError, "topic length %lld does not fit total size %lld", value, total);
        break;
    case LAYOUT_LENGTHS:
        PyErr_Format(PyExc_ValueError, "lengths add up to %lld, total size says %lld", value, total);
        break;
    }
    return -1;
}

/* MessageBase: the stored fields of rocketstore.format.message.StoredMessage, which subclasses it
 * (its pure-Python twin is a class with the same __slots__). An unset field raises AttributeError. */
enum message_field {
    F_RAW, F_MAGIC, F_SIZE, F_PHY_OFFSET, F_SYS_FLAG, F_TOPIC, F_HEADER, F_PROPERTIES_START, F_BODY_START,
    F_BODY_END, F_PROPERTIES, MESSAGE_FIELD_COUNT
};

typedef struct {
    PyObject_HEAD
    PyObject *fields[MESSAGE_FIELD_COUNT];
} MessageBase;

static int
message_traverse(MessageBase *self, visitproc visit, void *arg)
{
    for (int i = 0; i < MESSAGE_FIELD_COUNT; i++) {
        Py_VISIT(self->fields[i]);
    }
    return 0;
}

static int
message_clear(MessageBase *self)
{
    for (int i = 0; i < MESSAGE_FIELD_COUNT; i++) {
        Py_CLEAR(self->fields[i]);
    }
    return 0;
}

static void
message_dealloc(MessageBase *self)
{
    /* a static type: a Python subclass's subtype_dealloc releases the subclass itself */
    PyObject_GC_UnTrack(self);
    message_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define MEMBER(name, field) \
    {name, T_OBJECT_EX, offsetof(MessageBase, fields) + (field) * sizeof(PyObject *), 0, NULL}
static PyMemberDef message_members[] = {
    MEMBER("raw", F_RAW),
    MEMBER("magic", F_MAGIC),
    MEMBER("size", F_SIZE),
    MEMBER("phy_offset", F_PHY_OFFSET),
    MEMBER("sys_flag", F_SYS_FLAG),
    MEMBER("topic", F_TOPIC),
    MEMBER("_header", F_HEADER),
    MEMBER("_properties_start", F_PROPERTIES_START),
    MEMBER("_body_start", F_BODY_START),
    MEMBER("_body_end", F_BODY_END),
    MEMBER("_properties", F_PROPERTIES),
    {NULL, 0, 0, 0, NULL},
};

/* The non-empty space-separated tokens of a str, as a new list (props_codec.split_keys); NULL after an
 * error. */
PyObject *
rs_space_separated(PyObject *text)
{
    PyObject *space = PyUnicode_FromOrdinal(' ');
    PyObject *tokens = space == NULL ? NULL : PyUnicode_Split(text, space, -1);
    Py_XDECREF(space);
    if (tokens == NULL) {
        return NULL;
    }
    PyObject *kept = PyList_New(0);
    for (Py_ssize_t i = 0; kept != NULL && i < PyList_GET_SIZE(tokens); i++) {
        PyObject *token = PyList_GET_ITEM(tokens, i);
        if (PyUnicode_GET_LENGTH(token) > 0 && PyList_Append(kept, token) < 0) {
            Py_CLEAR(kept);
        }
    }
    Py_DECREF(tokens);
    return kept;
}

/* A field for a getter: a borrowed reference, NULL with AttributeError when it is unset. */
static PyObject *
message_field_of(MessageBase *self, int field, const char *name)
{
    PyObject *value = self->fields[field];
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "'%s' of the message is not set", name);
    }
    return value;
}

/* The properties dict (borrowed), parsed from the raw bytes on first use and kept in _properties. */
static PyObject *
message_properties(MessageBase *self)
{
    PyObject *properties = self->fields[F_PROPERTIES];
    if (properties != NULL && properties != Py_None) {
        return properties;
    }
    PyObject *args[2] = {message_field_of(self, F_RAW, "raw"),
                         message_field_of(self, F_PROPERTIES_START, "_properties_start")};
    if (args[0] == NULL || args[1] == NULL) {
        return NULL;
    }
    properties = speedups_properties_at(NULL, args, 2);
    if (properties == NULL) {
        return NULL;
    }
    Py_XSETREF(self->fields[F_PROPERTIES], properties);
    return properties;
}

/* properties.get(name) as a new reference, None when absent. */
static PyObject *
message_property(MessageBase *self, PyObject *name)
{
    PyObject *properties = message_properties(self);
    if (properties == NULL) {
        return NULL;
    }
    if (!PyDict_CheckExact(properties)) {
        return PyObject_CallMethod(properties, "get", "O", name);
    }
    PyObject *value = PyDict_GetItemWithError(properties, name);
    if (value == NULL) {
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    return Py_NewRef(value);
}

/* body: raw[_body_start:_body_end] (StoredMessage.body of the pure-Python twin, _MessageFields). */
static PyObject *
message_body(MessageBase *self, void *Py_UNUSED(closure))
{
    PyObject *raw = message_field_of(self, F_RAW, "raw");
    PyObject *start_obj = raw == NULL ? NULL : message_field_of(self, F_BODY_START, "_body_start");
    PyObject *end_obj = start_obj == NULL ? NULL : message_field_of(self, F_BODY_END, "_body_end");
    if (end_obj == NULL) {
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(start_obj), end = PyLong_AsSsize_t(end_obj);
    if ((start == -1 || end == -1) && PyErr_Occurred()) {
        return NULL;
    }
    if (PyBytes_CheckExact(raw) && 0 <= start && start <= end && end <= PyBytes_GET_SIZE(raw)) {
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(raw) + start, end - start);
    }
    return PySequence_GetSlice(raw, start, end); /* anything else: as slicing answers */
}

/* tags: the TAGS property, None when absent. */
static PyObject *
message_tags(MessageBase *self, void *Py_UNUSED(closure))
{
    return message_property(self, rs_property_tags);
}

/* The KEYS property (a new reference, None when absent) read on the stored bytes while the properties
 * are not parsed (rs_last_property: the value the parsed dict would hold, decoded as its text is, UTF-8
 * with bad bytes replaced), else from the parsed properties. */
static PyObject *
message_keys_value(MessageBase *self)
{
    PyObject *raw = self->fields[F_RAW], *start_obj = self->fields[F_PROPERTIES_START];
    if ((self->fields[F_PROPERTIES] != NULL && self->fields[F_PROPERTIES] != Py_None) || raw == NULL
        || !PyBytes_CheckExact(raw) || start_obj == NULL || !PyLong_CheckExact(start_obj)) {
        return message_property(self, rs_property_keys);
    }
    Py_ssize_t start = PyLong_AsSsize_t(start_obj);
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    const char *text = PyBytes_AS_STRING(raw);
    Py_ssize_t size = PyBytes_GET_SIZE(raw);
    const char *props = text + (start >= 0 && start < size ? start : size), *end = text + size;
    const char *value, *value_end;
    if (props < end && rs_last_property(props, end, "KEYS", 4, &value, &value_end)) {
        return PyUnicode_DecodeUTF8(value, value_end - value, "replace");
    }
    return Py_NewRef(Py_None);
}

/* The KEYS value's bytes [*value, *value_end) on the stored bytes: 1 when they are one ASCII token (no space,
 * not empty), whose str is the only key (the usual message: one key), 0 for anything else (no KEYS, several
 * tokens, other text, parsed properties: message_keys_value reads those). */
static int
single_ascii_key(MessageBase *self, const char **value, const char **value_end)
{
    PyObject *raw = self->fields[F_RAW], *start_obj = self->fields[F_PROPERTIES_START];
    if ((self->fields[F_PROPERTIES] != NULL && self->fields[F_PROPERTIES] != Py_None) || raw == NULL
        || !PyBytes_CheckExact(raw) || start_obj == NULL || !PyLong_CheckExact(start_obj)) {
        return 0;
    }
    Py_ssize_t start = PyLong_AsSsize_t(start_obj), size = PyBytes_GET_SIZE(raw);
    if (start < 0 || start >= size) {
        PyErr_Clear();
        return 0;
    }
    const char *text = PyBytes_AS_STRING(raw);
    if (!rs_last_property(text + start, text + size, "KEYS", 4, value, value_end) || *value_end <= *value) {
        return 0;
    }
    for (const char *p = *value; p < *value_end; p++) {
        if (*p == ' ' || (unsigned char)*p >= 0x80) {
            return 0;
        }
    }
    return 1;
}

/* keys: the non-empty space-separated tokens of the KEYS property (props_codec.split_keys). */
static PyObject *
message_keys(MessageBase *self, void *Py_UNUSED(closure))
{
    const char *one_start = NULL, *one_end = NULL;
    if (single_ascii_key(self, &one_start, &one_end)) {
        PyObject *key = PyUnicode_New(one_end - one_start, 127);
        PyObject *one = key == NULL ? NULL : PyList_New(1);
        if (one == NULL) {
            Py_XDECREF(key);
            return NULL;
        }
        memcpy(PyUnicode_DATA(key), one_start, (size_t)(one_end - one_start));
        PyList_SET_ITEM(one, 0, key);
        return one;
    }
    PyObject *value = message_keys_value(self);
    if (value == NULL) {
        return NULL;
    }
    int truth = PyObject_IsTrue(value);
    if (truth <= 0) {
        Py_DECREF(value);
        return truth < 0 ? NULL : PyList_New(0);
    }
    if (!PyUnicode_Check(value)) {
        Py_DECREF(value);
        PyErr_SetString(PyExc_TypeError, "the KEYS property must be a str");
        return NULL;
    }
    if (PyUnicode_FindChar(value, ' ', 0, PyUnicode_GET_LENGTH(value), 1) == -1) {
        PyObject *one = PyList_New(1);
        if (one == NULL) {
            Py_DECREF(value);
            return NULL;
        }
        PyList_SET_ITEM(one, 0, value);
        return one;
    }
    PyObject *kept = rs_space_separated(value);
    Py_DECREF(value);
    return kept;
}

/* The last well-formed segment named `name` of the UTF-8 properties text in [p, end): its value's
 * bytes in [*value, *value_end); 0 when there is none. RocketMQ's rule (parse_properties) read on the
 * bytes: U+0001, U+0002 and the ASCII of a name are never part of a multi-byte or replaced sequence. */
int
rs_last_property(const char *p, const char *end, const char *name, size_t name_len, const char **value,
                 const char **value_end)
{
    int found = 0;
    while (p <= end) {
        const char *stop = memchr(p, 0x02, (size_t)(end - p));
        if (stop == NULL) {
            stop = end;
        }
        const char *sep = memchr(p, 0x01, (size_t)(stop - p));
        if (sep != NULL && sep >= p + 1 && sep < stop - 1 && (size_t)(sep - p) == name_len
            && memcmp(p, name, name_len) == 0) {
            *value = sep + 1;
            *value_end = stop;
            found = 1;
        }
        p = stop + 1;
    }
    return found;
}

/* carries_key(key): whether `key` is a token of the KEYS property or the UNIQ_KEY property
 * (_MessageFields.carries_key). Reads the stored bytes without building the properties when `key`
 * has a UTF-8 form and no U+FFFD (so equal text means equal bytes, replaced bad bytes included). */
static PyObject *
message_carries_key(MessageBase *self, PyObject *key)
{
    if (!PyUnicode_Check(key)) {
        PyErr_Format(PyExc_TypeError, "carries_key: key must be a str, got %.100s", Py_TYPE(key)->tp_name);
        return NULL;
    }
    PyObject *raw = self->fields[F_RAW], *start_obj = self->fields[F_PROPERTIES_START];
    Py_ssize_t key_len = 0;
    const char *key_bytes = NULL;
    int by_bytes = (self->fields[F_PROPERTIES] == NULL || self->fields[F_PROPERTIES] == Py_None)
                   && raw != NULL && PyBytes_CheckExact(raw) && start_obj != NULL && PyLong_CheckExact(start_obj);
    if (by_bytes) {
        key_bytes = PyUnicode_AsUTF8AndSize(key, &key_len);
        if (key_bytes == NULL) { /* lone surrogates: no UTF-8 form */
            PyErr_Clear();
            by_bytes = 0;
        } else if (PyUnicode_FindChar(key, 0xFFFD, 0, PyUnicode_GET_LENGTH(key), 1) != -1) {
            by_bytes = 0;
        }
    }
    Py_ssize_t start = by_bytes ? PyLong_AsSsize_t(start_obj) : -1;
    if (start == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (!by_bytes || start < 0) {
        PyObject *keys = message_keys(self, NULL);
        int found = keys == NULL ? -1 : PySequence_Contains(keys, key);
        Py_XDECREF(keys);
        if (found != 0) {
            return found < 0 ? NULL : Py_NewRef(Py_True);
        }
        PyObject *uniq = message_property(self, rs_property_uniq_key);
        found = uniq == NULL ? -1 : PyObject_RichCompareBool(uniq, key, Py_EQ);
        Py_XDECREF(uniq);
        return found < 0 ? NULL : PyBool_FromLong(found);
    }
    const char *text = PyBytes_AS_STRING(raw);
    Py_ssize_t size = PyBytes_GET_SIZE(raw);
    const char *props = text + (start < size ? start : size), *end = text + size;
    const char *value, *value_end;
    if (props < end && key_len > 0 && rs_last_property(props, end, "KEYS", 4, &value, &value_end)) {
        for (const char *token = value; token < value_end;) {
            const char *space = memchr(token, ' ', (size_t)(value_end - token));
            const char *token_end = space == NULL ? value_end : space;
            if (token_end - token == key_len && memcmp(token, key_bytes, (size_t)key_len) == 0) {
                Py_RETURN_TRUE;
            }
            token = token_end + 1;
        }
    }
    if (props < end && rs_last_property(props, end, "UNIQ_KEY", 8, &value, &value_end)
        && value_end - value == key_len && memcmp(value, key_bytes, (size_t)key_len) == 0) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* carries_key for a message of a MessageBase subclass (log.c's query_records). */
PyObject *
rs_message_carries_key(PyObject *message, PyObject *key)
{
    return message_carries_key((MessageBase *)message, key);
}

static PyMethodDef message_methods[] = {
    {"carries_key", (PyCFunction)message_carries_key, METH_O,
     "Whether `key` is a token of the KEYS property or the UNIQ_KEY property."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef message_getset[] = {
    {"body", (getter)message_body, NULL, "The body as stored (possibly compressed by the producer).", NULL},
    {"tags", (getter)message_tags, NULL, "The TAGS property, None when absent.", NULL},
    {"keys", (getter)message_keys, NULL, "The non-empty tokens of the KEYS property.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject rs_MessageBaseType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rocketstore._speedups.MessageBase",
    .tp_basicsize = sizeof(MessageBase),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The stored fields of a decoded commitlog record (StoredMessage's base).",
    .tp_traverse = (traverseproc)message_traverse,
    .tp_clear = (inquiry)message_clear,
    .tp_dealloc = (destructor)message_dealloc,
    .tp_members = message_members,
    .tp_methods = message_methods,
    .tp_getset = message_getset,
    .tp_new = PyType_GenericNew,
};

PyObject *
rs_topic_of(const char *bytes, long long len, struct topic_cache *cache)
{
    if (cache != NULL && cache->text != NULL && cache->len == len && memcmp(cache->bytes, bytes, (size_t)len) == 0) {
        return Py_NewRef(cache->text);
    }
    PyObject *topic = PyUnicode_DecodeUTF8(bytes, len, "replace");
    if (topic != NULL && cache != NULL && len <= (long long)sizeof(cache->bytes)) {
        memcpy(cache->bytes, bytes, (size_t)len);
        cache->len = len;
        Py_XSETREF(cache->text, Py_NewRef(topic));
    }
    return topic;
}

/* A `cls` (a MessageBase subclass) for `raw`, a bytes object holding exactly one record whose magic
 * and minimum size the caller checked; NULL with ValueError set when the lengths do not add up. */
static PyObject *
new_message(PyTypeObject *cls, PyObject *raw, unsigned long magic, struct topic_cache *cache)
{
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(raw);
    long long total = PyBytes_GET_SIZE(raw);
    struct layout at;
    if (rs_layout_of(data, total, magic, &at) < 0) {
        return NULL;
    }
    PyObject *topic = rs_topic_of((const char *)data + at.topic_start, at.topic_len, cache);
    if (topic == NULL) {
        return NULL;
    }
    MessageBase *msg = (MessageBase *)cls->tp_alloc(cls, 0);
    if (msg == NULL) {
        Py_DECREF(topic);
        return NULL;
    }
    PyObject **fields = msg->fields;
    fields[F_RAW] = Py_NewRef(raw);
    fields[F_MAGIC] = magic == MAGIC_V1 ? Py_NewRef(rs_magic_v1)
                      : magic == MAGIC_V2 ? Py_NewRef(rs_magic_v2) : PyLong_FromUnsignedLong(magic);
    fields[F_SIZE] = PyLong_FromLongLong(total);
    fields[F_PHY_OFFSET] = PyLong_FromLongLong(at.phy_offset);
    fields[F_SYS_FLAG] = PyLong_FromLongLong(at.sys_flag);
    fields[F_TOPIC] = topic;
    fields[F_HEADER] = Py_NewRef(Py_None);
    fields[F_PROPERTIES_START] = PyLong_FromLongLong(at.props_start);
    fields[F_BODY_START] = PyLong_FromLongLong(at.body_start);
    fields[F_BODY_END] = PyLong_FromLongLong(at.body_end);
    fields[F_PROPERTIES] = Py_NewRef(Py_None);
    for (int i = 0; i < MESSAGE_FIELD_COUNT; i++) {
        if (fields[i] == NULL) {
            Py_DECREF(msg);
            return NULL;
        }
    }
    /* Its fields are bytes, ints, a str and None; the ones filled later, a dict of str and a tuple of
     * ints: it can be part of no cycle, so the collector need not visit it (a read of a million
     * messages spent 13 % of its time in collections that walked them). A class with a __dict__ keeps
     * the collector's eye on it. */
    if (cls->tp_dictoffset == 0) {
        PyObject_GC_UnTrack(msg);
    }
    return (PyObject *)msg;
}

PyObject *
rs_message_topic(PyObject *message)
{
    return ((MessageBase *)message)->fields[F_TOPIC];
}

PyObject *
rs_message_raw(PyObject *message)
{
    return ((MessageBase *)message)->fields[F_RAW];
}

int
rs_check_message_class(PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &rs_MessageBaseType)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a MessageBase subclass");
        return -1;
    }
    return 0;
}

/* build_message(cls, raw, magic): a `cls` (a MessageBase subclass) for a bytes object holding exactly
 * one record whose magic (v1 or v2) and minimum size the caller checked; ValueError with the reason
 * when the lengths do not add up. */
PyObject *
speedups_build_message(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "build_message(cls, raw, magic) takes three arguments");
        return NULL;
    }
    if (rs_check_message_class(args[0]) < 0) {
        return NULL;
    }
    PyObject *raw = args[1];
    if (!PyBytes_Check(raw)) {
        PyErr_Format(PyExc_TypeError, "build_message: raw must be bytes, got %.100s", Py_TYPE(raw)->tp_name);
        return NULL;
    }
    unsigned long magic = PyLong_AsUnsignedLong(args[2]);
    if (magic == (unsigned long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    return new_message((PyTypeObject *)args[0], raw, magic, NULL);
}

/* A `cls` for the record at `at` when `room` bytes (8 or more) hold a whole, well-formed record whose
 * PHYSICALOFFSET is `phy_offset`: a new reference. NULL without an error set when they do not, NULL
 * with an error set when Python failed. */
PyObject *
rs_record_in(PyTypeObject *cls, const unsigned char *at, long long room, long long phy_offset,
             struct topic_cache *cache)
{
    long long total = read_be(at + REC_TOTALSIZE_POS, REC_TOTALSIZE_WIDTH);
    unsigned long magic = (unsigned long)(read_be(at + REC_MAGICCODE_POS, REC_MAGICCODE_WIDTH) & 0xFFFFFFFFLL);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < MIN_RECORD_SIZE || total > room
        || read_be(at + REC_PHYSICALOFFSET_POS, REC_PHYSICALOFFSET_WIDTH) != phy_offset) { /* not the record asked for */
        return NULL;
    }
    PyObject *raw = PyBytes_FromStringAndSize((const char *)at, (Py_ssize_t)total);
    PyObject *msg = raw == NULL ? NULL : new_message(cls, raw, magic, cache);
    Py_XDECREF(raw);
    if (msg == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) { /* lengths that do not add up */
        PyErr_Clear();
    }
    return msg;
}

/* record_at(cls, buffer, pos, limit, phy_offset): the record whose bytes start at `pos` of `buffer`
 * and end by `limit`, as a `cls` (a MessageBase subclass), when it is a whole, well-formed record whose
 * PHYSICALOFFSET is `phy_offset`; None for anything else (the caller tells why).
 * rocketstore.format.message.record_at_py is its twin. */
PyObject *
speedups_record_at(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "record_at(cls, buffer, pos, limit, phy_offset) takes five arguments");
        return NULL;
    }
    if (rs_check_message_class(args[0]) < 0) {
        return NULL;
    }
    int pos_over, limit_over, phy_over; /* past int64: no record there (a limit past it: the buffer's end) */
    long long pos = PyLong_AsLongLongAndOverflow(args[2], &pos_over);
    long long limit = PyLong_AsLongLongAndOverflow(args[3], &limit_over);
    long long phy_offset = PyLong_AsLongLongAndOverflow(args[4], &phy_over);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (limit > (long long)view.len || limit_over > 0) {
        limit = view.len; /* never read past the buffer, whatever the caller says */
    }
    PyObject *result = NULL;
    if (!pos_over && limit_over >= 0 && !phy_over && pos >= 0 && pos <= limit - 8) {
        result = rs_record_in((PyTypeObject *)args[0], (const unsigned char *)view.buf + pos, limit - pos,
                              phy_offset, NULL);
    }
    PyBuffer_Release(&view);
    return result != NULL || PyErr_Occurred() ? result : Py_NewRef(Py_None);
}

static PyObject *
crc32_with(PyObject *const *args, Py_ssize_t nargs, uint32_t (*crc_of)(uint32_t, const unsigned char *, size_t))
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "crc32(data, value=0) takes one or two arguments");
        return NULL;
    }
    uint32_t value = 0;
    if (nargs == 2) {
        unsigned long v = PyLong_AsUnsignedLongMask(args[1]);
        if (v == (unsigned long)-1 && PyErr_Occurred()) {
            return NULL;
        }
        value = (uint32_t)v;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (view.len >= CRC_RELEASE_GIL_BYTES) {  /* as zlib.crc32 does: other threads run meanwhile */
        Py_BEGIN_ALLOW_THREADS
        value = crc_of(value, (const unsigned char *)view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    }
    else {
        value = crc_of(value, (const unsigned char *)view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(value);
}

/* crc32(data, value=0): zlib.crc32 (the gzip CRC-32) of a bytes-like object, carry-less multiplication
 * where the CPU has it (see _crc32.c). */
PyObject *
speedups_crc32(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    return crc32_with(args, nargs, rs_crc32);
}

/* crc32_portable(data, value=0): crc32 through the table code only (what a CPU without PCLMULQDQ runs). */
PyObject *
speedups_crc32_portable(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    return crc32_with(args, nargs, rs_crc32_portable);
}
