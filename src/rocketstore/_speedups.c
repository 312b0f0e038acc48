/*
 * rocketstore._speedups: optional compiled versions of small hot functions.
 *
 * Each one has a pure-Python twin that is the reference (the tests hold the two equal on generated
 * inputs) and that runs wherever this module could not be built:
 *
 *   java_hash(text)                 rocketstore.format.javahash.java_hash_py
 *   java_hash_concat(prefix, text)  java_hash_py(prefix + text), without building the string
 *   decode_properties(text)         rocketstore.format.properties.decode_properties_py
 *   properties_at(raw, start)       rocketstore.format.message.properties_at_py
 *   index_lookup(...)               rocketstore.log.index_file.IndexFile.lookup_py
 *   index_put_keys(...)             rocketstore.log.index_file.IndexFile._put_keys_py
 *   build_message(cls, raw, magic)  rocketstore.format.message.build_message_py
 *   decode_run(cls, entries, ...)   rocketstore.log.entry_run.decode_run_py
 *   walk_records(buf, pos, ...)     rocketstore.services.recovery.walk_records_py
 *   dispatch_requests(cls, buf, ...) rocketstore.services.dispatch.dispatch_requests_py
 *   msync(mapping, start, length)   mmap.flush(start, length), which keeps the interpreter lock
 *   prepare_plain(message, ...)     rocketstore.store.prepare.Preparer.prepare_py (for the common message)
 *   pack_run(prepared, ...)         rocketstore.store.append_run.pack_run_py
 *   fill_slots(cls, descs, *values) rocketstore.store.write_path._put_result_factory's `make`
 *   crc32(data, value=0)            zlib.crc32 (carry-less multiplication, _crc32.c)
 *   put_results(cls, descs, ...)    rocketstore.store.write_path.put_results_py
 *   prepare_many(messages, ...)     prepare_plain per message (Preparer.prepare_many)
 *   MessageBase                     rocketstore.format.message._MessageFields
 *
 * Java's String.hashCode runs over UTF-16 code units: a code point above U+FFFF counts as its two
 * surrogates, and a lone surrogate in a Python string counts as itself (as "surrogatepass" encodes it).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_layout.h" /* layouts and field orders, generated from the Python declarations */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>
#include <sys/mman.h>
#include <unistd.h>

#include "_crc32.h"

/* From this many bytes on, a CRC runs without the interpreter lock (zlib.crc32 lets it go from 5 KiB;
 * here a 64 KiB CRC takes ~4 us, well above the cost of letting the lock go and taking it back). */
#define CRC_RELEASE_GIL_BYTES (64 * 1024)

static int
ready(PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "expected str, got %.100s", Py_TYPE(text)->tp_name);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0) {
        return -1;
    }
#endif
    return 0;
}

static uint32_t
hash_units(uint32_t h, PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t i;

    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *p = (const Py_UCS1 *)data;
        for (i = 0; i < n; i++) {
            h = 31u * h + p[i];
        }
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *p = (const Py_UCS2 *)data;
        for (i = 0; i < n; i++) {
            h = 31u * h + p[i];
        }
    } else {
        const Py_UCS4 *p = (const Py_UCS4 *)data;
        for (i = 0; i < n; i++) {
            Py_UCS4 c = p[i];
            if (c >= 0x10000) {
                c -= 0x10000;
                h = 31u * h + (0xD800u + (c >> 10));
                h = 31u * h + (0xDC00u + (c & 0x3FFu));
            } else {
                h = 31u * h + c;
            }
        }
    }
    return h;
}

static PyObject *
java_hash(PyObject *module, PyObject *text)
{
    if (ready(text) < 0) {
        return NULL;
    }
    return PyLong_FromLong((long)(int32_t)hash_units(0, text));
}

static PyObject *
java_hash_concat(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
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

static PyObject *
decode_properties(PyObject *module, PyObject *text)
{
    if (ready(text) < 0) {
        return NULL;
    }
    return parse_properties(text);
}

/* properties_at(raw, start): the properties of a record whose properties text (UTF-8, bad bytes
 * replaced) runs from `start` to the end of `raw`. */
static PyObject *
properties_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
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

static int64_t
read_be(const unsigned char *p, int width)
{
    uint64_t v = 0;
    for (int i = 0; i < width; i++) {
        v = (v << 8) | p[i];
    }
    if (width == 4) {
        return (int64_t)(int32_t)(uint32_t)v;
    }
    return (int64_t)v;
}

#define MAX_SLOTS (1LL << 40)               /* far above any index file (RocketMQ's default: 5 million) */
#define MAX_DIFF_MS (0x80000000LL * 1000)   /* a timeDiff (int32 seconds) in milliseconds, bounding it */

/* index_lookup(buffer, slots, key_hash, index_count, begin_timestamp, begin, end, max_count, out)
 * walks the slot chain of key_hash and appends matching physical offsets to `out`, newest first.
 * Returns True, or False without appending anything when a position falls outside the buffer or an
 * argument outside int64 (the Python twin then runs: it raises its own error or handles the int). */
static PyObject *
index_lookup(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "index_lookup takes nine arguments");
        return NULL;
    }
    long long slots = PyLong_AsLongLong(args[1]);
    long long key_hash = PyLong_AsLongLong(args[2]);
    long long n_max = PyLong_AsLongLong(args[3]);
    long long begin_ts = PyLong_AsLongLong(args[4]);
    long long begin = PyLong_AsLongLong(args[5]);
    long long end = PyLong_AsLongLong(args[6]);
    Py_ssize_t max_count = PyLong_AsSsize_t(args[7]);
    PyObject *out = args[8];
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return NULL;
        }
        PyErr_Clear(); /* a bound past int64: the Python twin handles any int */
        Py_RETURN_FALSE;
    }
    if (!PyList_Check(out)) {
        PyErr_SetString(PyExc_TypeError, "index_lookup: out must be a list");
        return NULL;
    }
    /* beyond these the position and time arithmetic could overflow int64: the Python twin decides */
    if (slots <= 0 || slots > MAX_SLOTS || key_hash < 0 || begin_ts > LLONG_MAX - MAX_DIFF_MS
        || begin_ts < LLONG_MIN + MAX_DIFF_MS) {
        Py_RETURN_FALSE;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len;
    Py_ssize_t appended_from = PyList_GET_SIZE(out);
    PyObject *answer = Py_True;
    long long slot_at = INDEX_HEADER_SIZE + (key_hash % slots) * INDEX_SLOT_SIZE;
    if (slot_at + INDEX_SLOT_SIZE > size) {
        answer = Py_False;
        goto done;
    }
    long long n = read_be(buf + slot_at, 4);
    if (n <= 0 || n > n_max || n_max <= 1) {
        goto done;
    }
    long long entries_at = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE;
    while (PyList_GET_SIZE(out) < max_count) {
        long long at = entries_at + n * INDEX_ENTRY_SIZE;
        if (at < 0 || at + INDEX_ENTRY_SIZE > size) {
            answer = Py_False;
            break;
        }
        const unsigned char *entry = buf + at;
        long long entry_hash = read_be(entry + INDEX_ENTRY_KEYHASH_POS, 4);
        long long phy = read_be(entry + INDEX_ENTRY_PHYSICAL_OFFSET_POS, 8);
        long long diff = read_be(entry + INDEX_ENTRY_TIMEDIFF_POS, 4);
        long long prev = read_be(entry + INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_POS, 4);
        if (diff < 0) {
            break;
        }
        long long time_read = begin_ts + diff * 1000;
        if (entry_hash == key_hash && begin <= time_read && time_read <= end) {
            PyObject *offset = PyLong_FromLongLong(phy);
            if (offset == NULL || PyList_Append(out, offset) < 0) {
                Py_XDECREF(offset);
                answer = NULL;
                break;
            }
            Py_DECREF(offset);
        }
        if (prev <= 0 || prev > n_max || prev >= n || time_read < begin) {
            break;
        }
        n = prev;
    }
done:
    PyBuffer_Release(&view);
    if (answer == Py_False && PyList_GET_SIZE(out) > appended_from) {
        /* undo what was appended: the caller runs the Python twin or sees the error */
        if (PyList_SetSlice(out, appended_from, PyList_GET_SIZE(out), NULL) < 0) {
            return NULL;
        }
    }
    if (answer == NULL) {
        return NULL;
    }
    return Py_NewRef(answer);
}

#define MAX_TIME_DIFF 0x7FFFFFFFLL

static void
write_be(unsigned char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

/* index_put_keys(buffer, slots, header, keys, store_timestamp, start, stop) writes entries
 * header.indexCount, +1, ... for keys [start, stop) of `keys`, a buffer of (index hash, phy offset)
 * pairs of native int64 (rocketstore.log.index_file.KEY), all stored at `store_timestamp`, points their
 * slots at them and writes the 40-byte header, as IndexFile._put_keys_py does; the caller checked there
 * is room. `header` and the result are the header's six fields in file order (beginTimestamp,
 * endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount). Returns the header after the
 * puts, or None without writing anything when a value or position is out of range (the Python twin then
 * runs). */
static PyObject *
index_put_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "index_put_keys takes seven arguments");
        return NULL;
    }
    long long header[6];
    long long slots = PyLong_AsLongLong(args[1]);
    long long ts = PyLong_AsLongLong(args[4]);
    Py_ssize_t start = PyLong_AsSsize_t(args[5]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[6]);
    if (!PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) != 6) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "index_put_keys: header must be a tuple of six ints");
        }
        return NULL;
    }
    for (int i = 0; i < 6; i++) {
        header[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[2], i));
    }
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return NULL;
        }
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    long long begin_ts = header[0], end_ts = header[1], begin_phy = header[2], end_phy = header[3];
    long long slot_count = header[4], n = header[5];
    Py_buffer keys = {0}, view = {0};
    if (PyObject_GetBuffer(args[3], &keys, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    int have_view = 0;
    Py_ssize_t held = keys.len / 16;
    if (keys.len % 16 != 0 || start < 0 || stop < start || stop > held || slots <= 0 || slots > MAX_SLOTS || n < 1) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    Py_ssize_t count = stop - start;
    const unsigned char *pairs = (const unsigned char *)keys.buf + start * 16;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t h;
        memcpy(&h, pairs + 16 * i, 8);
        if (h < 0 || h > 0x7FFFFFFFLL) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        goto done;
    }
    have_view = 1;
    long long entries_at = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE;
    if (n + count > 0x7FFFFFFFLL || slot_count + count > 0x7FFFFFFFLL || slot_count < INT32_MIN
        || entries_at + (n + count) * INDEX_ENTRY_SIZE > view.len) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    unsigned char *buf = (unsigned char *)view.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t h, phy;
        memcpy(&h, pairs + 16 * i, 8);
        memcpy(&phy, pairs + 16 * i + 8, 8);
        unsigned char *slot = buf + INDEX_HEADER_SIZE + (h % slots) * INDEX_SLOT_SIZE;
        long long slot_value = read_be(slot, 4);
        if (slot_value <= 0 || slot_value > n) {
            slot_value = 0;
            slot_count++;
        }
        long long diff = 0; /* whole seconds since the file's begin, truncated, clamped to [0, 2**31-1] */
        if (begin_ts > 0 && ts > begin_ts) {
            diff = (ts - begin_ts) / 1000;
            if (diff > MAX_TIME_DIFF) {
                diff = MAX_TIME_DIFF;
            }
        }
        if (n <= 1) {
            begin_phy = phy;
            begin_ts = ts;
        }
        unsigned char *entry = buf + entries_at + n * INDEX_ENTRY_SIZE;
        write_be(entry + INDEX_ENTRY_KEYHASH_POS, (uint64_t)h, 4);
        write_be(entry + INDEX_ENTRY_PHYSICAL_OFFSET_POS, (uint64_t)phy, 8);
        write_be(entry + INDEX_ENTRY_TIMEDIFF_POS, (uint64_t)diff, 4);
        write_be(entry + INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_POS, (uint64_t)slot_value, 4);
        write_be(slot, (uint64_t)n, 4);
        n++;
        end_phy = phy;
        end_ts = ts;
    }
    write_be(buf + INDEX_HEADER_BEGINTIMESTAMP_POS, (uint64_t)begin_ts, 8);
    write_be(buf + INDEX_HEADER_ENDTIMESTAMP_POS, (uint64_t)end_ts, 8);
    write_be(buf + INDEX_HEADER_BEGINPHYOFFSET_POS, (uint64_t)begin_phy, 8);
    write_be(buf + INDEX_HEADER_ENDPHYOFFSET_POS, (uint64_t)end_phy, 8);
    write_be(buf + INDEX_HEADER_HASHSLOTCOUNT_POS, (uint64_t)slot_count, 4);
    write_be(buf + INDEX_HEADER_INDEXCOUNT_POS, (uint64_t)n, 4);
    result = Py_BuildValue("(LLLLLL)", begin_ts, end_ts, begin_phy, end_phy, slot_count, n);
done:
    if (have_view) {
        PyBuffer_Release(&view);
    }
    PyBuffer_Release(&keys);
    return result;
}


struct layout {
    long long phy_offset, sys_flag, body_start, body_end, topic_start, topic_len, props_start;
};

/* The checks of rocketstore.format.message.record_layout (build_message_py's) on a buffer holding exactly one record
 * whose magic (v1 or v2) and minimum size the caller checked. -1 with ValueError set when the lengths
 * do not add up. */
static int
layout_of(const unsigned char *raw, long long total, unsigned long magic, struct layout *out)
{
    if (total < REC_SYSFLAG_POS + 4) {
        PyErr_Format(PyExc_ValueError, "total size %lld shorter than the header", total);
        return -1;
    }
    out->phy_offset = read_be(raw + REC_PHYSICALOFFSET_POS, 8);
    out->sys_flag = read_be(raw + REC_SYSFLAG_POS, 4);
    long long body_start = REC_HEADER_V4_SIZE;
    if (out->sys_flag & BORN_V6) {
        body_start += REC_V6_EXTRA;
    }
    if (out->sys_flag & STORE_V6) {
        body_start += REC_V6_EXTRA;
    }
    if (total < body_start) {
        PyErr_Format(PyExc_ValueError, "total size %lld shorter than the header", total);
        return -1;
    }
    long long body_len = read_be(raw + body_start - 4, 4);
    long long body_end = body_start + body_len;
    int topic_field = magic == MAGIC_V1 ? 1 : 2;
    if (body_len < 0 || body_end + topic_field > total) {
        PyErr_Format(PyExc_ValueError, "body length %lld does not fit total size %lld", body_len, total);
        return -1;
    }
    long long topic_len = topic_field == 1 ? (long long)(signed char)raw[body_end]
                                           : (long long)(int16_t)(uint16_t)((raw[body_end] << 8) | raw[body_end + 1]);
    long long topic_start = body_end + topic_field;
    long long props_len_pos = topic_start + topic_len;
    if (topic_len < 0 || props_len_pos + 2 > total) {
        PyErr_Format(PyExc_ValueError, "topic length %lld does not fit total size %lld", topic_len, total);
        return -1;
    }
    long long props_len = (int16_t)(uint16_t)((raw[props_len_pos] << 8) | raw[props_len_pos + 1]);
    long long props_start = props_len_pos + 2;
    long long expected = props_start + (props_len > 0 ? props_len : 0);
    if (expected != total) {
        PyErr_Format(PyExc_ValueError, "lengths add up to %lld, total size says %lld", expected, total);
        return -1;
    }
    out->body_start = body_start;
    out->body_end = body_end;
    out->topic_start = topic_start;
    out->topic_len = topic_len;
    out->props_start = props_start;
    return 0;
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
static PyObject *
space_separated(PyObject *text)
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

static PyObject *s_property_tags, *s_property_keys, *s_property_uniq_key; /* "TAGS", "KEYS", "UNIQ_KEY" (interned) */

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
    properties = properties_at(NULL, args, 2);
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
message_body(MessageBase *self, void *closure)
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
message_tags(MessageBase *self, void *closure)
{
    return message_property(self, s_property_tags);
}

/* keys: the non-empty space-separated tokens of the KEYS property (props_codec.split_keys). */
static PyObject *
message_keys(MessageBase *self, void *closure)
{
    PyObject *value = message_property(self, s_property_keys);
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
    PyObject *kept = space_separated(value);
    Py_DECREF(value);
    return kept;
}

/* The last well-formed segment named `name` of the UTF-8 properties text in [p, end): its value's
 * bytes in [*value, *value_end); 0 when there is none. RocketMQ's rule (parse_properties) read on the
 * bytes: U+0001, U+0002 and the ASCII of a name are never part of a multi-byte or replaced sequence. */
static int
last_property(const char *p, const char *end, const char *name, size_t name_len, const char **value,
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
        PyObject *uniq = message_property(self, s_property_uniq_key);
        found = uniq == NULL ? -1 : PyObject_RichCompareBool(uniq, key, Py_EQ);
        Py_XDECREF(uniq);
        return found < 0 ? NULL : PyBool_FromLong(found);
    }
    const char *text = PyBytes_AS_STRING(raw);
    Py_ssize_t size = PyBytes_GET_SIZE(raw);
    const char *props = text + (start < size ? start : size), *end = text + size;
    const char *value, *value_end;
    if (props < end && key_len > 0 && last_property(props, end, "KEYS", 4, &value, &value_end)) {
        for (const char *token = value; token < value_end;) {
            const char *space = memchr(token, ' ', (size_t)(value_end - token));
            const char *token_end = space == NULL ? value_end : space;
            if (token_end - token == key_len && memcmp(token, key_bytes, (size_t)key_len) == 0) {
                Py_RETURN_TRUE;
            }
            token = token_end + 1;
        }
    }
    if (props < end && last_property(props, end, "UNIQ_KEY", 8, &value, &value_end)
        && value_end - value == key_len && memcmp(value, key_bytes, (size_t)key_len) == 0) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
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

static PyTypeObject MessageBaseType = {
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

/* The last topic decoded by a run of decode_run: records of one queue repeat it, so its str is reused. */
struct topic_cache {
    char bytes[256];
    long long len; /* -1: empty */
    PyObject *text; /* a strong reference, or NULL */
};

/* The topic of a record (UTF-8, bad bytes replaced) as a new reference; `cache` (or NULL) keeps the
 * last one, so that the records of one topic share one str. */
static PyObject *
topic_of(const char *bytes, long long len, struct topic_cache *cache)
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
    if (layout_of(data, total, magic, &at) < 0) {
        return NULL;
    }
    PyObject *topic = topic_of((const char *)data + at.topic_start, at.topic_len, cache);
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
    fields[F_MAGIC] = PyLong_FromUnsignedLong(magic);
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
    return (PyObject *)msg;
}

static int
check_message_class(PyObject *cls)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &MessageBaseType)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a MessageBase subclass");
        return -1;
    }
    return 0;
}

/* build_message(cls, raw, magic): a `cls` (a MessageBase subclass) for a bytes object holding exactly
 * one record whose magic (v1 or v2) and minimum size the caller checked; ValueError with the reason
 * when the lengths do not add up. */
static PyObject *
build_message(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "build_message(cls, raw, magic) takes three arguments");
        return NULL;
    }
    if (check_message_class(args[0]) < 0) {
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

/* enum run_state (RUN_END, RUN_FULL, RUN_ELSEWHERE) comes from _layout.h */

/* A `cls` for the record at `at` when `room` bytes (8 or more) hold a whole, well-formed record whose
 * PHYSICALOFFSET is `phy_offset`: a new reference. NULL without an error set when they do not, NULL
 * with an error set when Python failed. */
static PyObject *
record_in(PyTypeObject *cls, const unsigned char *at, long long room, long long phy_offset,
          struct topic_cache *cache)
{
    long long total = read_be(at + REC_TOTALSIZE_POS, 4);
    unsigned long magic = (unsigned long)(read_be(at + REC_MAGICCODE_POS, 4) & 0xFFFFFFFFLL);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < MIN_RECORD_SIZE || total > room
        || read_be(at + REC_PHYSICALOFFSET_POS, 8) != phy_offset) { /* not the record asked for */
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

/* walk_records(buffer, pos, file_start, check_crc) -> (pos, count, stop): the recovery walk over one
 * commitlog file's mapping from `pos`, passing every record that is whole and well formed (the checks
 * of layout_of), claims its own physical offset (file_start + its position), has a body CRC that
 * matches when check_crc is true, and is not torn (its last byte of data is not zero); it stops at a
 * blank record (WALK_BLANK) or at anything else (WALK_CHECK: the twin's full decode says why).
 * rocketstore.services.recovery.walk_records_py is its twin. */
static PyObject *
walk_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
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
    while (size - pos >= 8) {
        const unsigned char *at = buf + pos;
        long long total = read_be(at + REC_TOTALSIZE_POS, 4);
        unsigned long magic = (unsigned long)(read_be(at + REC_MAGICCODE_POS, 4) & 0xFFFFFFFFLL);
        if (magic == BLANK_MAGIC) {
            stop = WALK_BLANK;
            break;
        }
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < MIN_RECORD_SIZE || total > size - pos) {
            break;
        }
        struct layout l;
        if (layout_of(at, total, magic, &l) < 0) {
            PyErr_Clear(); /* lengths that do not add up: the twin names them */
            break;
        }
        if (l.phy_offset != file_start + pos) {
            break;
        }
        if (check_crc && l.body_end > l.body_start) {
            uint32_t crc = rs_crc32(0, at + l.body_start, (size_t)(l.body_end - l.body_start)) & CRC_MASK;
            if ((long long)crc != read_be(at + REC_BODYCRC_POS, 4)) {
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

/* The DispatchRequest of the record at `at` (`total` bytes, checked by layout_of into `l`) whose
 * properties parse into `properties`: a new reference, NULL after an error. */
static PyObject *
dispatch_request(PyTypeObject *cls, const unsigned char *at, long long total, const struct layout *l,
                 PyObject *topic, PyObject *properties)
{
    PyObject *found[3]; /* borrowed: TAGS, KEYS, UNIQ_KEY or NULL */
    PyObject *names[3] = {s_property_tags, s_property_keys, s_property_uniq_key};
    for (int i = 0; i < 3; i++) {
        found[i] = PyDict_GetItemWithError(properties, names[i]);
        if (found[i] == NULL && PyErr_Occurred()) {
            return NULL;
        }
    }
    PyObject *tags = found[0], *keys_text = found[1], *uniq = found[2];
    long long code = 0; /* format.javahash.tags_code */
    if (tags != NULL && PyUnicode_GET_LENGTH(tags) > 0) {
        if (ready(tags) < 0) {
            return NULL;
        }
        code = (int32_t)hash_units(0, tags);
    }
    PyObject *keys; /* format.properties.split_keys, as a tuple */
    if (keys_text != NULL && PyUnicode_GET_LENGTH(keys_text) > 0) {
        PyObject *tokens = space_separated(keys_text);
        keys = tokens == NULL ? NULL : PyList_AsTuple(tokens);
        Py_XDECREF(tokens);
    } else {
        keys = PyTuple_New(0);
    }
    if (keys == NULL) {
        return NULL;
    }
    long long born_ip_len = l->sys_flag & BORN_V6 ? 16 : 4;
    long long store_ts = read_be(at + FIXED_HEAD_SIZE + born_ip_len + REC_AFTER_BORN_IP_STORETIMESTAMP_POS, 8);
    PyObject *req = cls->tp_alloc(cls, DISPATCH_FIELDS);
    if (req == NULL) {
        Py_DECREF(keys);
        return NULL;
    }
    PyObject *items[DISPATCH_FIELDS] = {
        [D_TOPIC] = Py_NewRef(topic),
        [D_QUEUE_ID] = PyLong_FromLongLong(read_be(at + REC_QUEUEID_POS, 4)),
        [D_PHY_OFFSET] = PyLong_FromLongLong(l->phy_offset),
        [D_SIZE] = PyLong_FromLongLong(total),
        [D_TAGS_CODE] = PyLong_FromLongLong(code),
        [D_STORE_TIMESTAMP] = PyLong_FromLongLong(store_ts),
        [D_QUEUE_OFFSET] = PyLong_FromLongLong(read_be(at + REC_QUEUEOFFSET_POS, 8)),
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

/* dispatch_requests(cls, buffer, pos, limit, max_count, held_topic, out) -> (pos, stop): the catch-up's
 * requests for the records of one commitlog file's mapping from `pos`: for each whole, well-formed
 * record that ends by `limit` (the file's written bytes), `cls` (services.dispatch.DispatchRequest) made
 * as request_from_message makes it, appended to `out`; at most `max_count` of them. It stops at `limit`
 * or after max_count (REQUESTS_MORE), at a blank record (REQUESTS_BLANK), and before anything else: a
 * record that is not whole or well formed, or one of `held_topic` (SCHEDULE_TOPIC_XXXX, whose delay
 * the twin reads) (REQUESTS_CHECK). services.dispatch.dispatch_requests_py is its twin. */
static PyObject *
dispatch_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
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
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (pos < 0 || limit < pos || limit > (long long)view.len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "dispatch_requests: positions outside the buffer");
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)view.buf;
    struct topic_cache cache = {.len = -1, .text = NULL};
    int stop = REQUESTS_MORE, failed = 0;
    for (long long count = 0; pos < limit && count < max_count; count++) {
        const unsigned char *at = buf + pos;
        if ((long long)view.len - pos < 8) {
            stop = REQUESTS_CHECK;
            break;
        }
        long long total = read_be(at + REC_TOTALSIZE_POS, 4);
        unsigned long magic = (unsigned long)(read_be(at + REC_MAGICCODE_POS, 4) & 0xFFFFFFFFLL);
        if (magic == BLANK_MAGIC) { /* seen as decode_message sees it: in the whole buffer */
            stop = REQUESTS_BLANK;
            break;
        }
        struct layout l;
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < MIN_RECORD_SIZE || total > limit - pos) {
            stop = REQUESTS_CHECK;
            break;
        }
        if (layout_of(at, total, magic, &l) < 0) {
            PyErr_Clear(); /* lengths that do not add up: the twin says so */
            stop = REQUESTS_CHECK;
            break;
        }
        PyObject *topic = topic_of((const char *)at + l.topic_start, l.topic_len, &cache);
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
        PyObject *properties;
        if (total > l.props_start) {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)at + l.props_start, total - l.props_start, "replace");
            properties = text == NULL ? NULL : parse_properties(text);
            Py_XDECREF(text);
        } else {
            properties = PyDict_New();
        }
        PyObject *req = properties == NULL ? NULL
                                           : dispatch_request((PyTypeObject *)cls, at, total, &l, topic, properties);
        Py_XDECREF(properties);
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

/* decode_run(cls, entries, i, log, log_start, log_size, wanted, messages, max_count, total_bytes,
 * max_bytes) -> (i, total_bytes, state): the read loop of MessageStore.get over the consume-queue
 * entries in `entries` from entry i, decoding in place the records that lie in `log` (bytes
 * [0, log_size) of the commitlog file starting at log_start); rocketstore.log.entry_run.decode_run_py
 * is its twin and documents the rules. */
static PyObject *
decode_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "decode_run takes eleven arguments");
        return NULL;
    }
    if (check_message_class(args[0]) < 0) {
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *entries = args[1];
    PyObject *wanted = args[6];
    PyObject *messages = args[7];
    if (!PyBytes_Check(entries) || !PyList_Check(messages) || (wanted != Py_None && !PyAnySet_Check(wanted))) {
        PyErr_SetString(PyExc_TypeError, "decode_run: entries must be bytes, wanted a set or None, messages a list");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[2]);
    long long log_start = PyLong_AsLongLong(args[4]);
    long long log_size = PyLong_AsLongLong(args[5]);
    Py_ssize_t max_count = PyLong_AsSsize_t(args[8]);
    long long total_bytes = PyLong_AsLongLong(args[9]);
    long long max_bytes = PyLong_AsLongLong(args[10]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (i < 0 || log_start < 0 || total_bytes < 0 || max_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "decode_run: negative index, offset or byte count");
        return NULL;
    }
    if (total_bytes > LLONG_MAX / 2) { /* room for the sizes added below */
        PyErr_SetString(PyExc_OverflowError, "decode_run: total_bytes out of range");
        return NULL;
    }
    if (log_size < -1) {
        log_size = -1; /* the same answers: no record fits, and log_size - size cannot overflow */
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (log_size > (long long)view.len) {
        log_size = view.len; /* never read past the mapping, whatever the caller says */
    }
    const unsigned char *log = (const unsigned char *)view.buf;
    const unsigned char *units = (const unsigned char *)PyBytes_AS_STRING(entries);
    Py_ssize_t end = PyBytes_GET_SIZE(entries) / UNIT_SIZE;
    struct topic_cache cache = {.len = -1, .text = NULL};
    enum run_state state = RUN_END;
    int failed = 0;
    for (; i < end; i++) {
        const unsigned char *unit = units + i * UNIT_SIZE;
        long long phy_offset = read_be(unit + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, 8);
        long long size = read_be(unit + CQ_MESSAGE_SIZE_POS, 4);
        long long code = read_be(unit + CQ_TAGS_HASH_CODE_POS, 8);
        /* total_bytes + size > max_bytes without overflow (size is an int32) */
        int too_big = size >= 0 ? total_bytes > max_bytes - size : total_bytes + size > max_bytes;
        if (PyList_GET_SIZE(messages) > 0 && (PyList_GET_SIZE(messages) >= max_count || too_big)) {
            state = RUN_FULL;
            break;
        }
        if (phy_offset < 0 || size <= 0 || (phy_offset == 0 && size == FILLER_SIZE && code == 0)) {
            continue;
        }
        if (wanted != Py_None) {
            PyObject *key = PyLong_FromLongLong(code);
            int found = key == NULL ? -1 : PySet_Contains(wanted, key);
            Py_XDECREF(key);
            if (found < 0) {
                failed = 1;
                break;
            }
            if (!found) {
                continue;
            }
        }
        long long pos = phy_offset - log_start;
        if (pos < 0 || pos > log_size - size) {
            state = RUN_ELSEWHERE;
            break;
        }
        PyObject *msg = size < 8 ? NULL : record_in(cls, log + pos, size, phy_offset, &cache); /* 8: the prefix */
        if (msg == NULL) {
            if (PyErr_Occurred()) {
                failed = 1;
            } else {
                state = RUN_ELSEWHERE; /* not the record the entry names, or not a whole one */
            }
            break;
        }
        int appended = PyList_Append(messages, msg);
        Py_DECREF(msg);
        if (appended < 0) {
            failed = 1;
            break;
        }
        total_bytes += size;
    }
    Py_XDECREF(cache.text);
    PyBuffer_Release(&view);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("(nLi)", i, total_bytes, (int)state);
}

/* record_at(cls, buffer, pos, limit, phy_offset): the record whose bytes start at `pos` of `buffer`
 * and end by `limit`, as a `cls` (a MessageBase subclass), when it is a whole, well-formed record whose
 * PHYSICALOFFSET is `phy_offset`; None for anything else (the caller tells why).
 * rocketstore.format.message.record_at_py is its twin. */
static PyObject *
record_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "record_at(cls, buffer, pos, limit, phy_offset) takes five arguments");
        return NULL;
    }
    if (check_message_class(args[0]) < 0) {
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
        result = record_in((PyTypeObject *)args[0], (const unsigned char *)view.buf + pos, limit - pos, phy_offset,
                           NULL);
    }
    PyBuffer_Release(&view);
    return result != NULL || PyErr_Occurred() ? result : Py_NewRef(Py_None);
}

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
static PyObject *
fill_slots(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
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

#define I32_MIN (-2147483647LL - 1)
#define I32_MAX 2147483647LL

/* The attributes prepare_plain reads, interned once. */
static PyObject *s_topic, *s_body, *s_queue_id, *s_tags, *s_keys, *s_properties, *s_born_host, *s_sys_flag,
    *s_flag, *s_born_timestamp, *s_reconsume_times, *s_prepared_transaction_offset, *s_size;


static int
has_separator(PyObject *text)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    return PyUnicode_FindChar(text, 0x01, 0, n, 1) != -1 || PyUnicode_FindChar(text, 0x02, 0, n, 1) != -1;
}

/* prepare_plain(message, topic_parts, max_body, max_record, store_ip, shape, prepared_cls, slots):
 * rocketstore.store.prepare.Preparer.prepare for the common message (no properties mapping, no born host,
 * bytes body, str tags, str keys, int queue id and sys flag, a topic found in topic_parts, the dict of
 * topics that passed checked_topic). Anything else, and anything the Python path would refuse, gives
 * None: Preparer.prepare_py then runs and raises its own error. `shape` is message_shape,
 * `prepared_cls` Prepared, `slots` Message's slot descriptors for MESSAGE_FIELDS (read straight from a
 * Message; a subclass goes through getattr) or None. */

/* The Message fields prepare_one reads, in the order of the `slots` argument of prepare_plain and
 * prepare_many (rocketstore.store.prepare.MESSAGE_FIELDS). */
static PyObject *message_field_names[MESSAGE_FIELDS]; /* interned at import, in the generated order */

/* Where a message's fields sit: the slot offsets of the class (`type`) whose member descriptors were
 * given, or no class (every field through getattr). */
struct message_layout {
    PyTypeObject *type;
    Py_ssize_t offset[MESSAGE_FIELDS];
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
            || PyUnicode_Compare(((PyDescrObject *)descriptor)->d_name, message_field_names[i]) != 0
            || (type != NULL && ((PyDescrObject *)descriptor)->d_type != type)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "prepare: slots must be one class's object slots, in "
                                                 "the order of rocketstore.store.prepare.MESSAGE_FIELDS");
            }
            return -1;
        }
        type = ((PyDescrObject *)descriptor)->d_type;
        layout->offset[i] = ((PyMemberDescrObject *)descriptor)->d_member->offset;
    }
    layout->type = type;
    Py_XSETREF(checked_slots, Py_NewRef(slots)); /* it keeps the descriptors, and they the class */
    checked_layout = *layout;
    return 0;
}

/* A new reference to field `field` of `message`: straight from its slot when the message is exactly
 * of the layout's class (a subclass may override a field), else through getattr. */
static PyObject *
message_field(PyObject *message, const struct message_layout *layout, int field)
{
    if (Py_TYPE(message) == layout->type) {
        PyObject *value = *(PyObject **)((char *)message + layout->offset[field]);
        if (value != NULL) {
            return Py_NewRef(value);
        }
    }
    return PyObject_GetAttr(message, message_field_names[field]);
}

/* The last shape prepare_one asked message_shape for, kept over the messages of one prepare_many
 * call: message_shape is a pure function of its arguments, so the same sys flag and tags objects (and
 * the call's one store host) give the same shape; and the tags object of that shape passed the tags
 * checks. Also the last QUEUE_KEY_MEMO queue keys made, (topic, queue id) tuples that messages of the
 * same topic object and queue id share. Strong references, or NULL. */
#define QUEUE_KEY_MEMO 8

struct shape_memo {
    PyObject *sys_flag, *tags, *shape;
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
    PyObject *topic_parts, *store_ip, *shape_fn;
    PyTypeObject *prepared_cls;
    Py_ssize_t max_body, max_record;
    struct message_layout layout;
};

/* `call` from args[1..7] (topic_parts, max_body, max_record, store_ip, shape, prepared_cls, slots). */
static int
prepare_call_of(PyObject *const *args, struct prepare_call *call)
{
    call->topic_parts = args[1];
    call->store_ip = args[4];
    call->shape_fn = args[5];
    call->prepared_cls = (PyTypeObject *)args[6];
    call->max_body = PyLong_AsSsize_t(args[2]);
    call->max_record = PyLong_AsSsize_t(args[3]);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (!PyDict_Check(call->topic_parts) || !PyBytes_CheckExact(call->store_ip) || !PyType_Check(args[6])
        || !PyType_IsSubtype(call->prepared_cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "prepare_plain: a dict, bytes and a tuple class expected");
        return -1;
    }
    return message_layout_of(args[7], &call->layout);
}

static PyObject *prepare_one(PyObject *message, const struct prepare_call *call, struct shape_memo *memo);

static PyObject *
prepare_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "prepare_plain takes eight arguments");
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

/* prepare_plain for `message`, with `memo` carried from the message before. */
static PyObject *
prepare_one(PyObject *message, const struct prepare_call *call, struct shape_memo *memo)
{
    PyObject *topic_parts = call->topic_parts, *store_ip = call->store_ip, *shape_fn = call->shape_fn;
    PyTypeObject *prepared_cls = call->prepared_cls;
    Py_ssize_t max_body = call->max_body, max_record = call->max_record;
    const struct message_layout *layout = &call->layout;
    PyObject *topic = NULL, *body = NULL, *queue_id = NULL, *tags = NULL, *keys = NULL, *other = NULL;
    PyObject *sys_flag = NULL, *joined = NULL, *split = NULL, *tail = NULL, *shape = NULL;
    PyObject *head_size = NULL, *crc = NULL, *queue_key = NULL, *born_port = NULL, *size = NULL;
    PyObject *result = NULL;
    PyObject *declined = Py_None;
#define GET(var, field) \
    if ((var = message_field(message, layout, field)) == NULL) { goto fail; }
#define DECLINE_UNLESS(cond) \
    if (!(cond)) { result = Py_NewRef(declined); goto done; }

    GET(other, M_PROPERTIES);
    DECLINE_UNLESS(other == Py_None);
    Py_CLEAR(other);
    GET(other, M_BORN_HOST);
    DECLINE_UNLESS(other == Py_None);
    Py_CLEAR(other);
    GET(topic, M_TOPIC);
    DECLINE_UNLESS(PyUnicode_CheckExact(topic));
    PyObject *topic_part = PyDict_GetItemWithError(topic_parts, topic); /* borrowed */
    if (topic_part == NULL && PyErr_Occurred()) {
        goto fail;
    }
    DECLINE_UNLESS(topic_part != NULL && PyBytes_CheckExact(topic_part));
    GET(body, M_BODY);
    DECLINE_UNLESS(PyBytes_CheckExact(body) && PyBytes_GET_SIZE(body) <= max_body);
    GET(queue_id, M_QUEUE_ID);
    DECLINE_UNLESS(PyLong_CheckExact(queue_id));
    long long qid = PyLong_AsLongLong(queue_id);
    if (qid == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        qid = -1;
    }
    DECLINE_UNLESS(qid >= 0 && qid <= 0x7FFFFFFF);
    GET(sys_flag, M_SYS_FLAG);
    DECLINE_UNLESS(PyLong_CheckExact(sys_flag));
    GET(tags, M_TAGS);
    DECLINE_UNLESS(tags == Py_None || (memo->shape != NULL && tags == memo->tags)
                   || (PyUnicode_CheckExact(tags) && PyUnicode_GET_LENGTH(tags) > 0 && !has_separator(tags)));
    GET(keys, M_KEYS);
    DECLINE_UNLESS(PyTuple_CheckExact(keys));
    Py_ssize_t key_count = PyTuple_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < key_count; i++) {
        DECLINE_UNLESS(PyUnicode_CheckExact(PyTuple_GET_ITEM(keys, i)));
    }

    /* the properties text: TAGS\x01tags [\x02] KEYS\x01joined, as UTF-8 */
    Py_ssize_t text_length = 0;
    const char *tags_utf8 = NULL, *keys_utf8 = NULL;
    Py_ssize_t tags_bytes = 0, keys_bytes = 0;
    if (tags != Py_None) {
        tags_utf8 = PyUnicode_AsUTF8AndSize(tags, &tags_bytes);
        if (tags_utf8 == NULL) { /* a lone surrogate: the Python path answers */
            PyErr_Clear();
            DECLINE_UNLESS(0);
        }
        text_length = 5 + PyUnicode_GET_LENGTH(tags);
    }
    if (key_count > 0) {
        PyObject *space = PyUnicode_FromOrdinal(' ');
        if (space == NULL) {
            goto fail;
        }
        joined = PyUnicode_Join(space, keys);
        Py_DECREF(space);
        if (joined == NULL) {
            goto fail;
        }
        Py_ssize_t joined_length = PyUnicode_GET_LENGTH(joined);
        DECLINE_UNLESS(joined_length > 0 && !has_separator(joined));
        keys_utf8 = PyUnicode_AsUTF8AndSize(joined, &keys_bytes);
        if (keys_utf8 == NULL) {
            PyErr_Clear();
            DECLINE_UNLESS(0);
        }
        text_length += (tags != Py_None ? 1 : 0) + 5 + joined_length;
        if (PyUnicode_FindChar(joined, ' ', 0, joined_length, 1) == -1) {
            /* one key without a space: the message's own keys tuple is (joined,) already */
            split = key_count == 1 ? Py_NewRef(keys) : PyTuple_Pack(1, joined);
        } else {
            PyObject *kept = space_separated(joined);
            if (kept == NULL) {
                goto fail;
            }
            split = PyList_AsTuple(kept);
            Py_DECREF(kept);
        }
        if (split == NULL) {
            goto fail;
        }
    } else {
        split = PyTuple_New(0);
        if (split == NULL) {
            goto fail;
        }
    }
    Py_ssize_t props_bytes = (tags != Py_None ? 5 + tags_bytes : 0)
                             + (key_count > 0 ? (tags != Py_None ? 1 : 0) + 5 + keys_bytes : 0);
    DECLINE_UNLESS(text_length <= MAX_PROPERTIES_LENGTH && props_bytes <= MAX_PROPERTIES_LENGTH);

    /* tail: TOPICLENGTH + TOPIC (cached), PROPERTIESLENGTH (int16), PROPERTIES */
    Py_ssize_t topic_bytes = PyBytes_GET_SIZE(topic_part);
    tail = PyBytes_FromStringAndSize(NULL, topic_bytes + 2 + props_bytes);
    if (tail == NULL) {
        goto fail;
    }
    char *out = PyBytes_AS_STRING(tail);
    memcpy(out, PyBytes_AS_STRING(topic_part), (size_t)topic_bytes);
    out += topic_bytes;
    *out++ = (char)((props_bytes >> 8) & 0xFF);
    *out++ = (char)(props_bytes & 0xFF);
    if (tags != Py_None) {
        memcpy(out, "TAGS\x01", 5);
        memcpy(out + 5, tags_utf8, (size_t)tags_bytes);
        out += 5 + tags_bytes;
    }
    if (key_count > 0) {
        if (tags != Py_None) {
            *out++ = '\x02';
        }
        memcpy(out, "KEYS\x01", 5);
        memcpy(out + 5, keys_utf8, (size_t)keys_bytes);
    }

    Py_ssize_t header;
    if (memo->shape != NULL && memo->sys_flag == sys_flag && memo->tags == tags) {
        shape = Py_NewRef(memo->shape);
        header = memo->header;
    } else {
        shape = PyObject_CallFunctionObjArgs(shape_fn, sys_flag, tags, store_ip, store_ip, NULL);
        if (shape == NULL) {
            goto fail;
        }
        if (!PyTuple_Check(shape) || PyTuple_GET_SIZE(shape) != 5) {
            PyErr_SetString(PyExc_TypeError, "prepare_plain: shape must return a 5-tuple");
            goto fail;
        }
        head_size = PyObject_GetAttr(PyTuple_GET_ITEM(shape, 0), s_size);
        if (head_size == NULL) {
            goto fail;
        }
        header = PyLong_AsSsize_t(head_size);
        if (header == -1 && PyErr_Occurred()) {
            goto fail;
        }
        shape_memo_clear(memo);
        memo->sys_flag = Py_NewRef(sys_flag);
        memo->tags = Py_NewRef(tags);
        memo->shape = Py_NewRef(shape);
        memo->header = header;
    }
    PyObject *head = PyTuple_GET_ITEM(shape, 0);
    Py_ssize_t record = header + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(tail);
    DECLINE_UNLESS(record <= max_record);
    uint32_t body_crc;
    if (PyBytes_GET_SIZE(body) >= CRC_RELEASE_GIL_BYTES) {  /* a bytes object cannot change meanwhile */
        Py_BEGIN_ALLOW_THREADS
        body_crc = rs_crc32(0, (const unsigned char *)PyBytes_AS_STRING(body), (size_t)PyBytes_GET_SIZE(body));
        Py_END_ALLOW_THREADS
    }
    else {
        body_crc = rs_crc32(0, (const unsigned char *)PyBytes_AS_STRING(body), (size_t)PyBytes_GET_SIZE(body));
    }
    crc = PyLong_FromUnsignedLong(body_crc & 0x7FFFFFFFUL);
    queue_key = queue_key_of(memo, topic, queue_id, qid);
    born_port = PyLong_FromLong(0);
    size = PyLong_FromSsize_t(record);
    if (crc == NULL || queue_key == NULL || born_port == NULL || size == NULL) {
        goto fail;
    }
    untrack_if_atomic(split);
    PyObject *flag = NULL, *born_timestamp = NULL, *reconsume = NULL, *prepared_offset = NULL;
    GET(flag, M_FLAG);
    if ((born_timestamp = message_field(message, layout, M_BORN_TIMESTAMP)) == NULL
        || (reconsume = message_field(message, layout, M_RECONSUME_TIMES)) == NULL
        || (prepared_offset = message_field(message, layout, M_PREPARED_TRANSACTION_OFFSET)) == NULL) {
        Py_DECREF(flag);
        Py_XDECREF(born_timestamp);
        Py_XDECREF(reconsume);
        goto fail;
    }
    int in_range = PyLong_CheckExact(flag) && PyLong_CheckExact(reconsume) && PyLong_CheckExact(prepared_offset)
                   && (born_timestamp == Py_None || PyLong_CheckExact(born_timestamp));
    if (in_range) { /* the header fields' ranges (prepare_py's messages say which is out) */
        (void)int_field(flag, I32_MIN, I32_MAX, &in_range);
        (void)int_field(reconsume, I32_MIN, I32_MAX, &in_range);
        (void)int_field(prepared_offset, LLONG_MIN, LLONG_MAX, &in_range);
        (void)int_field(sys_flag, I32_MIN, I32_MAX, &in_range);
        if (born_timestamp != Py_None) {
            (void)int_field(born_timestamp, LLONG_MIN, LLONG_MAX, &in_range);
        }
    }
    if (!in_range) {
        Py_DECREF(flag);
        Py_DECREF(born_timestamp);
        Py_DECREF(reconsume);
        Py_DECREF(prepared_offset);
        result = Py_NewRef(declined);
        goto done;
    }
    PyObject *prepared = prepared_cls->tp_alloc(prepared_cls, PREPARED_FIELDS);
    if (prepared == NULL) {
        Py_DECREF(flag);
        Py_DECREF(born_timestamp);
        Py_DECREF(reconsume);
        Py_DECREF(prepared_offset);
        goto fail;
    }
    PyObject *fields[PREPARED_FIELDS] = {
        [P_TOPIC] = Py_NewRef(topic), [P_QUEUE_ID] = Py_NewRef(queue_id), [P_QUEUE_KEY] = Py_NewRef(queue_key),
        [P_BODY] = Py_NewRef(body), [P_BODY_CRC] = Py_NewRef(crc), [P_HEAD] = Py_NewRef(head),
        [P_TAIL] = Py_NewRef(tail), [P_FLAG] = flag, [P_SYS_FLAG] = Py_NewRef(sys_flag),
        [P_RECORD_SYS_FLAG] = Py_NewRef(PyTuple_GET_ITEM(shape, 1)), [P_BORN_TIMESTAMP] = born_timestamp,
        [P_BORN_IP] = Py_NewRef(store_ip), [P_BORN_PORT] = Py_NewRef(born_port), [P_RECONSUME_TIMES] = reconsume,
        [P_PREPARED_OFFSET] = prepared_offset, [P_SIZE] = Py_NewRef(size), [P_WAIT] = Py_NewRef(Py_True),
        [P_IN_QUEUE] = Py_NewRef(PyTuple_GET_ITEM(shape, 2)), [P_INDEXED] = Py_NewRef(PyTuple_GET_ITEM(shape, 3)),
        [P_DELAY_LEVEL] = PyLong_FromLong(0), [P_TAGS_CODE] = Py_NewRef(PyTuple_GET_ITEM(shape, 4)),
        [P_KEYS] = Py_NewRef(split), [P_UNIQ_KEY] = Py_NewRef(Py_None),
    };
    for (int i = 0; i < PREPARED_FIELDS; i++) {
        PyTuple_SET_ITEM(prepared, i, fields[i]);
    }
    if (PyTuple_GET_ITEM(prepared, P_DELAY_LEVEL) == NULL) {
        Py_DECREF(prepared);
        goto fail;
    }
    /* Its items are ints, strings, bytes, None, two untracked tuples and the header Struct shared
     * through message_shape's cache: none can refer back to it, so it is part of no cycle (see
     * untrack_if_atomic for why that matters to a batch). */
    PyObject_GC_UnTrack(prepared);
    result = prepared;
    goto done;
fail:
    result = NULL;
done:
    Py_XDECREF(topic);
    Py_XDECREF(body);
    Py_XDECREF(queue_id);
    Py_XDECREF(tags);
    Py_XDECREF(keys);
    Py_XDECREF(other);
    Py_XDECREF(sys_flag);
    Py_XDECREF(joined);
    Py_XDECREF(split);
    Py_XDECREF(tail);
    Py_XDECREF(shape);
    Py_XDECREF(head_size);
    Py_XDECREF(crc);
    Py_XDECREF(queue_key);
    Py_XDECREF(born_port);
    Py_XDECREF(size);
    return result;
#undef GET
#undef DECLINE_UNLESS
}

/* pack_run reads the fields of rocketstore.store.prepare.Prepared by the generated enum prepared_field. */

/* What pack_run checked of one prepared message (pass 1) and writes (pass 2). */
struct packed {
    PyObject *p; /* borrowed */
    long long size, crc, queue_id, flag, record_flag, born_ts, born_port, reconsume, prepared_offset, code;
    int in_queue, indexed, born_has_ts, queue; /* queue: its slot in the run's queues */
    Py_ssize_t keys;                            /* its index keys: UNIQ_KEY and KEYS, the empty left out */
};

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
static Py_ssize_t
index_key_count(PyObject *topic, PyObject *keys, PyObject *uniq)
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

/* One index key as IndexFile.put_keys takes it: (index hash, phy) as native int64, the hash being
 * Java's hash of "topic#key" (topic_hash: the hash of "topic#"), its absolute value, 0 for MIN. */
static unsigned char *
pack_index_key(unsigned char *out, uint32_t topic_hash, long long phy, PyObject *key)
{
    int32_t h = (int32_t)hash_units(topic_hash, key);
    int64_t index_hash = h == INT32_MIN ? 0 : (h < 0 ? -(int64_t)h : h);
    int64_t at = phy;
    memcpy(out, &index_hash, 8);
    memcpy(out + 8, &at, 8);
    return out + 16;
}

/* The keys that index_key_count counted, UNIQ_KEY first. */
static unsigned char *
pack_index_keys(unsigned char *out, uint32_t topic_hash, long long phy, PyObject *keys, PyObject *uniq)
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
    if (PyByteArray_Resize(units, had + count * 20) < 0) {
        return NULL;
    }
    unsigned char *at = (unsigned char *)PyByteArray_AS_STRING(units) + had;
    memset(at, 0, (size_t)(count * 20)); /* written in pass 2; zeros if it stops on an error */
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

/* pack_run(prepared, i, stop, phy, room, store_ts, queue_table, store_ip, store_port, per_queue,
 * index_keys, placed) -> (next, records): the write loop of MessageStore._append for the
 * messages prepared[i:stop] that fit in `room` bytes of one commitlog file starting at `phy`, all with
 * store timestamp `store_ts`; rocketstore.store.append_run.pack_run_py is its twin and documents the rules. It
 * stops before a message it does not take (a delayed one, a value outside its header field): the twin
 * then runs for that message. */
static PyObject *
pack_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "pack_run takes twelve arguments");
        return NULL;
    }
    PyObject *prepared = args[0], *queue_table = args[6], *store_ip = args[7], *per_queue = args[9];
    PyObject *index_keys = args[10], *placed = args[11];
    if (!PyList_Check(prepared) || !PyDict_Check(queue_table) || !PyBytes_Check(store_ip) || !PyDict_Check(per_queue)
        || !PyByteArray_Check(index_keys) || !PyList_Check(placed)) {
        PyErr_SetString(PyExc_TypeError, "pack_run: lists, dicts, bytes and a bytearray expected");
        return NULL;
    }
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[2]);
    long long phy = PyLong_AsLongLong(args[3]);
    long long room = PyLong_AsLongLong(args[4]);
    long long store_ts = PyLong_AsLongLong(args[5]);
    long long store_port = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t store_ip_len = PyBytes_GET_SIZE(store_ip);
    if (i < 0 || stop > PyList_GET_SIZE(prepared) || phy < 0 || phy > LLONG_MAX / 2
        || (store_ip_len != 4 && store_ip_len != 16) || store_port < I32_MIN || store_port > I32_MAX) {
        PyErr_SetString(PyExc_ValueError, "pack_run: index, offset or store host out of range");
        return NULL;
    }
    /* pass 1: how many messages fit and are within their fields; nothing is changed yet */
    Py_ssize_t count = stop > i ? stop - i : 0;
    struct packed few[8]; /* a single put, a small batch: no allocation */
    struct packed *runs = count <= 8 ? few : PyMem_Malloc(sizeof(struct packed) * (size_t)count);
    if (runs == NULL) {
        return PyErr_NoMemory();
    }
    Py_ssize_t taken = 0, total_keys = 0;
    long long total = 0;
    struct run_queue queues[RUN_QUEUES];
    int queue_count = 0;
    for (Py_ssize_t j = i; j < stop; j++) {
        PyObject *p = PyList_GET_ITEM(prepared, j);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != PREPARED_FIELDS) {
            break;
        }
        struct packed *r = &runs[taken];
        int ok = 1;
        r->p = p;
        r->size = int_field(PyTuple_GET_ITEM(p, P_SIZE), 0, I32_MAX, &ok);
        r->crc = int_field(PyTuple_GET_ITEM(p, P_BODY_CRC), I32_MIN, I32_MAX, &ok);
        r->queue_id = int_field(PyTuple_GET_ITEM(p, P_QUEUE_ID), I32_MIN, I32_MAX, &ok);
        r->flag = int_field(PyTuple_GET_ITEM(p, P_FLAG), I32_MIN, I32_MAX, &ok);
        r->record_flag = int_field(PyTuple_GET_ITEM(p, P_RECORD_SYS_FLAG), I32_MIN, I32_MAX, &ok);
        PyObject *born_ts = PyTuple_GET_ITEM(p, P_BORN_TIMESTAMP);
        r->born_has_ts = born_ts != Py_None;
        r->born_ts = r->born_has_ts ? int_field(born_ts, LLONG_MIN, LLONG_MAX, &ok) : store_ts;
        r->born_port = int_field(PyTuple_GET_ITEM(p, P_BORN_PORT), I32_MIN, I32_MAX, &ok);
        r->reconsume = int_field(PyTuple_GET_ITEM(p, P_RECONSUME_TIMES), I32_MIN, I32_MAX, &ok);
        r->prepared_offset = int_field(PyTuple_GET_ITEM(p, P_PREPARED_OFFSET), LLONG_MIN, LLONG_MAX, &ok);
        r->code = int_field(PyTuple_GET_ITEM(p, P_TAGS_CODE), LLONG_MIN, LLONG_MAX, &ok);
        long long delay = int_field(PyTuple_GET_ITEM(p, P_DELAY_LEVEL), 0, 0, &ok); /* delayed: the twin */
        (void)delay;
        PyObject *body = PyTuple_GET_ITEM(p, P_BODY), *tail = PyTuple_GET_ITEM(p, P_TAIL);
        PyObject *born_ip = PyTuple_GET_ITEM(p, P_BORN_IP);
        if (!ok || !PyBytes_Check(body) || !PyBytes_Check(tail) || !PyBytes_Check(born_ip)
            || (PyBytes_GET_SIZE(born_ip) != 4 && PyBytes_GET_SIZE(born_ip) != 16)
            || PyBytes_GET_SIZE(body) > I32_MAX) {
            break;
        }
        long long header = 80 + PyBytes_GET_SIZE(born_ip) + store_ip_len;
        if (r->size != header + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(tail) || total + r->size > room) {
            break;
        }
        int in_queue = PyObject_IsTrue(PyTuple_GET_ITEM(p, P_IN_QUEUE));
        int indexed = PyObject_IsTrue(PyTuple_GET_ITEM(p, P_INDEXED));
        if (in_queue < 0 || indexed < 0) {
            release_runs(runs, few);
            return NULL;
        }
        r->keys = 0;
        if (indexed) {
            r->keys = index_key_count(PyTuple_GET_ITEM(p, P_TOPIC), PyTuple_GET_ITEM(p, P_KEYS),
                                      PyTuple_GET_ITEM(p, P_UNIQ_KEY));
            if (r->keys == -2) {
                release_runs(runs, few);
                return NULL;
            }
            if (r->keys < 0) {
                break;
            }
        }
        if (in_queue) {
            PyObject *key = PyTuple_GET_ITEM(p, P_QUEUE_KEY);
            int q = run_queue_of(queues, queue_count, key);
            if (q == -2) {
                release_runs(runs, few);
                return NULL;
            }
            if (q == -1) {
                if (queue_count == RUN_QUEUES) {
                    break;
                }
                PyObject *known = PyDict_GetItemWithError(queue_table, key);
                if (known == NULL && PyErr_Occurred()) {
                    release_runs(runs, few);
                    return NULL;
                }
                int fits = 1;
                long long next = 0;
                if (known != NULL) {
                    /* a queue offset must stay an int64 after this run's messages: leave the edge to the twin */
                    next = int_field(known, 0, LLONG_MAX / 2, &fits);
                }
                if (!fits) {
                    break;
                }
                q = queue_count++;
                queues[q].key = key;
                queues[q].next = next;
                queues[q].count = 0;
                queues[q].out = NULL;
            }
            queues[q].count++;
            r->queue = q;
        }
        r->in_queue = in_queue;
        r->indexed = indexed;
        total += r->size;
        total_keys += r->keys;
        taken++;
    }
    PyObject *records = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    PyObject *stamp = PyLong_FromLongLong(store_ts);
    if (records == NULL || stamp == NULL) {
        goto error;
    }
    /* each queue's units grow once by its entries of this call */
    for (int q = 0; q < queue_count; q++) {
        queues[q].out = grow_queue_units(per_queue, queues[q].key, queues[q].next, queues[q].count);
        if (queues[q].out == NULL) {
            goto error;
        }
    }
    Py_ssize_t keys_had = PyByteArray_GET_SIZE(index_keys);
    if (PyByteArray_Resize(index_keys, keys_had + total_keys * 16) < 0) {
        goto error;
    }
    unsigned char *key_out = (unsigned char *)PyByteArray_AS_STRING(index_keys) + keys_had;
    PyObject *last_topic = NULL; /* borrowed: messages of one topic reuse its hash */
    uint32_t topic_hash = 0;
    /* pass 2: queue offsets, queue units, index keys, placements and the bytes */
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(records);
    for (Py_ssize_t k = 0; k < taken; k++) {
        struct packed *r = &runs[k];
        PyObject *p = r->p;
        long long queue_offset = 0;
        PyObject *phy_obj = PyLong_FromLongLong(phy);
        PyObject *qo_obj = NULL;
        if (phy_obj == NULL) {
            goto error;
        }
        if (r->in_queue) {
            struct run_queue *queue = &queues[r->queue];
            queue_offset = queue->next++;
            qo_obj = PyLong_FromLongLong(queue_offset);
            if (qo_obj == NULL) {
                Py_DECREF(phy_obj);
                goto error;
            }
            write_be(queue->out + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, (uint64_t)phy, 8);
            write_be(queue->out + CQ_MESSAGE_SIZE_POS, (uint64_t)r->size, 4);
            write_be(queue->out + CQ_TAGS_HASH_CODE_POS, (uint64_t)r->code, 8);
            queue->out += UNIT_SIZE;
        } else {
            qo_obj = PyLong_FromLong(0);
        }
        if (r->keys > 0) {
            PyObject *topic = PyTuple_GET_ITEM(p, P_TOPIC);
            if (topic != last_topic) {
                topic_hash = 31u * hash_units(0, topic) + '#';
                last_topic = topic;
            }
            key_out = pack_index_keys(key_out, topic_hash, phy, PyTuple_GET_ITEM(p, P_KEYS),
                                      PyTuple_GET_ITEM(p, P_UNIQ_KEY));
        }
        PyObject *place = qo_obj == NULL ? NULL : PyTuple_Pack(3, phy_obj, qo_obj, stamp);
        if (place != NULL) {
            untrack_if_atomic(place);
        }
        int failed = place == NULL || PyList_Append(placed, place) < 0;
        Py_XDECREF(place);
        Py_DECREF(phy_obj);
        Py_XDECREF(qo_obj);
        if (failed) {
            goto error;
        }
        /* the header, then BODY and the tail */
        PyObject *body = PyTuple_GET_ITEM(p, P_BODY), *tail = PyTuple_GET_ITEM(p, P_TAIL);
        PyObject *born_ip = PyTuple_GET_ITEM(p, P_BORN_IP);
        write_be(out + REC_TOTALSIZE_POS, (uint64_t)r->size, 4);
        write_be(out + REC_MAGICCODE_POS, MAGIC_V1, 4);
        write_be(out + REC_BODYCRC_POS, (uint64_t)r->crc, 4);
        write_be(out + REC_QUEUEID_POS, (uint64_t)r->queue_id, 4);
        write_be(out + REC_FLAG_POS, (uint64_t)r->flag, 4);
        write_be(out + REC_QUEUEOFFSET_POS, (uint64_t)queue_offset, 8);
        write_be(out + REC_PHYSICALOFFSET_POS, (uint64_t)phy, 8);
        write_be(out + REC_SYSFLAG_POS, (uint64_t)r->record_flag, 4);
        write_be(out + REC_BORNTIMESTAMP_POS, (uint64_t)r->born_ts, 8);
        unsigned char *at = out + FIXED_HEAD_SIZE;
        memcpy(at, PyBytes_AS_STRING(born_ip), (size_t)PyBytes_GET_SIZE(born_ip));
        at += PyBytes_GET_SIZE(born_ip);
        write_be(at + REC_AFTER_BORN_IP_BORNHOST_PORT_POS, (uint64_t)r->born_port, 4);
        write_be(at + REC_AFTER_BORN_IP_STORETIMESTAMP_POS, (uint64_t)store_ts, 8);
        at += REC_AFTER_BORN_IP_SIZE;
        memcpy(at, PyBytes_AS_STRING(store_ip), (size_t)store_ip_len);
        at += store_ip_len;
        write_be(at + REC_AFTER_STORE_IP_STOREHOST_PORT_POS, (uint64_t)store_port, 4);
        write_be(at + REC_AFTER_STORE_IP_RECONSUMETIMES_POS, (uint64_t)r->reconsume, 4);
        write_be(at + REC_AFTER_STORE_IP_PREPAREDTRANSACTIONOFFSET_POS, (uint64_t)r->prepared_offset, 8);
        write_be(at + REC_AFTER_STORE_IP_BODYLENGTH_POS, (uint64_t)PyBytes_GET_SIZE(body), 4);
        at += REC_AFTER_STORE_IP_SIZE;
        memcpy(at, PyBytes_AS_STRING(body), (size_t)PyBytes_GET_SIZE(body));
        at += PyBytes_GET_SIZE(body);
        memcpy(at, PyBytes_AS_STRING(tail), (size_t)PyBytes_GET_SIZE(tail));
        out += r->size;
        phy += r->size;
    }
    if (write_back_queues(queue_table, queues, queue_count) < 0) {
        goto error;
    }
    release_runs(runs, few);
    Py_DECREF(stamp);
    PyObject *next = PyLong_FromSsize_t(i + taken);
    PyObject *answer = next == NULL ? NULL : PyTuple_Pack(2, next, records);
    Py_XDECREF(next);
    Py_DECREF(records);
    return answer;
error:
    release_runs(runs, few);
    Py_XDECREF(records);
    Py_XDECREF(stamp);
    return NULL;
}

/* msync(mapping, start, length): msync(MS_SYNC) of bytes [start, start + length) of a shared mapping,
 * like mmap.flush(start, length) but without holding the interpreter lock while the disk works, so
 * that other threads (the producers of a group commit) go on meanwhile. The mapping's buffer stays
 * exported during the call, so the mapping cannot be closed under it. start must be page-aligned. */
static PyObject *
msync_range(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "msync(mapping, start, length) takes three arguments");
        return NULL;
    }
    Py_ssize_t start = PyLong_AsSsize_t(args[1]);
    Py_ssize_t length = PyLong_AsSsize_t(args[2]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    long page = sysconf(_SC_PAGESIZE);
    char *at = (char *)view.buf + (start > 0 ? start : 0);
    if (start < 0 || length < 0 || start > view.len || length > view.len - start || page <= 0
        || (uintptr_t)at % (uintptr_t)page != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "msync: range outside the mapping or start not page-aligned");
        return NULL;
    }
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

/* put_results(cls, descriptors, status, prefix, prepared, placed): the PutResult of each prepared
 * message and its (phy, queue offset, store timestamp), as fill_slots(cls, descriptors, status, phy,
 * queue offset, size, prefix + "%016X" % phy, store timestamp, topic, queue id) makes them one by one
 * (rocketstore.store.write_path.put_results_py). `prefix` is the store host's hex (ASCII). */
static PyObject *
put_results(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) || !PyUnicode_Check(args[3])
        || !PyList_Check(args[4]) || !PyList_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "put_results(cls, descriptors, status, prefix, prepared, placed): a class, a tuple, "
                        "a status, a str and two lists");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *descriptors = args[1], *status = args[2], *prefix = args[3], *prepared = args[4];
    PyObject *placed = args[5];
    if (PyTuple_GET_SIZE(descriptors) != 8) {
        PyErr_SetString(PyExc_TypeError, "put_results: eight descriptors expected");
        return NULL;
    }
    if (check_slots(cls, descriptors, "put_results") < 0) {
        return NULL;
    }
    if (ready(prefix) < 0) {
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(prefix)) {
        PyErr_SetString(PyExc_ValueError, "put_results: the message id prefix must be ASCII");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(prepared);
    if (PyList_GET_SIZE(placed) != n) {
        PyErr_SetString(PyExc_ValueError, "put_results: prepared and placed differ in length");
        return NULL;
    }
    Py_ssize_t prefix_length = PyUnicode_GET_LENGTH(prefix);
    const char *prefix_chars = (const char *)PyUnicode_DATA(prefix);
    static const char hex[] = "0123456789ABCDEF";
    PyObject *results = PyList_New(n);
    PyObject *empty = PyTuple_New(0);
    if (results == NULL || empty == NULL) {
        Py_XDECREF(results);
        Py_XDECREF(empty);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(prepared, i), *where = PyList_GET_ITEM(placed, i);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) < PREPARED_FIELDS || !PyTuple_Check(where)
            || PyTuple_GET_SIZE(where) != 3) {
            PyErr_SetString(PyExc_TypeError, "put_results: a Prepared and a (phy, queue offset, store time) "
                                             "tuple expected");
            goto fail;
        }
        PyObject *phy = PyTuple_GET_ITEM(where, 0);
        unsigned long long phy_value = PyLong_AsUnsignedLongLong(phy);
        if (phy_value == (unsigned long long)-1 && PyErr_Occurred()) {
            goto fail;
        }
        PyObject *msg_id = PyUnicode_New(prefix_length + 16, 127);
        if (msg_id == NULL) {
            goto fail;
        }
        char *id_chars = (char *)PyUnicode_DATA(msg_id);
        memcpy(id_chars, prefix_chars, (size_t)prefix_length);
        for (int k = 15; k >= 0; k--) {
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
            goto fail;
        }
        /* Its fields are the status, one of PutStatus's members (module constants that refer to no
         * result), ints and strings: unless the topic or queue id is of a type the collector tracks,
         * it is part of no cycle (see untrack_if_atomic). */
        if (!PyType_IS_GC(Py_TYPE(values[6])) && !PyType_IS_GC(Py_TYPE(values[7]))
            && !PyType_IS_GC(Py_TYPE(values[1])) && !PyType_IS_GC(Py_TYPE(values[2]))
            && !PyType_IS_GC(Py_TYPE(values[3])) && !PyType_IS_GC(Py_TYPE(values[5]))) {
            PyObject_GC_UnTrack(result);
        }
        PyList_SET_ITEM(results, i, result);
    }
    Py_DECREF(empty);
    return results;
fail:
    Py_DECREF(empty);
    Py_DECREF(results);
    return NULL;
}

/* prepare_many(messages, topic_parts, max_body, max_record, store_ip, shape, prepared_cls, slots) ->
 * (prepared, declined): prepare_plain for each message of a list or tuple; `prepared` holds None for
 * each message it declined, `declined` counts them (Preparer.prepare_py answers for those). */
static PyObject *
prepare_many(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "prepare_many takes eight arguments");
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
static PyObject *
crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return crc32_with(args, nargs, rs_crc32);
}

/* crc32_portable(data, value=0): crc32 through the table code only (what a CPU without PCLMULQDQ runs). */
static PyObject *
crc32_portable(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    return crc32_with(args, nargs, rs_crc32_portable);
}

/* layout(): the values this module was compiled with (_layout.h), for the test that holds them to the
 * Python declarations (rocketstore.store.c_layout.compiled_with). */
static PyObject *
strings_tuple(const char *const *names, int count)
{
    PyObject *out = PyTuple_New(count);
    for (int i = 0; out != NULL && i < count; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        if (name == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyTuple_SET_ITEM(out, i, name);
    }
    return out;
}

static PyObject *
layout(PyObject *self, PyObject *unused)
{
    static const char *const prepared[PREPARED_FIELDS] = {PREPARED_FIELD_NAMES};
    static const char *const message[MESSAGE_FIELDS] = {MESSAGE_FIELD_NAMES};
    static const char *const dispatch[DISPATCH_FIELDS] = {DISPATCH_FIELD_NAMES};
    PyObject *values = PyDict_New();
    if (values == NULL) {
        return NULL;
    }
#define X(name)                                                                     \
    do {                                                                            \
        PyObject *value = PyLong_FromLongLong((long long)(name));                   \
        if (value == NULL || PyDict_SetItemString(values, #name, value) < 0) {      \
            Py_XDECREF(value);                                                      \
            Py_DECREF(values);                                                      \
            return NULL;                                                            \
        }                                                                           \
        Py_DECREF(value);                                                           \
    } while (0);
    LAYOUT_ITEMS
#undef X
    return Py_BuildValue("{sNsNsNs{sisisi}s{sisi}s{sisisi}sN}", "layout", values, "prepared",
                         strings_tuple(prepared, PREPARED_FIELDS), "message", strings_tuple(message, MESSAGE_FIELDS),
                         "run_stops", "RUN_END", RUN_END, "RUN_FULL", RUN_FULL, "RUN_ELSEWHERE", RUN_ELSEWHERE,
                         "walk_stops", "WALK_BLANK", WALK_BLANK, "WALK_CHECK", WALK_CHECK, "request_stops",
                         "REQUESTS_MORE", REQUESTS_MORE, "REQUESTS_BLANK", REQUESTS_BLANK, "REQUESTS_CHECK",
                         REQUESTS_CHECK, "dispatch", strings_tuple(dispatch, DISPATCH_FIELDS));
}

static PyMethodDef methods[] = {
    {"layout", layout, METH_NOARGS, "The layouts and field orders this module was compiled with."},
    {"java_hash", (PyCFunction)java_hash, METH_O, "Java String.hashCode of a str, as a signed int32."},
    {"java_hash_concat", (PyCFunction)(void (*)(void))java_hash_concat, METH_FASTCALL,
     "java_hash(prefix + text) without building the string."},
    {"decode_properties", (PyCFunction)decode_properties, METH_O,
     "Parse a RocketMQ properties string into a dict (stored order, later names win)."},
    {"properties_at", (PyCFunction)(void (*)(void))properties_at, METH_FASTCALL,
     "The properties of a record from the UTF-8 text at `start` to the end of the buffer."},
    {"index_lookup", (PyCFunction)(void (*)(void))index_lookup, METH_FASTCALL,
     "Walk an IndexFile slot chain; False when a position falls outside the buffer."},
    {"index_put_keys", (PyCFunction)(void (*)(void))index_put_keys, METH_FASTCALL,
     "Write IndexFile entries, slots and header for a run of keys; None when a value is out of range."},
    {"fill_slots", (PyCFunction)(void (*)(void))fill_slots, METH_FASTCALL,
     "A new instance of `cls` with each value stored through its slot descriptor."},
    {"build_message", (PyCFunction)(void (*)(void))build_message, METH_FASTCALL,
     "A message of class `cls` (a MessageBase subclass) for bytes holding exactly one record."},
    {"prepare_plain", (PyCFunction)(void (*)(void))prepare_plain, METH_FASTCALL,
     "Preparer.prepare for a message without a properties mapping or born host; None for any other."},
    {"pack_run", (PyCFunction)(void (*)(void))pack_run, METH_FASTCALL,
     "The write loop of a batch put for the messages that fit one commitlog file."},
    {"msync", (PyCFunction)(void (*)(void))msync_range, METH_FASTCALL,
     "msync(MS_SYNC) of a range of a shared mapping, letting other threads run meanwhile."},
    {"decode_run", (PyCFunction)(void (*)(void))decode_run, METH_FASTCALL,
     "The read loop of a get over consume-queue entries, decoding records of one commitlog file in place."},
    {"dispatch_requests", (PyCFunction)(void (*)(void))dispatch_requests, METH_FASTCALL,
     "The catch-up's dispatch requests of the records of one commitlog file from a position."},
    {"walk_records", (PyCFunction)(void (*)(void))walk_records, METH_FASTCALL,
     "The recovery walk over one commitlog file from a position: (stop position, records passed, why)."},
    {"record_at", (PyCFunction)(void (*)(void))record_at, METH_FASTCALL,
     "The whole, well-formed record at a position of a buffer, as a message; None for anything else."},
    {"put_results", (PyCFunction)(void (*)(void))put_results, METH_FASTCALL,
     "The PutResults of a batch, made as fill_slots makes one."},
    {"prepare_many", (PyCFunction)(void (*)(void))prepare_many, METH_FASTCALL,
     "prepare_plain for each message of a sequence, with the count of those it declined."},
    {"crc32", (PyCFunction)(void (*)(void))crc32, METH_FASTCALL,
     "zlib.crc32(data, value=0), with carry-less multiplication where the CPU has it."},
    {"crc32_portable", (PyCFunction)(void (*)(void))crc32_portable, METH_FASTCALL,
     "crc32 through the portable table code only."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "rocketstore._speedups",
    "Optional compiled versions of rocketstore's hottest small functions.", 0, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (PyType_Ready(&MessageBaseType) < 0) {
        return NULL;
    }
    rs_crc32_init();
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_topic, "topic"}, {&s_body, "body"}, {&s_queue_id, "queue_id"}, {&s_tags, "tags"}, {&s_keys, "keys"},
        {&s_properties, "properties"}, {&s_born_host, "born_host"}, {&s_sys_flag, "sys_flag"}, {&s_flag, "flag"},
        {&s_born_timestamp, "born_timestamp"}, {&s_reconsume_times, "reconsume_times"},
        {&s_prepared_transaction_offset, "prepared_transaction_offset"}, {&s_size, "size"},
        {&s_property_tags, "TAGS"}, {&s_property_keys, "KEYS"}, {&s_property_uniq_key, "UNIQ_KEY"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if ((*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL) {
            return NULL;
        }
    }
    static const char *const field_names[MESSAGE_FIELDS] = {MESSAGE_FIELD_NAMES};
    for (int i = 0; i < MESSAGE_FIELDS; i++) {
        if ((message_field_names[i] = PyUnicode_InternFromString(field_names[i])) == NULL) {
            return NULL;
        }
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&MessageBaseType);
    if (PyModule_AddObject(module, "MessageBase", (PyObject *)&MessageBaseType) < 0) {
        Py_DECREF(&MessageBaseType);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
