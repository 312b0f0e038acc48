/*
 * What the C files of rocketstore._speedups share (module.c, format.c, storage.c, log.c, store.c): the
 * headers they read, the generated layouts (_layout.h), the few small helpers more than one of them
 * uses (static inline, one definition here), and the functions and objects one file defines and
 * another uses. A function that only one file uses stays static in that file.
 *
 * Two prefixes: speedups_NAME is the C function behind _speedups.NAME (module.c's method table);
 * rs_NAME is a helper or object one file lends the others. Both are hidden: they stay inside the
 * shared object, and the calls between the files go straight, not through its symbol table.
 */
#ifndef ROCKETSTORE_SPEEDUPS_COMMON_H
#define ROCKETSTORE_SPEEDUPS_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_crc32.h"
#include "_layout.h" /* layouts and field orders, generated from the Python declarations */

/* From this many bytes on, a CRC runs without the interpreter lock (zlib.crc32 lets it go from 5 KiB;
 * here a 64 KiB CRC takes ~4 us, well above the cost of letting the lock go and taking it back). */
#define CRC_RELEASE_GIL_BYTES (64 * 1024)

/* 0 when `text` is a str ready for PyUnicode_DATA; -1 with TypeError (or the error of getting it ready). */
static inline int
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

/* Java's String.hashCode over the UTF-16 code units of a str, continuing from `h`: a code point above
 * U+FFFF counts as its two surrogates, and a lone surrogate in a Python string counts as itself (as
 * "surrogatepass" encodes it). java_hash (format.c) and the index keys of pack_run (store.c). */
static inline uint32_t
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

/* The index's hash of a key from Java's hash `h` of "topic#key": its absolute value, 0 for Integer.MIN_VALUE
 * (format.javahash.index_hash_of_signed, as RocketMQ's IndexService computes it). */
static inline int64_t
index_hash_of(uint32_t h)
{
    int32_t s = (int32_t)h;
    return s == JAVA_INT_MIN ? 0 : (s < 0 ? -(int64_t)s : s);
}

/* One index key as IndexFile.put_keys takes it, (index hash, phy) as native int64, from Java's hash `h`
 * of "topic#key": written at `out`, returns the end of what it wrote. */
static inline unsigned char *
put_index_pair(unsigned char *out, uint32_t h, long long phy)
{
    int64_t index_hash = index_hash_of(h), at = phy;
    memcpy(out + INDEX_KEY_KEYHASH_POS, &index_hash, INDEX_KEY_KEYHASH_WIDTH);
    memcpy(out + INDEX_KEY_PHYSICAL_OFFSET_POS, &at, INDEX_KEY_PHYSICAL_OFFSET_WIDTH);
    return out + INDEX_KEY_SIZE;
}

/* A big-endian signed field of `width` bytes (4: an int32, 8: an int64). */
static inline int64_t
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

/* `v` as a big-endian field of `width` bytes. */
static inline void
write_be(unsigned char *p, uint64_t v, int width)
{
    for (int i = width - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

/* The last topic decoded by a run of decode_run (log.c, through rs_record_in): records of one queue
 * repeat it, so its str is reused. */
struct topic_cache {
    char bytes[256];
    long long len; /* -1: empty */
    PyObject *text; /* a strong reference, or NULL */
};

/* Where the parts of a record lie (rs_layout_of). */
struct layout {
    long long phy_offset, sys_flag, body_start, body_end, topic_start, topic_len, props_start;
};

/* What does not add up in a record's lengths (rs_layout_check). */
enum layout_fault { LAYOUT_OK, LAYOUT_SHORT_HEADER, LAYOUT_BODY, LAYOUT_TOPIC, LAYOUT_LENGTHS };

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* State types: the hot state of an object of the storage and log layers, which that object is (a
 * compiled base class) or holds. Each field is a Python object, NULL while unset, exposed to Python as a
 * slot of the same name; the pure-Python twin of each type is a class with the same __slots__. The
 * kernels read and write the fields directly after a type check, and decline an object of another
 * type. Only object pointers follow the head, so one traverse / clear / dealloc serves every type. */
typedef struct {
    PyObject_HEAD
    PyObject *mapping;          /* "_mm": the file's mapping, None while unmapped */
    PyObject *wrote_position;   /* int */
    PyObject *file_size;        /* int */
    PyObject *file_from_offset; /* int */
    PyObject *touched;          /* bool: the mapping budget's clock bit */
} rs_MappedFileState;

typedef struct {
    PyObject_HEAD
    PyObject *files; /* list of MappedFile, oldest first */
} rs_FileQueueState;

typedef struct {
    PyObject_HEAD
    PyObject *queue;             /* its MappedFileQueue */
    PyObject *max_physic_offset; /* int: the end of the record of its last entry, -1 for none */
} rs_ConsumeQueueState;

typedef struct {
    PyObject_HEAD
    PyObject *mapping;     /* "_mm": the file's mapping, None while unmapped */
    PyObject *header;      /* its IndexHeader, whose slots the caller hands the kernels */
    PyObject *slots;       /* int: hash slots */
    PyObject *max_entries; /* int */
    PyObject *touched;     /* bool: the mapping budget's clock bit */
} rs_IndexFileState;

/* A field of a state type as the slot `name` of Python objects. */
#define STATE_MEMBER(Struct, name, field) {name, T_OBJECT_EX, offsetof(Struct, field), 0, NULL}
/* The type of a state struct: a base class the Python object derives from, its fields the `members`. */
#define STATE_TYPE(cname, qualname, Struct, doc, members)                                               \
    PyTypeObject cname = {                                                                               \
        PyVarObject_HEAD_INIT(NULL, 0).tp_name = qualname,                                               \
        .tp_basicsize = sizeof(Struct),                                                                  \
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,                       \
        .tp_doc = doc,                                                                                   \
        .tp_new = PyType_GenericNew,                                                                     \
        .tp_dealloc = rs_state_dealloc,                                                                  \
        .tp_traverse = rs_state_traverse,                                                                \
        .tp_clear = rs_state_clear,                                                                      \
        .tp_members = members,                                                                           \
    }

/* An int field of a state type as int64 in [0, LLONG_MAX / 4]: 1 with *out set, 0 when it is unset or
 * holds another value. */
int rs_state_int(PyObject *value, long long *out);
/* `*field` = int `value`: 0, -1 after an error. */
int rs_state_set_int(PyObject **field, long long value);
/* `*field` = True (a clock bit). */
void rs_state_touch(PyObject **field);

/* module.c: strings interned at import */
extern PyObject *rs_property_tags, *rs_property_keys, *rs_property_uniq_key; /* "TAGS", "KEYS", "UNIQ_KEY" */
/* module.c: the two record magic codes as ints, made at import (every decoded message holds one) */
extern PyObject *rs_magic_v1, *rs_magic_v2;
/* The Message fields prepare_one (store.c) reads, in the order of the `slots` argument of prepare_plain
 * and prepare_many (rocketstore.store.prepare.MESSAGE_FIELDS). */
extern PyObject *rs_message_field_names[MESSAGE_FIELDS];

/* format.c */
extern PyTypeObject rs_MessageBaseType;
int rs_check_message_class(PyObject *cls);
PyObject *rs_record_in(PyTypeObject *cls, const unsigned char *at, long long room, long long phy_offset,
                       struct topic_cache *cache);
PyObject *rs_space_separated(PyObject *text);
/* The topic of a message that rs_record_in made (a borrowed reference). */
PyObject *rs_message_topic(PyObject *message);
/* The bytes of a message that rs_record_in made (a borrowed reference). */
PyObject *rs_message_raw(PyObject *message);
/* message.carries_key(key) for a message that rs_record_in made (a MessageBase subclass). */
PyObject *rs_message_carries_key(PyObject *message, PyObject *key);
/* The checks of format.message.record_layout on `total` bytes holding one record of magic v1 or v2,
 * without the GIL: LAYOUT_OK with `out` filled, else the fault and in `*value` the length it is about. */
enum layout_fault rs_layout_check(const unsigned char *raw, long long total, unsigned long magic,
                                  struct layout *out, long long *value);
/* rs_layout_check: 0 with `out` filled, -1 with ValueError set when the lengths do not add up. */
int rs_layout_of(const unsigned char *raw, long long total, unsigned long magic, struct layout *out);
/* A record's topic (UTF-8, bad bytes replaced) as a new reference; `cache` (or NULL) keeps the last one. */
PyObject *rs_topic_of(const char *bytes, long long len, struct topic_cache *cache);
/* The last well-formed property `name` of the UTF-8 properties text in [p, end): 1 with its value's
 * bytes in [*value, *value_end), 0 when there is none (parse_properties's rule, read on the bytes). */
int rs_last_property(const char *p, const char *end, const char *name, size_t name_len, const char **value,
                     const char **value_end);
PyObject *speedups_java_hash(PyObject *module, PyObject *text);
PyObject *speedups_java_hash_concat(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_decode_properties(PyObject *module, PyObject *text);
PyObject *speedups_properties_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_build_message(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_record_at(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_crc32_portable(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* columns.c */
PyObject *speedups_record_columns(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_record_spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_topic_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* storage.c */
extern PyTypeObject rs_MappedFileStateType, rs_FileQueueStateType;
/* The traverse, clear and dealloc of a state type (only object pointers after the head, `size` bytes). */
int rs_state_traverse(PyObject *self, visitproc visit, void *arg);
int rs_state_clear(PyObject *self);
void rs_state_dealloc(PyObject *self);
PyObject *speedups_msync(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_populate(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* log.c */
extern PyTypeObject rs_ConsumeQueueStateType, rs_IndexFileStateType;
PyObject *speedups_index_lookup(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_index_put_keys(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_index_damage(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* Whether rs_index_put can write the `count` keys at `pairs` into an index file of `len` bytes with
 * `slots` hash slots and that `header`: 1 when it can, 0 when a value or position is out of range. */
int rs_index_fits(Py_ssize_t len, long long slots, const long long header[INDEX_HEADER_FIELDS], const unsigned char *pairs,
                  Py_ssize_t count);
/* The writes of index_put_keys: 0, or 1 with nothing written when rs_index_fits says 0. */
int rs_index_put(unsigned char *buf, Py_ssize_t len, long long slots, long long header[INDEX_HEADER_FIELDS], const unsigned char *pairs,
                 Py_ssize_t count, long long ts);
PyObject *speedups_decode_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_get_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_query_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* How many index keys a message of `topic` (a str) has, its UNIQ_KEY (None or a str) and each KEYS
 * token (a tuple of str), the empty left out; -1 for other types, -2 after an error. */
Py_ssize_t rs_index_key_count(PyObject *topic, PyObject *keys, PyObject *uniq);
/* Those keys as IndexFile.put_keys takes them, (index hash, phy) native int64 pairs, UNIQ_KEY first
 * (topic_hash: Java's hash of "topic#"); returns the end of what it wrote. */
unsigned char *rs_pack_index_keys(unsigned char *out, uint32_t topic_hash, long long phy, PyObject *keys,
                                  PyObject *uniq);

/* queue.c */
PyObject *speedups_queue_scan(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_queue_first_at_or_after(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_queue_kept_prefix(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* services.c */
PyObject *speedups_walk_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_dispatch_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_pack_requests(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_dispatch_packed(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* store.c */
PyObject *speedups_prepare_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_prepare_many(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_pack_run(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_fill_slots(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_install_message_call(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_put_results(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
PyObject *speedups_put_one(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* An index header's six fields in file order, read through `descriptors` (IndexHeader's slots in file
 * order, handed over by the caller): 1 with `fields` set, 0 when one is not an int in range (the hash
 * slot count may be negative), -1 after an error (TypeError for descriptors that are not the header's
 * slots). */
int rs_header_fields(PyObject *header, PyObject *descriptors, long long fields[INDEX_HEADER_FIELDS]);
/* appender.c: the plain ASYNC put's record writer, a type of its own (rocketstore.kernels), the
 * write path's marks it moves on (WritePath's base) and the store lock it takes */
extern PyTypeObject rs_AppenderType, rs_WriteMarksType, rs_StoreLockType;

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
