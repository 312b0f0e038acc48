/*
 * rocketstore._speedups, format layer: whole records -> the buffers of Arrow columns, for the Spark
 * reader's record batches (rocketstore.spark.columnar).
 *
 *   record_columns(data, starts, ends)   rocketstore.spark.columnar._columnar_py's columns
 *   record_spans(data, pos, limit, written, file_start, max_rows, max_bytes, starts, ends)
 *                                        rocketstore.format.spans.record_spans_py: where the records lie
 *   topic_rows(data, starts, ends, topics, keep)
 *                                        rocketstore.scan.direct.topic_rows_py: which hold some topics
 *
 * One pass over the records reads every header field at its position (format.c's rs_layout_check says
 * where the body, topic and properties lie), splits the properties text with RocketMQ's rule
 * (format.properties.decode_properties_py) and the KEYS value into its tokens, and writes each column's
 * offsets and bytes as Arrow lays them out. Rows it does not cover make it decline the whole batch, as
 * the Python path does: an IPv6 host, a topic or properties text that is not valid UTF-8 (the row path
 * replaces bad bytes), a property name given twice in one record.
 *
 * The walk over the records runs without the GIL (threads reading partitions at once, option
 * readThreads, or decoding ahead, option readAhead, overlap it): the buffers are taken and every
 * column's room made while it is held (a bytes object, or the caller's `allocate`), with room for the
 * batch (`reserve`), the walk writes into their memory (a column that outgrows its room moves to
 * PyMem_Raw* memory) and records what went wrong in `error`, and the exception is set and each room
 * cut to its length (or a new one made from the memory a column moved to) once the GIL is back.
 */
#include "common.h"

/* common.h's read_be of a 4- or 8-byte field, in one load (the compiler keeps read_be's loop a byte at a
 * time, and these walks read a dozen fields a record). */
static inline int64_t
be_field(const unsigned char *p, int width)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (width == 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        return (int64_t)__builtin_bswap64(v);
    }
    if (width == 4) {
        uint32_t v;
        memcpy(&v, p, 4);
        return (int64_t)(int32_t)__builtin_bswap32(v);
    }
#endif
    return read_be(p, width);
}

/* What stopped a walk; the Python exception is set from it once the GIL is held again. */
enum walk_error { WALK_OK, WALK_NO_MEMORY, WALK_PAST_INT32, WALK_RANGE };

/* Rooms of this many bytes or more come from `allocate` when it is given: the C allocator serves smaller ones
 * from memory the last batch freed (still in the cache), larger ones from fresh pages, which the kernel
 * faults in and zeroes (glibc maps rooms past its mmap threshold and gives the top of its heap back past
 * twice that). */
#ifndef POOLED_ROOM
#define POOLED_ROOM (4 << 20)
#endif

/* Memory a column is written into: a bytes object, or an object `allocate(size)` made (its writable
 * buffer held in `view` until the result is made). */
struct room {
    PyObject *object;
    Py_buffer view;
    int viewed;
};

/* A room of `size` bytes into `r`, from `allocate` (NULL: a bytes object): its memory, or NULL with the
 * exception set (`r` then holds what must still be let go of, see room_free). */
static char *
room_new(PyObject *allocate, Py_ssize_t size, struct room *r)
{
    if (allocate == NULL || size < POOLED_ROOM) {
        r->object = PyBytes_FromStringAndSize(NULL, size);
        return r->object == NULL ? NULL : PyBytes_AS_STRING(r->object);
    }
    PyObject *n = PyLong_FromSsize_t(size);
    if (n == NULL) {
        return NULL;
    }
    r->object = PyObject_CallOneArg(allocate, n);
    Py_DECREF(n);
    if (r->object == NULL || PyObject_GetBuffer(r->object, &r->view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    r->viewed = 1;
    if (r->view.len < size) {
        PyErr_SetString(PyExc_ValueError, "record_columns: allocate(size) gave a buffer shorter than size");
        return NULL;
    }
    return (char *)r->view.buf;
}

/* The room's first `len` bytes as the column's object (the room's own reference is moved into it or
 * dropped): a bytes object cut in place, or `object[:len]` of an allocated one. NULL with the exception
 * set. */
static PyObject *
room_take(struct room *r, Py_ssize_t len)
{
    PyObject *object = r->object;
    r->object = NULL;
    if (r->viewed) {
        PyBuffer_Release(&r->view);
        r->viewed = 0;
    }
    if (PyBytes_CheckExact(object)) {
        return _PyBytes_Resize(&object, len) < 0 ? NULL : object;
    }
    PyObject *cut = PySequence_GetSlice(object, 0, len);
    Py_DECREF(object);
    return cut;
}

static void
room_free(struct room *r)
{
    if (r->viewed) {
        PyBuffer_Release(&r->view);
        r->viewed = 0;
    }
    Py_CLEAR(r->object);
}

/* A growing byte buffer: first the room `owner` (made with the GIL before the walk, becoming the column
 * without a copy), then, if it outgrows it, PyMem_Raw* memory (grown without the GIL; copied into a new
 * room at the end); `error` says why a grow failed. */
struct grow {
    char *bytes;
    Py_ssize_t len, cap;
    enum walk_error error;
    struct room owner;
    int in_owner; /* `bytes` is `owner`'s */
};

/* Room in `g` for `len` more bytes, out of its bytes object into PyMem_Raw memory (or more of it): 0, or
 * -1 with `g->error` set. The slow path of grow_add, kept out of it so that it inlines. */
static int
grow_room(struct grow *g, Py_ssize_t len)
{
    Py_ssize_t cap = g->cap ? g->cap : 4096;
    while (cap < g->len + len) {
        cap *= 2;
    }
    char *more = g->in_owner ? PyMem_RawMalloc((size_t)cap) : PyMem_RawRealloc(g->bytes, (size_t)cap);
    if (more == NULL) {
        g->error = WALK_NO_MEMORY;
        return -1;
    }
    if (g->in_owner) {
        memcpy(more, g->bytes, (size_t)g->len);
        g->in_owner = 0;
    }
    g->bytes = more;
    g->cap = cap;
    return 0;
}

static inline int
grow_add(struct grow *g, const void *bytes, Py_ssize_t len)
{
    if (len == 0) {
        return 0; /* an empty field (nothing to copy, even into a buffer of no room) */
    }
    if (g->len + len > g->cap && grow_room(g, len) < 0) {
        return -1;
    }
    memcpy(g->bytes + g->len, bytes, (size_t)len);
    g->len += len;
    return 0;
}

/* An int32 offset appended to `g` (Arrow's offsets): -1 after an error, also when past int32. */
static inline int
grow_offset(struct grow *g, Py_ssize_t offset)
{
    if (offset > INT32_MAX) {
        g->error = WALK_PAST_INT32;
        return -1;
    }
    int32_t value = (int32_t)offset;
    return grow_add(g, &value, 4);
}

/* 1 when [p, end) is valid UTF-8 as Python's strict decoder takes it (no surrogates, no overlong
 * forms, nothing past U+10FFFF), else 0. */
static int
valid_utf8(const unsigned char *p, const unsigned char *end)
{
    while (p < end) {
        uint64_t word;
        if (end - p >= 8 && (memcpy(&word, p, 8), (word & 0x8080808080808080ULL) == 0)) {
            p += 8; /* eight ASCII bytes at once: topics and properties are mostly ASCII */
            continue;
        }
        unsigned char c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        Py_ssize_t n;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            if (c == 0xE0) {
                lo = 0xA0;
            } else if (c == 0xED) {
                hi = 0x9F;
            }
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            if (c == 0xF0) {
                lo = 0x90;
            } else if (c == 0xF4) {
                hi = 0x8F;
            }
        } else {
            return 0;
        }
        if (end - p <= n || p[1] < lo || p[1] > hi) {
            return 0;
        }
        for (Py_ssize_t k = 2; k <= n; k++) {
            if ((p[k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        p += n + 1;
    }
    return 1;
}

/* A string column that may hold nulls: validity bits, offsets, bytes (three of record_columns' grown
 * buffers). */
struct text_column {
    struct grow *valid, *offsets, *data;
};

static inline int
text_column_add(struct text_column c, Py_ssize_t row, const unsigned char *value, Py_ssize_t len)
{
    if (row % 8 == 0) {
        unsigned char zero = 0;
        if (grow_add(c.valid, &zero, 1) < 0) {
            return -1;
        }
    }
    if (value != NULL) {
        c.valid->bytes[row / 8] |= (char)(1 << (row % 8));
        if (grow_add(c.data, value, len) < 0) {
            return -1;
        }
    }
    return grow_offset(c.offsets, c.data->len);
}

/* The last host a column formatted: records of one producer and one broker repeat it. */
struct host_memo {
    unsigned char bytes[8];
    char text[32];
    int len; /* 0: none yet */
};

/* "a.b.c.d:port" of the IPv4 host whose 4 IP bytes and big-endian int32 port start at `at`. */
static int
add_host(struct grow *offsets, struct grow *data, const unsigned char *at, struct host_memo *memo)
{
    if (memo->len == 0 || memcmp(memo->bytes, at, 8) != 0) {
        memcpy(memo->bytes, at, 8);
        memo->len = snprintf(memo->text, sizeof memo->text, "%u.%u.%u.%u:%d", at[0], at[1], at[2], at[3],
                             (int)(int32_t)be_field(at + 4, 4));
    }
    if (grow_add(data, memo->text, memo->len) < 0) {
        return -1;
    }
    return grow_offset(offsets, data->len);
}

/* The fixed-width columns, in the order record_columns returns them. */
enum fixed_column { C_QUEUE_ID, C_QUEUE_OFFSET, C_PHY_OFFSET, C_SIZE, C_FLAG, C_SYS_FLAG, C_BORN_TS, C_STORE_TS,
                    C_RECONSUME, C_BODY_CRC, FIXED_COLUMNS };
static const int fixed_width[FIXED_COLUMNS] = {4, 8, 8, 4, 4, 4, 8, 8, 4, 4};

/* The grown buffers of record_columns, in the order it returns them after the fixed columns. */
enum grown_buffer {
    G_TOPIC_OFFSETS, G_TOPIC, G_MSG_ID, G_UNIQ_VALID, G_UNIQ_OFFSETS, G_UNIQ, G_TAGS_VALID, G_TAGS_OFFSETS, G_TAGS,
    G_KEYS_LISTS, G_KEYS_OFFSETS, G_KEYS, G_MAP_ENTRIES, G_NAMES_OFFSETS, G_NAMES, G_VALUES_OFFSETS, G_VALUES,
    G_BODY_OFFSETS, G_BODY, G_BORN_OFFSETS, G_BORN, G_STORE_OFFSETS, G_STORE, GROWN_BUFFERS
};

#define MAX_ROW_PROPERTIES 64 /* more in one record: the Python path */

/* One record's properties as RocketMQ parses them: segments split by U+0002, name U+0001 value, both
 * non-empty; `tags`, `uniq`, `keys`: the index of that property, or -1. */
struct row_properties {
    const unsigned char *names[MAX_ROW_PROPERTIES], *values[MAX_ROW_PROPERTIES];
    Py_ssize_t name_lens[MAX_ROW_PROPERTIES], value_lens[MAX_ROW_PROPERTIES];
    int count, tags, uniq, keys;
};

/* 1 when the record is one record_columns covers (see the file's comment), its layout in `lay`; 0 when
 * it is one the row path takes. */
static int
covered(const unsigned char *raw, long long total, struct layout *lay)
{
    if (total < MIN_RECORD_SIZE) {
        return 0; /* before any header field is read: the range may end inside the header */
    }
    unsigned long magic = (unsigned long)(be_field(raw + REC_MAGICCODE_POS, 4) & 0xFFFFFFFFLL);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || be_field(raw, 4) != total
        || (be_field(raw + REC_SYSFLAG_POS, 4) & (BORN_V6 | STORE_V6)) != 0) {
        return 0;
    }
    long long fault_value;
    if (rs_layout_check(raw, total, magic, lay, &fault_value) != LAYOUT_OK) {
        return 0;
    }
    const unsigned char *topic = raw + lay->topic_start;
    return valid_utf8(topic, topic + lay->topic_len) && valid_utf8(raw + lay->props_start, raw + total);
}

/* The property at [seg, sep) U+0001 [sep + 1, seg_end) into `p`: 1 when taken, 0 when the record is one
 * the row path takes (a name given twice: the later wins and moves, which the row path does; or more
 * than MAX_ROW_PROPERTIES). */
static int
add_property(struct row_properties *p, const unsigned char *seg, const unsigned char *sep,
             const unsigned char *seg_end)
{
    Py_ssize_t name_len = sep - seg;
    for (int k = 0; k < p->count; k++) {
        if (p->name_lens[k] == name_len && memcmp(p->names[k], seg, (size_t)name_len) == 0) {
            return 0;
        }
    }
    if (p->count == MAX_ROW_PROPERTIES) {
        return 0;
    }
    int k = p->count++;
    p->names[k] = seg;
    p->name_lens[k] = name_len;
    p->values[k] = sep + 1;
    p->value_lens[k] = seg_end - sep - 1;
    if (name_len == 4 && memcmp(seg, "TAGS", 4) == 0) {
        p->tags = k;
    } else if (name_len == 4 && memcmp(seg, "KEYS", 4) == 0) {
        p->keys = k;
    } else if (name_len == 8 && memcmp(seg, "UNIQ_KEY", 8) == 0) {
        p->uniq = k;
    }
    return 1;
}

/* The properties text [props, end) split into `p`: 1, or 0 when the record is one the row path takes. */
static int
split_properties(const unsigned char *props, const unsigned char *end, struct row_properties *p)
{
    p->count = 0, p->tags = p->uniq = p->keys = -1;
    for (const unsigned char *seg = props; seg <= end && props < end;) {
        const unsigned char *seg_end = memchr(seg, 2, (size_t)(end - seg));
        if (seg_end == NULL) {
            seg_end = end;
        }
        const unsigned char *sep = memchr(seg, 1, (size_t)(seg_end - seg));
        if (sep != NULL && sep > seg && sep + 1 < seg_end && !add_property(p, seg, sep, seg_end)) {
            return 0;
        }
        seg = seg_end + 1;
    }
    return 1;
}

/* The header fields of the record at `raw` into row `row` of the fixed-width columns. */
static void
add_fixed(const unsigned char *raw, long long total, Py_ssize_t row, char *fixed[FIXED_COLUMNS])
{
    long long values64[FIXED_COLUMNS] = {
        [C_QUEUE_ID] = be_field(raw + REC_QUEUEID_POS, 4), [C_QUEUE_OFFSET] = be_field(raw + REC_QUEUEOFFSET_POS, 8),
        [C_PHY_OFFSET] = be_field(raw + REC_PHYSICALOFFSET_POS, 8), [C_SIZE] = total,
        [C_FLAG] = be_field(raw + REC_FLAG_POS, 4), [C_SYS_FLAG] = be_field(raw + REC_SYSFLAG_POS, 4),
        [C_BORN_TS] = be_field(raw + REC_BORNTIMESTAMP_POS, 8),
        [C_STORE_TS] = be_field(raw + FIXED_HEAD_SIZE + 4 + REC_AFTER_BORN_IP_STORETIMESTAMP_POS, 8),
        [C_RECONSUME] = be_field(raw + FIXED_HEAD_SIZE + 4 + REC_AFTER_BORN_IP_SIZE + 4
                                + REC_AFTER_STORE_IP_RECONSUMETIMES_POS, 4),
        [C_BODY_CRC] = be_field(raw + REC_BODYCRC_POS, 4),
    };
    for (int c = 0; c < FIXED_COLUMNS; c++) {
        if (fixed_width[c] == 4) {
            int32_t v = (int32_t)values64[c];
            memcpy(fixed[c] + row * 4, &v, 4);
        } else {
            int64_t v = values64[c];
            memcpy(fixed[c] + row * 8, &v, 8);
        }
    }
}

/* The offset msgId of the record at `raw` (its store IP and port, then its physical offset, in
 * uppercase hex) into the 32 bytes at `id`. */
static void
format_msg_id(const unsigned char *raw, const unsigned char *store, char *id)
{
    static const char hex[] = "0123456789ABCDEF";
    for (int k = 0; k < 8; k++) {
        id[2 * k] = hex[store[k] >> 4];
        id[2 * k + 1] = hex[store[k] & 0xF];
        id[16 + 2 * k] = hex[raw[REC_PHYSICALOFFSET_POS + k] >> 4];
        id[16 + 2 * k + 1] = hex[raw[REC_PHYSICALOFFSET_POS + k] & 0xF];
    }
}

/* The record's msgId appended to `g`, formatted in place (formatted on the stack and copied, its 32
 * one-byte stores were read back as two wide loads that wait for them): 0, or -1 after an error. */
static inline int
add_msg_id(struct grow *g, const unsigned char *raw, const unsigned char *store)
{
    if (g->len + 32 > g->cap && grow_room(g, 32) < 0) {
        return -1;
    }
    format_msg_id(raw, store, g->bytes + g->len);
    g->len += 32;
    return 0;
}

/* The topic, msgId, body, bornHost and storeHost of the record at `raw`: 0, or -1 after an error. */
static int
add_strings(const unsigned char *raw, const struct layout *lay, struct grow *g, struct host_memo hosts[2])
{
    const unsigned char *born = raw + FIXED_HEAD_SIZE;
    const unsigned char *store = born + 4 + REC_AFTER_BORN_IP_SIZE;
    if (grow_add(&g[G_TOPIC], raw + lay->topic_start, lay->topic_len) < 0
        || grow_offset(&g[G_TOPIC_OFFSETS], g[G_TOPIC].len) < 0 || add_msg_id(&g[G_MSG_ID], raw, store) < 0
        || grow_add(&g[G_BODY], raw + lay->body_start, lay->body_end - lay->body_start) < 0
        || grow_offset(&g[G_BODY_OFFSETS], g[G_BODY].len) < 0
        || add_host(&g[G_BORN_OFFSETS], &g[G_BORN], born, &hosts[0]) < 0
        || add_host(&g[G_STORE_OFFSETS], &g[G_STORE], store, &hosts[1]) < 0) {
        return -1;
    }
    return 0;
}

/* The value of property `k` of `p` (NULL, 0 when k is -1) into a text column. */
static int
add_value(struct text_column c, Py_ssize_t row, const struct row_properties *p, int k)
{
    return text_column_add(c, row, k < 0 ? NULL : p->values[k], k < 0 ? 0 : p->value_lens[k]);
}

/* The row's list of keys: the non-empty space-separated tokens of its KEYS value. 0, or -1 after an
 * error. */
static int
add_keys(const struct row_properties *p, struct grow *g)
{
    if (p->keys >= 0) {
        const unsigned char *token = p->values[p->keys], *value_end = token + p->value_lens[p->keys];
        while (token < value_end) {
            const unsigned char *space = memchr(token, ' ', (size_t)(value_end - token));
            const unsigned char *token_end = space == NULL ? value_end : space;
            if (token_end > token && (grow_add(&g[G_KEYS], token, token_end - token) < 0
                                      || grow_offset(&g[G_KEYS_OFFSETS], g[G_KEYS].len) < 0)) {
                return -1;
            }
            token = token_end + 1;
        }
    }
    return grow_offset(&g[G_KEYS_LISTS], (g[G_KEYS_OFFSETS].len - 4) / 4);
}

/* The row's properties map, its entries in record order. 0, or -1 after an error. */
static int
add_map(const struct row_properties *p, struct grow *g)
{
    for (int k = 0; k < p->count; k++) {
        if (grow_add(&g[G_NAMES], p->names[k], p->name_lens[k]) < 0
            || grow_offset(&g[G_NAMES_OFFSETS], g[G_NAMES].len) < 0
            || grow_add(&g[G_VALUES], p->values[k], p->value_lens[k]) < 0
            || grow_offset(&g[G_VALUES_OFFSETS], g[G_VALUES].len) < 0) {
            return -1;
        }
    }
    return grow_offset(&g[G_MAP_ENTRIES], (g[G_NAMES_OFFSETS].len - 4) / 4);
}

/* One record's row into the columns: 1 when written, 0 when the record is one the row path takes
 * (nothing of it written that the caller keeps), -1 after an error. */
static int
add_row(const unsigned char *raw, long long total, Py_ssize_t row, char *fixed[FIXED_COLUMNS], struct grow *g,
        struct host_memo hosts[2])
{
    struct layout lay;
    struct row_properties p;
    if (!covered(raw, total, &lay) || !split_properties(raw + lay.props_start, raw + total, &p)) {
        return 0;
    }
    /* everything below only appends */
    add_fixed(raw, total, row, fixed);
    struct text_column uniq = {&g[G_UNIQ_VALID], &g[G_UNIQ_OFFSETS], &g[G_UNIQ]};
    struct text_column tags = {&g[G_TAGS_VALID], &g[G_TAGS_OFFSETS], &g[G_TAGS]};
    if (add_strings(raw, &lay, g, hosts) < 0 || add_value(uniq, row, &p, p.uniq) < 0
        || add_value(tags, row, &p, p.tags) < 0 || add_keys(&p, g) < 0 || add_map(&p, g) < 0) {
        return -1;
    }
    return 1;
}

/* Each grown buffer's bytes object, made before the walk (with the GIL) with room for `n` rows of `total`
 * record bytes, so that the walk seldom grows one past it: the exact size of the row offsets, validity
 * bits, msgIds and hosts ("255.255.255.255:-2147483648" at most), the record bytes for the bodies (a
 * bound), an estimate for the rest, never past their bound. 0, or -1 with the exception set. */
static int
reserve(struct grow *g, Py_ssize_t n, Py_ssize_t total, PyObject *allocate)
{
    static const enum grown_buffer per_row[] = {G_TOPIC_OFFSETS, G_UNIQ_OFFSETS, G_TAGS_OFFSETS, G_KEYS_LISTS,
                                                G_MAP_ENTRIES, G_BODY_OFFSETS, G_BORN_OFFSETS, G_STORE_OFFSETS};
    static const enum grown_buffer per_token[] = {G_KEYS_OFFSETS, G_NAMES_OFFSETS, G_VALUES_OFFSETS};
    static const enum grown_buffer text[] = {G_TOPIC, G_UNIQ, G_TAGS, G_KEYS, G_NAMES, G_VALUES};
    Py_ssize_t room[GROWN_BUFFERS];
    for (size_t k = 0; k < sizeof per_row / sizeof per_row[0]; k++) {
        room[per_row[k]] = 4 * (n + 1);
    }
    for (size_t k = 0; k < sizeof per_token / sizeof per_token[0]; k++) {
        room[per_token[k]] = Py_MIN(16 * (n + 1), 4 * (n + 1) + 2 * total);
    }
    for (size_t k = 0; k < sizeof text / sizeof text[0]; k++) {
        room[text[k]] = Py_MIN(64 * n, total);
    }
    room[G_UNIQ_VALID] = room[G_TAGS_VALID] = (n + 7) / 8;
    room[G_MSG_ID] = 32 * n;
    room[G_BORN] = room[G_STORE] = 27 * n;
    room[G_BODY] = total;
    for (int k = 0; k < GROWN_BUFFERS; k++) {
        g[k].bytes = room_new(allocate, room[k], &g[k].owner);
        if (g[k].bytes == NULL) {
            return -1;
        }
        g[k].cap = room[k];
        g[k].in_owner = 1;
    }
    return 0;
}

/* The bytes of the `n` records at [starts[i], ends[i]) of `data` (ranges outside it count for none: the
 * walk refuses them). */
static Py_ssize_t
records_total(const Py_buffer *data, const Py_buffer *starts, const Py_buffer *ends, Py_ssize_t n)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t row = 0; row < n; row++) {
        int64_t start, stop;
        memcpy(&start, (const char *)starts->buf + 8 * row, 8);
        memcpy(&stop, (const char *)ends->buf + 8 * row, 8);
        total += start >= 0 && stop > start && stop <= data->len ? (Py_ssize_t)(stop - start) : 0;
    }
    return total;
}

/* The error of the first grown buffer that failed (WALK_NO_MEMORY or WALK_PAST_INT32). */
static enum walk_error
grow_error(const struct grow *g)
{
    for (int k = 0; k < GROWN_BUFFERS; k++) {
        if (g[k].error != WALK_OK) {
            return g[k].error;
        }
    }
    return WALK_NO_MEMORY;
}

/* The rows of the `n` records into `fixed` and `g`, run without the GIL (touches no Python object):
 * WALK_OK with `*declined` set when a record is one the row path takes, else the error. */
static enum walk_error
walk(const Py_buffer *data, const Py_buffer *starts, const Py_buffer *ends, Py_ssize_t n, char *fixed[FIXED_COLUMNS],
     struct grow *g, int *declined)
{
    static const enum grown_buffer offsets[] = {G_TOPIC_OFFSETS, G_UNIQ_OFFSETS, G_TAGS_OFFSETS, G_KEYS_LISTS,
                                                G_KEYS_OFFSETS, G_MAP_ENTRIES, G_NAMES_OFFSETS, G_VALUES_OFFSETS,
                                                G_BODY_OFFSETS, G_BORN_OFFSETS, G_STORE_OFFSETS};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        if (grow_offset(&g[offsets[k]], 0) < 0) {
            return grow_error(g);
        }
    }
    const unsigned char *buf = (const unsigned char *)data->buf;
    struct host_memo hosts[2] = {{{0}, {0}, 0}, {{0}, {0}, 0}};
    for (Py_ssize_t row = 0; row < n; row++) {
        int64_t start, stop;
        memcpy(&start, (const char *)starts->buf + 8 * row, 8);
        memcpy(&stop, (const char *)ends->buf + 8 * row, 8);
        if (start < 0 || stop < start || stop > data->len) {
            return WALK_RANGE;
        }
        int added = add_row(buf + start, stop - start, row, fixed, g, hosts);
        if (added < 0) {
            return grow_error(g);
        }
        if (added == 0) {
            *declined = 1;
            return WALK_OK;
        }
    }
    return WALK_OK;
}

/* The three buffers of record_columns' arguments into `views`: 0, or -1 with the exception set (none
 * of them then held). */
static int
get_buffers(PyObject *const *args, Py_buffer views[3])
{
    for (int k = 0; k < 3; k++) {
        if (PyObject_GetBuffer(args[k], &views[k], PyBUF_SIMPLE) < 0) {
            while (k-- > 0) {
                PyBuffer_Release(&views[k]);
            }
            return -1;
        }
    }
    return 0;
}

/* The fixed-width columns' bytes objects of `n` rows, their bytes in `fixed`: 0, or -1 with the
 * exception set. */
static int
new_fixed(Py_ssize_t n, struct room fixed_rooms[FIXED_COLUMNS], char *fixed[FIXED_COLUMNS], PyObject *allocate)
{
    for (int c = 0; c < FIXED_COLUMNS; c++) {
        fixed[c] = room_new(allocate, n * fixed_width[c], &fixed_rooms[c]);
        if (fixed[c] == NULL) {
            return -1;
        }
    }
    return 0;
}

/* The exception of a walk that failed. */
static void
set_walk_error(enum walk_error error)
{
    if (error == WALK_NO_MEMORY) {
        PyErr_NoMemory();
    } else if (error == WALK_PAST_INT32) {
        PyErr_SetString(PyExc_OverflowError, "record_columns: a column past 2 GiB in one batch");
    } else {
        PyErr_SetString(PyExc_ValueError, "record_columns: a record range outside the data");
    }
}

/* The column of grown buffer `g`: its room cut to its length (no copy), or, for one that outgrew its
 * room, a new room of its length with its bytes. NULL with the exception set. */
static PyObject *
grown_column(struct grow *g, PyObject *allocate)
{
    if (!g->in_owner) {
        room_free(&g->owner);
        char *bytes = room_new(allocate, g->len, &g->owner);
        if (bytes == NULL) {
            return NULL;
        }
        memcpy(bytes, g->bytes, (size_t)g->len);
    }
    return room_take(&g->owner, g->len);
}

/* The result tuple: the fixed columns, then each grown buffer's column (see grown_column). NULL with the
 * exception set. */
static PyObject *
result_of(struct room fixed_rooms[FIXED_COLUMNS], Py_ssize_t n, struct grow *g, PyObject *allocate)
{
    PyObject *result = PyTuple_New(FIXED_COLUMNS + GROWN_BUFFERS);
    if (result == NULL) {
        return NULL;
    }
    for (int c = 0; c < FIXED_COLUMNS + GROWN_BUFFERS; c++) {
        PyObject *column = c < FIXED_COLUMNS ? room_take(&fixed_rooms[c], n * fixed_width[c])
                                             : grown_column(&g[c - FIXED_COLUMNS], allocate);
        if (column == NULL) {
            Py_DECREF(result);
            return NULL;
        }
        PyTuple_SET_ITEM(result, c, column);
    }
    return result;
}

/* The columns of the `n` records of `views` (data, starts, ends), in memory from `allocate` (NULL: bytes
 * objects): the result tuple, Py_None for a batch the Python path takes, or NULL with the exception set. */
static PyObject *
columns_of(const Py_buffer views[3], Py_ssize_t n, PyObject *allocate)
{
    PyObject *result = NULL;
    struct room fixed_rooms[FIXED_COLUMNS];
    char *fixed[FIXED_COLUMNS];
    struct grow g[GROWN_BUFFERS];
    memset(fixed_rooms, 0, sizeof fixed_rooms);
    memset(g, 0, sizeof g);
    if (new_fixed(n, fixed_rooms, fixed, allocate) == 0
        && reserve(g, n, records_total(&views[0], &views[1], &views[2], n), allocate) == 0) {
        /* without the GIL from here to the walk's end: C memory only, errors kept in `error` */
        enum walk_error error;
        int declined = 0;
        Py_BEGIN_ALLOW_THREADS
        error = walk(&views[0], &views[1], &views[2], n, fixed, g, &declined);
        Py_END_ALLOW_THREADS
        if (error != WALK_OK) {
            set_walk_error(error);
        } else {
            result = declined ? Py_NewRef(Py_None) : result_of(fixed_rooms, n, g, allocate);
        }
    }
    for (int c = 0; c < FIXED_COLUMNS; c++) {
        room_free(&fixed_rooms[c]);
    }
    for (int k = 0; k < GROWN_BUFFERS; k++) {
        if (!g[k].in_owner) {
            PyMem_RawFree(g[k].bytes);
        }
        room_free(&g[k].owner);
    }
    return result;
}

/* record_columns(data, starts, ends[, allocate]) -> tuple of buffers, or None: the columns of the records at
 * [starts[i], ends[i]) of the buffer `data` (starts and ends: buffers of native int64), as
 * rocketstore.spark.columnar lays them out: first the fixed-width columns (queueId, queueOffset,
 * commitLogOffset, storeSize, flag, sysFlag, bornTimestamp, storeTimestamp, reconsumeTimes, bodyCRC, in
 * native order), then topic offsets and bytes, msgId (32 characters a row), uniqKey and tags (validity
 * bits, offsets, bytes each), keys (list offsets, string offsets, bytes), properties (entry offsets,
 * name offsets, names, value offsets, values), body (offsets, bytes), bornHost and storeHost (offsets,
 * bytes each); every offsets buffer int32 from 0. None when a record is one the Python path takes (see
 * the file's comment), also for a range too short to hold a record: the caller then builds the whole
 * batch that way. ValueError for a range that is reversed or reaches outside `data`. Each column is a
 * bytes object; with `allocate` (a callable: size -> an object with a writable buffer of at least size
 * bytes, which can be sliced), a column whose room is POOLED_ROOM or more is `allocate(room)[:length]`:
 * a reader passes pyarrow's allocate_buffer, whose pool keeps the memory a batch let go of for the next,
 * where bytes objects that large come from the C allocator's fresh pages (faulted in and zeroed: a
 * quarter of the read of a store of 512-byte messages, whose body columns are 5 MiB a batch). */
PyObject *
speedups_record_columns(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "record_columns(data, starts, ends[, allocate]) takes three or four arguments");
        return NULL;
    }
    PyObject *allocate = nargs == 4 && args[3] != Py_None ? args[3] : NULL;
    if (allocate != NULL && !PyCallable_Check(allocate)) {
        PyErr_SetString(PyExc_TypeError, "record_columns: allocate must be callable");
        return NULL;
    }
    Py_buffer views[3] = {{0}};
    if (get_buffers(args, views) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    if (views[1].len % 8 != 0 || views[2].len != views[1].len) {
        PyErr_SetString(PyExc_ValueError, "record_columns: starts and ends must be int64 buffers of one length");
    } else {
        result = columns_of(views, views[1].len / 8, allocate);
    }
    for (int k = 0; k < 3; k++) {
        PyBuffer_Release(&views[k]);
    }
    return result;
}

/* What stopped record_spans (rocketstore.format.spans.SPANS_* hold the same values; the twin fuzz holds
 * them equal). */
enum spans_stop { SPANS_END, SPANS_FULL, SPANS_BLANK, SPANS_NOT_TAKEN };

#define SPANS_AHEAD 4096 /* bytes record_spans asks the memory for ahead of the record it reads */

/* The walk of record_spans over `buf` (no Python object: run without the GIL). */
static enum spans_stop
walk_spans(const unsigned char *buf, int64_t *pos, int64_t limit, int64_t written, int64_t file_start,
           int64_t max_rows, int64_t max_bytes, unsigned char *starts, unsigned char *ends, int64_t *count)
{
    int64_t at = *pos, n = 0, held = 0, fetched = *pos;
    enum spans_stop stop = SPANS_END;
    while (at < limit) {
        /* each record's start depends on the one before: without asking for the bytes ahead, every
         * record would wait for its own from memory */
        for (; fetched < at + SPANS_AHEAD && fetched < written; fetched += 64) {
            __builtin_prefetch(buf + fetched);
        }
        if (at + REC_TOTALSIZE_WIDTH + REC_MAGICCODE_WIDTH > written) {
            stop = SPANS_NOT_TAKEN;
            break;
        }
        int64_t total = be_field(buf + at + REC_TOTALSIZE_POS, REC_TOTALSIZE_WIDTH);
        uint32_t magic = (uint32_t)be_field(buf + at + REC_MAGICCODE_POS, REC_MAGICCODE_WIDTH);
        if (magic == BLANK_MAGIC) {
            stop = SPANS_BLANK;
            break;
        }
        if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < MIN_RECORD_SIZE || total > written - at
            || be_field(buf + at + REC_PHYSICALOFFSET_POS, REC_PHYSICALOFFSET_WIDTH) != file_start + at) {
            stop = SPANS_NOT_TAKEN;
            break;
        }
        memcpy(starts + 8 * n, &at, 8); /* the buffers need not be aligned */
        at += total;
        memcpy(ends + 8 * n, &at, 8);
        held += total;
        n++;
        if (n >= max_rows || held >= max_bytes) {
            stop = at < limit ? SPANS_FULL : SPANS_END;
            break;
        }
    }
    *pos = at;
    *count = n;
    return stop;
}

/* record_spans(data, pos, limit, written, file_start, max_rows, max_bytes, starts, ends) -> (count, pos,
 * stop): from `pos` (a record start) towards `limit`, the whole records of `data` (the bytes of the
 * commitlog file starting at physical offset `file_start`, written up to `written`) by their 8-byte
 * prefixes and own physical offsets: their starts and ends into the native int64 buffers
 * `starts` and `ends` (room for `max_rows` each), until `limit` (stop SPANS_END), `max_rows` records or
 * `max_bytes` record bytes (SPANS_FULL, `pos` the next record), a blank (SPANS_BLANK: the file's data
 * ends) or a prefix that is no record's, a record past `written` or one not at its own physical offset
 * (SPANS_NOT_TAKEN, `pos` there).
 * ValueError for positions outside 0 <= pos <= limit <= written <= len(data), a limit below 1 or
 * buffers too small. */
PyObject *
speedups_record_spans(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "record_spans(data, pos, limit, written, file_start, max_rows, max_bytes, "
                                         "starts, ends) takes nine arguments");
        return NULL;
    }
    int64_t v[6];
    for (int k = 0; k < 6; k++) {
        long long value = PyLong_AsLongLong(args[1 + k]);
        if (value == -1 && PyErr_Occurred()) {
            return NULL;
        }
        v[k] = value;
    }
    int64_t pos = v[0], limit = v[1], written = v[2], file_start = v[3], max_rows = v[4], max_bytes = v[5];
    Py_buffer data = {0}, starts = {0}, ends = {0};
    if (PyObject_GetBuffer(args[0], &data, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (PyObject_GetBuffer(args[7], &starts, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&data);
        return NULL;
    }
    if (PyObject_GetBuffer(args[8], &ends, PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&starts);
        return NULL;
    }
    PyObject *result = NULL;
    if (pos < 0 || pos > limit || limit > written || written > data.len || max_rows < 1 || max_bytes < 1
        || max_rows > starts.len / 8 || max_rows > ends.len / 8) {
        PyErr_SetString(PyExc_ValueError, "record_spans: positions outside the data or buffers too small");
        goto done;
    }
    int64_t count = 0;
    enum spans_stop stop;
    Py_BEGIN_ALLOW_THREADS
    stop = walk_spans((const unsigned char *)data.buf, &pos, limit, written, file_start, max_rows, max_bytes,
                      (unsigned char *)starts.buf, (unsigned char *)ends.buf, &count);
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(LLi)", (long long)count, (long long)pos, (int)stop);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

/* The topics a read keeps, as topic_rows takes them: each one's bytes (borrowed from the tuple). */
struct wanted_topics {
    Py_ssize_t count;
    const char **bytes;
    Py_ssize_t *lens;
};

/* 1 when the record at `raw` (`total` bytes) is one topic_rows decides on, its topic in `lay`; 0 when
 * the numpy twin leaves its batch undecided (shorter than a record, neither version, an IPv6 host,
 * lengths that do not add up). */
static int
topic_decidable(const unsigned char *raw, long long total, struct layout *lay)
{
    if (total < MIN_RECORD_SIZE) {
        return 0;
    }
    unsigned long magic = (unsigned long)(uint32_t)be_field(raw + REC_MAGICCODE_POS, 4);
    long long value;
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || rs_layout_check(raw, total, magic, lay, &value) != LAYOUT_OK) {
        return 0;
    }
    return (lay->sys_flag & (BORN_V6 | STORE_V6)) == 0;
}

/* The walk of topic_rows, without the GIL: the count kept, -1 undecided, -2 a range outside the data. */
static Py_ssize_t
topic_walk(const Py_buffer *data, const Py_buffer *starts, const Py_buffer *ends, Py_ssize_t n,
           const struct wanted_topics *wanted, unsigned char *keep)
{
    const unsigned char *buf = (const unsigned char *)data->buf;
    Py_ssize_t kept = 0;
    for (Py_ssize_t row = 0; row < n; row++) {
        int64_t start, stop;
        memcpy(&start, (const char *)starts->buf + 8 * row, 8);
        memcpy(&stop, (const char *)ends->buf + 8 * row, 8);
        if (start < 0 || stop < start || stop > data->len) {
            return -2;
        }
        struct layout lay;
        if (!topic_decidable(buf + start, stop - start, &lay)) {
            return -1;
        }
        unsigned char hit = 0;
        for (Py_ssize_t k = 0; k < wanted->count && !hit; k++) {
            hit = lay.topic_len == wanted->lens[k]
                  && memcmp(buf + start + lay.topic_start, wanted->bytes[k], (size_t)wanted->lens[k]) == 0;
        }
        keep[row] = hit;
        kept += hit;
    }
    return kept;
}

/* topic_rows(data, starts, ends, topics, keep) -> int: which of the whole records at [starts[i], ends[i])
 * of the buffer `data` (starts and ends: buffers of native int64) hold one of `topics` (a tuple of bytes,
 * the topics as records hold them), read on the bytes without building a column: keep[i] (a writable
 * buffer of a byte a row, numpy's bool) 1 or 0, and the count kept; -1, with `keep` undefined, when a
 * record is one rocketstore.scan.direct.topic_rows_py leaves undecided (its twin: a record shorter than
 * a record can be, of neither version, with an IPv6 host, or with lengths that do not add up). ValueError
 * for a range outside `data` or buffers of other sizes, TypeError for topics that are not bytes. */
PyObject *
speedups_topic_rows(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "topic_rows(data, starts, ends, topics, keep) takes a tuple of topics");
        return NULL;
    }
    Py_buffer views[3] = {{0}}, keep = {0};
    struct wanted_topics wanted = {PyTuple_GET_SIZE(args[3]), NULL, NULL};
    wanted.bytes = PyMem_New(const char *, wanted.count + 1);
    wanted.lens = PyMem_New(Py_ssize_t, wanted.count + 1);
    if (wanted.bytes == NULL || wanted.lens == NULL) {
        PyMem_Free(wanted.bytes);
        PyMem_Free(wanted.lens);
        return PyErr_NoMemory();
    }
    PyObject *result = NULL;
    for (Py_ssize_t k = 0; k < wanted.count; k++) {
        PyObject *topic = PyTuple_GET_ITEM(args[3], k);
        if (!PyBytes_Check(topic)) {
            PyErr_SetString(PyExc_TypeError, "topic_rows: each topic must be bytes");
            goto done;
        }
        wanted.bytes[k] = PyBytes_AS_STRING(topic);
        wanted.lens[k] = PyBytes_GET_SIZE(topic);
    }
    if (get_buffers(args, views) < 0) {
        goto done;
    }
    if (PyObject_GetBuffer(args[4], &keep, PyBUF_WRITABLE) == 0) {
        Py_ssize_t n = views[1].len / 8;
        if (views[1].len % 8 != 0 || views[2].len != views[1].len || keep.len != n) {
            PyErr_SetString(PyExc_ValueError, "topic_rows: starts and ends must be int64 buffers of one length, "
                                              "keep a byte a row");
        } else {
            Py_ssize_t kept;
            Py_BEGIN_ALLOW_THREADS
            kept = topic_walk(&views[0], &views[1], &views[2], n, &wanted, (unsigned char *)keep.buf);
            Py_END_ALLOW_THREADS
            if (kept == -2) {
                PyErr_SetString(PyExc_ValueError, "topic_rows: a record range outside the data");
            } else {
                result = PyLong_FromSsize_t(kept);
            }
        }
        PyBuffer_Release(&keep);
    }
    for (int k = 0; k < 3; k++) {
        PyBuffer_Release(&views[k]);
    }
done:
    PyMem_Free(wanted.bytes);
    PyMem_Free(wanted.lens);
    return result;
}
