/*
 * rocketstore._speedups, log layer: compiled twins of the index file and the consume-queue read loop of
 * rocketstore.log.
 *
 *   index_lookup(...)               rocketstore.log.index_file.IndexFile.lookup_py
 *   index_put_keys(...)             rocketstore.log.index_file.IndexFile._put_keys_py
 *   index_damage(buffer, ...)       rocketstore.format.index.index_damage_scan
 *   decode_run(cls, entries, ...)   rocketstore.log.entry_run.decode_run_py
 *   get_run(cls, cq, ...)           rocketstore.log.entry_run.get_run_py
 *   query_records(...)              rocketstore.store.read_path.ReadPath.query_py
 *   ConsumeQueueState               the hot state of rocketstore.log.consume_queue.ConsumeQueue (its base)
 *   IndexFileState                  the hot state of rocketstore.log.index_file.IndexFile (its base)
 *
 * decode_run decodes each record through format.c's rs_record_in.
 */
#include "common.h"

#define MAX_SLOTS (1LL << 40)               /* far above any index file (RocketMQ's default: 5 million) */
#define MAX_DIFF_MS (0x80000000LL * 1000)   /* a timeDiff (int32 seconds) in milliseconds, bounding it */

/* Physical offsets a walk found, in a growing C array. */
struct offsets {
    long long *items;
    Py_ssize_t count, capacity;
    long long few[64]; /* a query's usual handful: no allocation */
};

static void
offsets_init(struct offsets *o)
{
    o->items = o->few;
    o->count = 0;
    o->capacity = 64;
}

static void
offsets_release(struct offsets *o)
{
    if (o->items != o->few) {
        PyMem_Free(o->items);
    }
    offsets_init(o);
}

static int
offsets_add(struct offsets *o, long long value)
{
    if (o->count == o->capacity) {
        Py_ssize_t capacity = o->capacity * 2;
        long long *grown = o->items == o->few ? PyMem_Malloc(sizeof(long long) * (size_t)capacity)
                                              : PyMem_Realloc(o->items, sizeof(long long) * (size_t)capacity);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        if (o->items == o->few) {
            memcpy(grown, o->few, sizeof(o->few));
        }
        o->items = grown;
        o->capacity = capacity;
    }
    o->items[o->count++] = value;
    return 0;
}

/* The slot chain walk of IndexFile.lookup_py over the index file in `buf` (`size` bytes): appends to
 * `out` the physical offsets of the entries carrying `key_hash` whose time lies in [begin, end], newest
 * first, while `out` holds fewer than `max_count`. `n_max`, `begin_ts`, `begin_phy` and `end_phy` are the
 * header's indexCount, beginTimestamp, beginPhyOffset and endPhyOffset. 1 when done; 0 when the chain is
 * damaged (lookup_py's rules: a slot or link outside the file's entries or not strictly backwards, a
 * negative key hash or timeDiff, a physical offset outside the header's), a position falls outside the
 * buffer or a value outside what the arithmetic takes (the caller lets the Python twin answer, or raise
 * IndexDamagedError); -1 after an error. */
static int
index_walk(const unsigned char *buf, Py_ssize_t size, long long slots, long long key_hash, long long n_max,
           long long begin_ts, long long begin_phy, long long end_phy, long long begin, long long end,
           Py_ssize_t max_count, struct offsets *out)
{
    /* beyond these the position and time arithmetic could overflow int64 */
    if (slots <= 0 || slots > MAX_SLOTS || key_hash < 0 || begin_ts > LLONG_MAX - MAX_DIFF_MS
        || begin_ts < LLONG_MIN + MAX_DIFF_MS) {
        return 0;
    }
    long long slot_at = INDEX_HEADER_SIZE + (key_hash % slots) * INDEX_SLOT_SIZE;
    if (slot_at + INDEX_SLOT_SIZE > size) {
        return 0;
    }
    long long n = read_be(buf + slot_at, INDEX_SLOT_SIZE);
    if (n == 0) {
        return 1;
    }
    long long entries_at = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE;
    while (out->count < max_count) {
        long long at = entries_at + n * INDEX_ENTRY_SIZE;
        if (n <= 0 || at + INDEX_ENTRY_SIZE > size) {
            return 0; /* no such entry in the file */
        }
        const unsigned char *entry = buf + at;
        long long entry_hash = read_be(entry + INDEX_ENTRY_KEYHASH_POS, INDEX_ENTRY_KEYHASH_WIDTH);
        long long phy = read_be(entry + INDEX_ENTRY_PHYSICAL_OFFSET_POS, INDEX_ENTRY_PHYSICAL_OFFSET_WIDTH);
        long long diff = read_be(entry + INDEX_ENTRY_TIMEDIFF_POS, INDEX_ENTRY_TIMEDIFF_WIDTH);
        long long prev = read_be(entry + INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_POS, INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_WIDTH);
        /* the header's newest entry may be written before its endPhyOffset (RocketMQ counts it first) */
        if (entry_hash < 0 || diff < 0 || phy < begin_phy || (n < n_max - 1 && phy > end_phy) || prev < 0
            || prev >= n) {
            return 0;
        }
        long long time_read = begin_ts + diff * 1000;
        if (entry_hash == key_hash && begin <= time_read && time_read <= end && offsets_add(out, phy) < 0) {
            return -1;
        }
        if (prev == 0 || time_read < begin) {
            break;
        }
        n = prev;
    }
    return 1;
}

/* index_lookup(buffer, slots, key_hash, index_count, begin_timestamp, begin_phy_offset, end_phy_offset, begin,
 * end, max_count, out) walks the slot chain of key_hash (index_walk) and appends matching physical offsets
 * to `out`, newest first, while `out` holds fewer than max_count. Returns True, or False without
 * appending anything when the chain is damaged, a position falls outside the buffer or an argument
 * outside int64 (the Python twin then runs: it raises its own error or handles the int). */
PyObject *
speedups_index_lookup(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "index_lookup takes eleven arguments");
        return NULL;
    }
    long long slots = PyLong_AsLongLong(args[1]);
    long long key_hash = PyLong_AsLongLong(args[2]);
    long long n_max = PyLong_AsLongLong(args[3]);
    long long begin_ts = PyLong_AsLongLong(args[4]);
    long long begin_phy = PyLong_AsLongLong(args[5]);
    long long end_phy = PyLong_AsLongLong(args[6]);
    long long begin = PyLong_AsLongLong(args[7]);
    long long end = PyLong_AsLongLong(args[8]);
    Py_ssize_t max_count = PyLong_AsSsize_t(args[9]);
    PyObject *out = args[10];
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
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    struct offsets found;
    offsets_init(&found);
    Py_ssize_t had = PyList_GET_SIZE(out);
    int walked = index_walk((const unsigned char *)view.buf, view.len, slots, key_hash, n_max, begin_ts, begin_phy,
                            end_phy, begin, end, max_count > had ? max_count - had : 0, &found);
    PyBuffer_Release(&view);
    for (Py_ssize_t i = 0; walked == 1 && i < found.count; i++) {
        PyObject *offset = PyLong_FromLongLong(found.items[i]);
        if (offset == NULL || PyList_Append(out, offset) < 0) {
            walked = -1;
        }
        Py_XDECREF(offset);
    }
    offsets_release(&found);
    if (walked < 0) {
        return NULL;
    }
    return Py_NewRef(walked ? Py_True : Py_False);
}

/* Writes entries header[INDEX_HEADER_INDEXCOUNT_FIELD] (indexCount), +1, ... for the `count` (index hash, phy offset) pairs of
 * native int64 at `pairs`, all stored at `ts`, points their slots at them and writes the 40-byte header
 * of the index file mapped at `buf` (`len` bytes, `slots` hash slots), as IndexFile._put_keys_py does;
 * `header` holds its six fields in file order (beginTimestamp, endTimestamp, beginPhyOffset,
 * endPhyOffset, hashSlotCount, indexCount) and is updated. Returns 0, or 1 without writing anything when a
 * value or position is out of range (the caller's Python twin then runs). */
int
rs_index_fits(Py_ssize_t len, long long slots, const long long header[INDEX_HEADER_FIELDS], const unsigned char *pairs,
              Py_ssize_t count)
{
    long long slot_count = header[INDEX_HEADER_HASHSLOTCOUNT_FIELD], n = header[INDEX_HEADER_INDEXCOUNT_FIELD];
    /* each bound before the sum it guards: the header's fields and `count` may be any int64 */
    if (slots <= 0 || slots > MAX_SLOTS || n < 1 || n > JAVA_INT_MAX || count < 0 || count > JAVA_INT_MAX - n
        || slot_count < JAVA_INT_MIN || slot_count > JAVA_INT_MAX - count) {
        return 0;
    }
    long long entries_at = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE;
    if (entries_at + (n + count) * INDEX_ENTRY_SIZE > len) {
        return 0;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t h;
        memcpy(&h, pairs + INDEX_KEY_SIZE * i + INDEX_KEY_KEYHASH_POS, INDEX_KEY_KEYHASH_WIDTH);
        if (h < 0 || h > JAVA_INT_MAX) {
            return 0;
        }
    }
    return 1;
}

int
rs_index_put(unsigned char *buf, Py_ssize_t len, long long slots, long long header[INDEX_HEADER_FIELDS], const unsigned char *pairs,
             Py_ssize_t count, long long ts)
{
    if (!rs_index_fits(len, slots, header, pairs, count)) {
        return 1;
    }
    long long begin_ts = header[INDEX_HEADER_BEGINTIMESTAMP_FIELD], end_ts = header[INDEX_HEADER_ENDTIMESTAMP_FIELD];
    long long begin_phy = header[INDEX_HEADER_BEGINPHYOFFSET_FIELD], end_phy = header[INDEX_HEADER_ENDPHYOFFSET_FIELD];
    long long slot_count = header[INDEX_HEADER_HASHSLOTCOUNT_FIELD], n = header[INDEX_HEADER_INDEXCOUNT_FIELD];
    long long entries_at = INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t h, phy;
        memcpy(&h, pairs + INDEX_KEY_SIZE * i + INDEX_KEY_KEYHASH_POS, INDEX_KEY_KEYHASH_WIDTH);
        memcpy(&phy, pairs + INDEX_KEY_SIZE * i + INDEX_KEY_PHYSICAL_OFFSET_POS, INDEX_KEY_PHYSICAL_OFFSET_WIDTH);
        unsigned char *slot = buf + INDEX_HEADER_SIZE + (h % slots) * INDEX_SLOT_SIZE;
        long long slot_value = read_be(slot, INDEX_SLOT_SIZE);
        if (slot_value <= 0 || slot_value > n) {
            slot_value = 0;
            slot_count++;
        }
        long long diff = 0; /* whole seconds since the file's begin, truncated, clamped to [0, 2**31-1] */
        if (begin_ts > 0 && ts > begin_ts) {
            diff = (ts - begin_ts) / 1000;
            if (diff > JAVA_INT_MAX) {
                diff = JAVA_INT_MAX;
            }
        }
        if (n <= 1) {
            begin_phy = phy;
            begin_ts = ts;
        }
        unsigned char *entry = buf + entries_at + n * INDEX_ENTRY_SIZE;
        write_be(entry + INDEX_ENTRY_KEYHASH_POS, (uint64_t)h, INDEX_ENTRY_KEYHASH_WIDTH);
        write_be(entry + INDEX_ENTRY_PHYSICAL_OFFSET_POS, (uint64_t)phy, INDEX_ENTRY_PHYSICAL_OFFSET_WIDTH);
        write_be(entry + INDEX_ENTRY_TIMEDIFF_POS, (uint64_t)diff, INDEX_ENTRY_TIMEDIFF_WIDTH);
        write_be(entry + INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_POS, (uint64_t)slot_value, INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_WIDTH);
        write_be(slot, (uint64_t)n, INDEX_SLOT_SIZE);
        n++;
        end_phy = phy;
        end_ts = ts;
    }
    write_be(buf + INDEX_HEADER_BEGINTIMESTAMP_POS, (uint64_t)begin_ts, INDEX_HEADER_BEGINTIMESTAMP_WIDTH);
    write_be(buf + INDEX_HEADER_ENDTIMESTAMP_POS, (uint64_t)end_ts, INDEX_HEADER_ENDTIMESTAMP_WIDTH);
    write_be(buf + INDEX_HEADER_BEGINPHYOFFSET_POS, (uint64_t)begin_phy, INDEX_HEADER_BEGINPHYOFFSET_WIDTH);
    write_be(buf + INDEX_HEADER_ENDPHYOFFSET_POS, (uint64_t)end_phy, INDEX_HEADER_ENDPHYOFFSET_WIDTH);
    write_be(buf + INDEX_HEADER_HASHSLOTCOUNT_POS, (uint64_t)slot_count, INDEX_HEADER_HASHSLOTCOUNT_WIDTH);
    write_be(buf + INDEX_HEADER_INDEXCOUNT_POS, (uint64_t)n, INDEX_HEADER_INDEXCOUNT_WIDTH);
    header[INDEX_HEADER_BEGINTIMESTAMP_FIELD] = begin_ts;
    header[INDEX_HEADER_ENDTIMESTAMP_FIELD] = end_ts;
    header[INDEX_HEADER_BEGINPHYOFFSET_FIELD] = begin_phy;
    header[INDEX_HEADER_ENDPHYOFFSET_FIELD] = end_phy;
    header[INDEX_HEADER_HASHSLOTCOUNT_FIELD] = slot_count;
    header[INDEX_HEADER_INDEXCOUNT_FIELD] = n;
    return 0;
}

/* index_put_keys(buffer, slots, header, keys, store_timestamp, start, stop): rs_index_put for keys
 * [start, stop) of `keys`, a buffer of (index hash, phy offset) pairs of native int64
 * (rocketstore.log.index_file.KEY); the caller checked there is room. `header` and the result are the
 * header's six fields in file order. Returns the header after the puts, or None without writing
 * anything when a value or position is out of range (IndexFile._put_keys_py then runs). */
PyObject *
speedups_index_put_keys(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "index_put_keys takes seven arguments");
        return NULL;
    }
    long long header[INDEX_HEADER_FIELDS];
    long long slots = PyLong_AsLongLong(args[1]);
    long long ts = PyLong_AsLongLong(args[4]);
    Py_ssize_t start = PyLong_AsSsize_t(args[5]);
    Py_ssize_t stop = PyLong_AsSsize_t(args[6]);
    if (!PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) != INDEX_HEADER_FIELDS) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "index_put_keys: header must be a tuple of six ints");
        }
        return NULL;
    }
    for (int i = 0; i < INDEX_HEADER_FIELDS; i++) {
        header[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[2], i));
    }
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return NULL;
        }
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    Py_buffer keys = {0}, view = {0};
    if (PyObject_GetBuffer(args[3], &keys, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t held = keys.len / INDEX_KEY_SIZE;
    if (keys.len % INDEX_KEY_SIZE != 0 || start < 0 || stop < start || stop > held) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        goto done;
    }
    if (rs_index_put((unsigned char *)view.buf, view.len, slots, header, (const unsigned char *)keys.buf + start * INDEX_KEY_SIZE,
                     stop - start, ts) != 0) {
        result = Py_NewRef(Py_None);
    } else {
        result = PyTuple_New(INDEX_HEADER_FIELDS);
        for (int i = 0; result != NULL && i < INDEX_HEADER_FIELDS; i++) {
            PyObject *value = PyLong_FromLongLong(header[i]);
            if (value == NULL) {
                Py_CLEAR(result);
            } else {
                PyTuple_SET_ITEM(result, i, value);
            }
        }
    }
    PyBuffer_Release(&view);
done:
    PyBuffer_Release(&keys);
    return result;
}

/* How an index file is damaged (rocketstore.format.index.DAMAGE_*, which the twin test holds equal). */
enum index_damage {
    DAMAGE_NONE,
    DAMAGE_COUNT,
    DAMAGE_ORDER,
    DAMAGE_ENTRY_HASH,
    DAMAGE_ENTRY_PHY,
    DAMAGE_ENTRY_TIME,
    DAMAGE_ENTRY_LINK,
    DAMAGE_SLOT,
    DAMAGE_SLOT_COUNT,
    DAMAGE_PAST_COUNT,
};

/* Every slot and entry of the index file at `buf` (`slots` hash slots, `max_entries` entries, the size
 * the two make) against its header, as rocketstore.format.index.index_damage_scan checks them: the first
 * damage found, *where set to the entry or slot number it names, or DAMAGE_NONE. `newest` holds `slots`
 * zeros (it is used up). No Python object is touched: the caller may let other threads run. */
static enum index_damage
index_damage_scan(const unsigned char *buf, long long slots, long long max_entries, int32_t *newest,
                  long long *where)
{
    long long begin_ts = read_be(buf + INDEX_HEADER_BEGINTIMESTAMP_POS, INDEX_HEADER_BEGINTIMESTAMP_WIDTH);
    long long end_ts = read_be(buf + INDEX_HEADER_ENDTIMESTAMP_POS, INDEX_HEADER_ENDTIMESTAMP_WIDTH);
    long long begin_phy = read_be(buf + INDEX_HEADER_BEGINPHYOFFSET_POS, INDEX_HEADER_BEGINPHYOFFSET_WIDTH);
    long long end_phy = read_be(buf + INDEX_HEADER_ENDPHYOFFSET_POS, INDEX_HEADER_ENDPHYOFFSET_WIDTH);
    long long slot_count = read_be(buf + INDEX_HEADER_HASHSLOTCOUNT_POS, INDEX_HEADER_HASHSLOTCOUNT_WIDTH);
    long long count = read_be(buf + INDEX_HEADER_INDEXCOUNT_POS, INDEX_HEADER_INDEXCOUNT_WIDTH);
    *where = 0;
    if (count < 0 || count > max_entries) {
        *where = count;
        return DAMAGE_COUNT;
    }
    if (count < 1) {
        count = 1;
    }
    if (count > 1 && (begin_ts > end_ts || begin_phy > end_phy)) {
        return DAMAGE_ORDER;
    }
    /* end_ts - begin_ts as an unsigned: exact once begin_ts <= end_ts */
    unsigned long long span = (unsigned long long)end_ts - (unsigned long long)begin_ts;
    const unsigned char *entries = buf + INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE;
    for (long long n = 1; n < count; n++) {
        const unsigned char *entry = entries + n * INDEX_ENTRY_SIZE;
        long long key_hash = read_be(entry + INDEX_ENTRY_KEYHASH_POS, INDEX_ENTRY_KEYHASH_WIDTH);
        long long phy = read_be(entry + INDEX_ENTRY_PHYSICAL_OFFSET_POS, INDEX_ENTRY_PHYSICAL_OFFSET_WIDTH);
        long long diff = read_be(entry + INDEX_ENTRY_TIMEDIFF_POS, INDEX_ENTRY_TIMEDIFF_WIDTH);
        long long prev = read_be(entry + INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_POS, INDEX_ENTRY_PREVIOUS_ENTRY_NUMBER_WIDTH);
        *where = n;
        if (key_hash < 0) {
            return DAMAGE_ENTRY_HASH;
        }
        if (phy < begin_phy || phy > end_phy) {
            return DAMAGE_ENTRY_PHY;
        }
        if (diff < 0 || (n > 1 && (unsigned long long)diff * 1000 > span)) {
            return DAMAGE_ENTRY_TIME;
        }
        long long slot = key_hash % slots;
        if (prev != newest[slot]) {
            return DAMAGE_ENTRY_LINK;
        }
        newest[slot] = (int32_t)n;
    }
    long long used = 0;
    for (long long slot = 0; slot < slots; slot++) {
        long long value = read_be(buf + INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE, INDEX_SLOT_SIZE);
        if (value != newest[slot]) {
            *where = slot;
            return DAMAGE_SLOT;
        }
        used += value != 0;
    }
    if (used != slot_count) {
        *where = slot_count;
        return DAMAGE_SLOT_COUNT;
    }
    const unsigned char *tail = entries + count * INDEX_ENTRY_SIZE;
    const unsigned char *stop = entries + max_entries * INDEX_ENTRY_SIZE;
    const unsigned char *at = tail;
    while (at + 8 <= stop) { /* eight bytes a step, then the bytes left */
        uint64_t word;
        memcpy(&word, at, 8);
        if (word != 0) {
            break;
        }
        at += 8;
    }
    for (; at < stop; at++) {
        if (*at != 0) {
            *where = (at - entries) / INDEX_ENTRY_SIZE;
            return DAMAGE_PAST_COUNT;
        }
    }
    *where = 0;
    return DAMAGE_NONE;
}

/* index_damage(buffer, slots, max_entries) -> (code, where): index_damage_scan of an index file's bytes,
 * run without the interpreter lock; None when the buffer is not the size the geometry makes or the
 * geometry is out of range (the Python twin then answers). */
PyObject *
speedups_index_damage(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "index_damage takes three arguments");
        return NULL;
    }
    long long slots = PyLong_AsLongLong(args[1]);
    long long max_entries = PyLong_AsLongLong(args[2]);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return NULL;
        }
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (slots <= 0 || slots > MAX_SLOTS || max_entries < 1 || max_entries > 0x80000000LL) {
        Py_RETURN_NONE;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (view.len != INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + max_entries * INDEX_ENTRY_SIZE) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    int32_t *newest = calloc((size_t)slots, sizeof(int32_t));
    if (newest == NULL) {
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    long long where = 0;
    enum index_damage code;
    Py_BEGIN_ALLOW_THREADS
    code = index_damage_scan((const unsigned char *)view.buf, slots, max_entries, newest, &where);
    Py_END_ALLOW_THREADS
    free(newest);
    PyBuffer_Release(&view);
    return Py_BuildValue("(iL)", (int)code, where);
}

/* enum run_state (RUN_END, RUN_FULL, RUN_ELSEWHERE) comes from _layout.h */

/* The arguments of one decode_run call, checked (borrowed references); i and total_bytes move as it runs. */
struct decode_call {
    PyTypeObject *cls;
    const unsigned char *units; /* the consume-queue entries: unit_count of UNIT_SIZE bytes */
    Py_ssize_t unit_count;
    PyObject *wanted, *messages, *topic;
    long long queue_id, first_offset, log_start, log_size, total_bytes, max_bytes;
    Py_ssize_t i, max_count;
};

/* decode_run's arguments (all but the log's buffer, args[3]) into `c`: 0, or -1 with TypeError /
 * ValueError / OverflowError (or the int's error). */
static int
decode_call_of(PyObject *const *args, Py_ssize_t nargs, struct decode_call *c)
{
    if (nargs != 11 && nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "decode_run takes eleven or fourteen arguments");
        return -1;
    }
    c->topic = nargs == 14 ? args[11] : Py_None;
    c->queue_id = 0, c->first_offset = 0;
    if (c->topic != Py_None) {
        if (!PyUnicode_Check(c->topic)) {
            PyErr_SetString(PyExc_TypeError, "decode_run: topic must be a str or None");
            return -1;
        }
        c->queue_id = PyLong_AsLongLong(args[12]);
        c->first_offset = PyLong_AsLongLong(args[13]);
        if (PyErr_Occurred()) {
            return -1;
        }
    }
    if (rs_check_message_class(args[0]) < 0) {
        return -1;
    }
    c->cls = (PyTypeObject *)args[0];
    c->wanted = args[6], c->messages = args[7];
    if (!PyBytes_Check(args[1]) || !PyList_Check(c->messages) || (c->wanted != Py_None && !PyAnySet_Check(c->wanted))) {
        PyErr_SetString(PyExc_TypeError, "decode_run: entries must be bytes, wanted a set or None, messages a list");
        return -1;
    }
    c->units = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    c->unit_count = PyBytes_GET_SIZE(args[1]) / UNIT_SIZE;
    c->i = PyLong_AsSsize_t(args[2]);
    c->log_start = PyLong_AsLongLong(args[4]);
    c->log_size = PyLong_AsLongLong(args[5]);
    c->max_count = PyLong_AsSsize_t(args[8]);
    c->total_bytes = PyLong_AsLongLong(args[9]);
    c->max_bytes = PyLong_AsLongLong(args[10]);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (c->i < 0 || c->log_start < 0 || c->total_bytes < 0 || c->max_bytes < 0) {
        PyErr_SetString(PyExc_ValueError, "decode_run: negative index, offset or byte count");
        return -1;
    }
    if (c->total_bytes > LLONG_MAX / 2) { /* room for the sizes added below */
        PyErr_SetString(PyExc_OverflowError, "decode_run: total_bytes out of range");
        return -1;
    }
    if (c->log_size < -1) {
        c->log_size = -1; /* the same answers: no record fits, and log_size - size cannot overflow */
    }
    return 0;
}

/* 1 when the tags code `code` is in `wanted`, 0 when not, -1 after an error. */
static inline int
wanted_code(PyObject *wanted, long long code)
{
    PyObject *key = PyLong_FromLongLong(code);
    int found = key == NULL ? -1 : PySet_Contains(wanted, key);
    Py_XDECREF(key);
    return found;
}

/* The record of `size` bytes at `at` (phy offset `phy_offset`), which entry i names, as a c->cls (a new
 * reference) when it is that record (with c->topic: of that topic, queue id and queue offset); NULL with
 * no error when it is not (the run stops: elsewhere), NULL with one after an error. `*matched` is the
 * last record topic found equal to c->topic (records of a run repeat it). */
static inline PyObject *
entry_record(const struct decode_call *c, const unsigned char *at, long long size, long long phy_offset,
             Py_ssize_t i, struct topic_cache *cache, PyObject **matched)
{
    PyObject *msg = size < 8 ? NULL : rs_record_in(c->cls, at, size, phy_offset, cache); /* 8: the prefix */
    if (msg == NULL || c->topic == Py_None) {
        return msg; /* no error set: not the record the entry names, or not a whole one */
    }
    /* a record of another queue or queue offset: the caller looks at it */
    PyObject *record_topic = rs_message_topic(msg);
    int same = read_be(at + REC_QUEUEID_POS, REC_QUEUEID_WIDTH) == c->queue_id
               && read_be(at + REC_QUEUEOFFSET_POS, REC_QUEUEOFFSET_WIDTH) == c->first_offset + i;
    if (same && record_topic != *matched) {
        same = PyUnicode_Compare(record_topic, c->topic) == 0;
        if (same) {
            *matched = record_topic;
        } else if (PyErr_Occurred()) {
            Py_DECREF(msg);
            return NULL;
        }
    }
    if (!same) {
        Py_DECREF(msg);
        return NULL;
    }
    return msg;
}

/* The read loop of decode_run over the entries from c->i, the records in `log` (c->log_size bytes):
 * c->i and c->total_bytes moved past what it took; the run's state, or -1 after an error. */
static int
decode_entries(struct decode_call *c, const unsigned char *log)
{
    const unsigned char *units = c->units;
    Py_ssize_t end = c->unit_count;
    struct topic_cache cache = {.len = -1, .text = NULL};
    PyObject *matched = NULL; /* the last decoded topic found equal to `topic` (records of a run repeat it) */
    int state = RUN_END;
    for (; c->i < end; c->i++) {
        const unsigned char *unit = units + c->i * UNIT_SIZE;
        long long phy_offset = read_be(unit + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, CQ_COMMITLOG_PHYSICAL_OFFSET_WIDTH);
        long long size = read_be(unit + CQ_MESSAGE_SIZE_POS, CQ_MESSAGE_SIZE_WIDTH);
        long long code = read_be(unit + CQ_TAGS_HASH_CODE_POS, CQ_TAGS_HASH_CODE_WIDTH);
        /* total_bytes + size > max_bytes without overflow (size is an int32) */
        int too_big = size >= 0 ? c->total_bytes > c->max_bytes - size : c->total_bytes + size > c->max_bytes;
        Py_ssize_t had = PyList_GET_SIZE(c->messages);
        if (had > 0 && (had >= c->max_count || too_big)) {
            state = RUN_FULL;
            break;
        }
        if (phy_offset < 0 || size <= 0 || (phy_offset == 0 && size == FILLER_SIZE && code == 0)) {
            continue;
        }
        if (c->wanted != Py_None) {
            int found = wanted_code(c->wanted, code);
            if (found < 0) {
                state = -1;
                break;
            }
            if (!found) {
                continue;
            }
        }
        long long pos = phy_offset - c->log_start;
        if (pos < 0 || pos > c->log_size - size) {
            state = RUN_ELSEWHERE;
            break;
        }
        PyObject *msg = entry_record(c, log + pos, size, phy_offset, c->i, &cache, &matched);
        if (msg == NULL) {
            /* an error, or not the record the entry names (another one, not a whole one) */
            state = PyErr_Occurred() ? -1 : RUN_ELSEWHERE;
            break;
        }
        int appended = PyList_Append(c->messages, msg);
        Py_DECREF(msg);
        if (appended < 0) {
            state = -1;
            break;
        }
        c->total_bytes += size;
    }
    Py_XDECREF(cache.text);
    return state;
}

/* decode_run(cls, entries, i, log, log_start, log_size, wanted, messages, max_count, total_bytes,
 * max_bytes[, topic, queue_id, first_offset]) -> (i, total_bytes, state): the read loop of
 * MessageStore.get over the consume-queue entries in `entries` from entry i, decoding in place the
 * records that lie in `log` (bytes [0, log_size) of the commitlog file starting at log_start); with
 * `topic` (a str), only a record of that topic, queue id and queue offset first_offset + (its entry's
 * index) is taken in place. rocketstore.log.entry_run.decode_run_py is its twin and documents the rules. */
PyObject *
speedups_decode_run(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    struct decode_call c;
    if (decode_call_of(args, nargs, &c) < 0) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[3], &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    if (c.log_size > (long long)view.len) {
        c.log_size = view.len; /* never read past the mapping, whatever the caller says */
    }
    int state = decode_entries(&c, (const unsigned char *)view.buf);
    PyBuffer_Release(&view);
    if (state < 0) {
        return NULL;
    }
    return Py_BuildValue("(nLi)", c.i, c.total_bytes, state);
}

/* The mapping of the index file `state` (a new reference), mapped now by `map_file(file)` when it is
 * not, and its clock bit set; NULL after an error. */
static PyObject *
index_mapping(rs_IndexFileState *state, PyObject *map_file)
{
    PyObject *mm = state->mapping;
    Py_INCREF(state); /* the list may let it go while map_file runs */
    if (mm == NULL || mm == Py_None) {
        mm = PyObject_CallOneArg(map_file, (PyObject *)state);
    } else {
        Py_INCREF(mm);
    }
    rs_state_touch(&state->touched);
    Py_DECREF(state);
    return mm;
}

/* The index walk of IndexService.query: the physical offsets of `key_hash` in [begin, end] over the
 * index files (a list of IndexFile, their headers read through `header_slots`, an unmapped one mapped by
 * `map_file`), newest file first, until `limit` are found or a file begins before `begin`. 1 when done,
 * 0 when a file is out of what the walk takes (the caller declines), -1 after an error. */
static int
query_index(PyObject *index_files, PyObject *header_slots, PyObject *map_file, long long key_hash, long long begin,
            long long end, Py_ssize_t limit, struct offsets *out)
{
    for (Py_ssize_t i = PyList_GET_SIZE(index_files) - 1; i >= 0; i--) {
        if (i >= PyList_GET_SIZE(index_files)) {
            return 0; /* the list changed while a file was mapped */
        }
        PyObject *file = PyList_GET_ITEM(index_files, i);
        if (!PyObject_TypeCheck(file, &rs_IndexFileStateType)) {
            return 0;
        }
        rs_IndexFileState *state = (rs_IndexFileState *)file;
        long long h[INDEX_HEADER_FIELDS], slots = 0;
        int ok = state->header == NULL || !rs_state_int(state->slots, &slots)
                     ? 0 : rs_header_fields(state->header, header_slots, h);
        if (ok != 1) {
            return ok;
        }
        long long fb = h[INDEX_HEADER_BEGINTIMESTAMP_FIELD], fe = h[INDEX_HEADER_ENDTIMESTAMP_FIELD];
        if ((begin < fb && end > fe) || (fb <= begin && begin <= fe) || (fb <= end && end <= fe)) { /* time_matches */
            PyObject *mm = index_mapping(state, map_file);
            Py_buffer view;
            int held = mm == NULL ? -1 : PyObject_GetBuffer(mm, &view, PyBUF_SIMPLE);
            Py_XDECREF(mm);
            if (held < 0) {
                return -1;
            }
            ok = index_walk((const unsigned char *)view.buf, view.len, slots, key_hash, h[INDEX_HEADER_INDEXCOUNT_FIELD],
                            fb, h[INDEX_HEADER_BEGINPHYOFFSET_FIELD], h[INDEX_HEADER_ENDPHYOFFSET_FIELD], begin, end,
                            limit, out);
            PyBuffer_Release(&view);
            if (ok != 1) {
                return ok;
            }
        }
        if (out->count >= limit || fb < begin) {
            break;
        }
    }
    return 1;
}

/* The arguments of one query_records call (borrowed references) and its bounds. */
struct query_call {
    PyTypeObject *cls;
    PyObject *index_files, *log_files, *topic, *key, *map_file, *header_slots;
    long long file_size, max_count, begin, end;
    int any_time;
};

/* The start offset of the commitlog file `file`: 1 with *from set when it is a MappedFile whose start
 * is plain, 0 when not (query_records declines). */
static int
log_file_from(PyObject *file, long long *from)
{
    return PyObject_TypeCheck(file, &rs_MappedFileStateType)
           && rs_state_int(((rs_MappedFileState *)file)->file_from_offset, from);
}

/* The file of `files` (a list of MappedFile, consecutive, of `file_size` bytes each from the first's start)
 * that holds offset `at`, borrowed, with its start and its written bytes; *file NULL when none holds it.
 * 1, or 0 when a file is not a MappedFile with plain fields (the caller declines). */
static int
file_holding(PyObject *files, long long file_size, long long at, rs_MappedFileState **file, long long *from,
             long long *wrote)
{
    *file = NULL;
    Py_ssize_t count = PyList_GET_SIZE(files);
    long long first = 0;
    if (count == 0 || file_size <= 0) {
        return 1;
    }
    if (!log_file_from(PyList_GET_ITEM(files, 0), &first)) {
        return 0;
    }
    if (at < first || (at - first) / file_size >= count) {
        return 1;
    }
    PyObject *found = PyList_GET_ITEM(files, (at - first) / file_size);
    if (!log_file_from(found, from) || !rs_state_int(((rs_MappedFileState *)found)->wrote_position, wrote)) {
        return 0;
    }
    *file = (rs_MappedFileState *)found;
    return 1;
}

/* A view of the mapping of `file` when it is mapped now (its clock bit set): 1, 0 when it is not mapped
 * or its mapping is shorter than its `wrote` bytes, -1 after an error. */
static int
mapped_view(rs_MappedFileState *file, long long wrote, Py_buffer *view)
{
    PyObject *mm = file->mapping;
    if (mm == NULL || mm == Py_None) {
        return 0;
    }
    if (PyObject_GetBuffer(mm, view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (wrote > view->len) {
        PyBuffer_Release(view);
        return 0;
    }
    rs_state_touch(&file->touched);
    return 1;
}

/* The arguments of get_run that are integers, in its order (after cls, cq, and before log_queue). */
struct get_call {
    long long min_logic, queue_id, offset, max_count, max_bytes;
};

/* The window of a plain get in the consume queue `cq`: *lo and *hi its bounds (queue offsets), *want the
 * entries from g->offset it reads; 1, or 0 when the get is not the plain case (the caller declines). */
static int
get_window(PyObject *cq_files, const struct get_call *g, long long *lo, long long *hi, long long *want)
{
    Py_ssize_t count = PyList_GET_SIZE(cq_files);
    long long first_from = 0, last_from = 0, last_wrote = 0;
    if (count == 0 || !log_file_from(PyList_GET_ITEM(cq_files, 0), &first_from)
        || !log_file_from(PyList_GET_ITEM(cq_files, count - 1), &last_from)
        || !rs_state_int(((rs_MappedFileState *)PyList_GET_ITEM(cq_files, count - 1))->wrote_position, &last_wrote)
        || last_from > LLONG_MAX - last_wrote) {
        return 0;
    }
    *hi = (last_from + last_wrote) / UNIT_SIZE;
    *lo = (g->min_logic > first_from ? g->min_logic : first_from) / UNIT_SIZE;
    if (g->offset < *lo || g->offset >= *hi) {
        return 0;
    }
    *want = *hi - g->offset < g->max_count ? *hi - g->offset : g->max_count;
    return 1;
}

/* The messages of the plain get `g` (entries `units`, `want` of them) from the commitlog files `log_files`:
 * a new list of `want` messages, Py_None (a new reference) when an entry does not give its message there,
 * NULL after an error. */
static PyObject *
get_messages(PyTypeObject *cls, const unsigned char *units, long long want, PyObject *log_files, PyObject *topic,
             const struct get_call *g)
{
    long long phy = read_be(units + CQ_COMMITLOG_PHYSICAL_OFFSET_POS, CQ_COMMITLOG_PHYSICAL_OFFSET_WIDTH);
    long long log_from = 0, log_wrote = 0, log_file_size = 0;
    rs_MappedFileState *log_file = NULL;
    Py_buffer log;
    PyObject *first = PyList_GET_SIZE(log_files) > 0 ? PyList_GET_ITEM(log_files, 0) : NULL;
    int ok = first != NULL && PyObject_TypeCheck(first, &rs_MappedFileStateType)
             && rs_state_int(((rs_MappedFileState *)first)->file_size, &log_file_size)
             && file_holding(log_files, log_file_size, phy, &log_file, &log_from, &log_wrote) && log_file != NULL;
    ok = ok ? mapped_view(log_file, log_wrote, &log) : 0;
    if (ok <= 0) {
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    }
    struct decode_call c = {.cls = cls, .units = units, .unit_count = (Py_ssize_t)want, .wanted = Py_None,
                            .messages = PyList_New(0), .topic = topic, .queue_id = g->queue_id,
                            .first_offset = g->offset, .log_start = log_from, .log_size = log_wrote,
                            .total_bytes = 0, .max_bytes = g->max_bytes, .i = 0, .max_count = (Py_ssize_t)want};
    int state = c.messages == NULL ? -1 : decode_entries(&c, (const unsigned char *)log.buf);
    PyBuffer_Release(&log);
    if (state < 0) {
        Py_XDECREF(c.messages);
        return NULL;
    }
    if (PyList_GET_SIZE(c.messages) != want) {
        Py_DECREF(c.messages);
        return Py_NewRef(Py_None);
    }
    return c.messages;
}

/* get_run(cls, cq, min_logic, queue_id, offset, max_count, max_bytes, log_queue, topic)
 * -> (messages, min_offset, max_offset) or None: ReadPath.get's plain case, rocketstore.log.entry_run.get_run_py
 * its twin, which documents the rules. */
PyObject *
speedups_get_run(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "get_run takes nine arguments");
        return NULL;
    }
    if (rs_check_message_class(args[0]) < 0) {
        return NULL;
    }
    struct get_call g;
    PyObject *cq = args[1], *log_queue = args[7], *topic = args[8];
    if (!PyObject_TypeCheck(cq, &rs_ConsumeQueueStateType) || !PyObject_TypeCheck(log_queue, &rs_FileQueueStateType)
        || !PyUnicode_Check(topic) || !rs_state_int(args[2], &g.min_logic) || !rs_state_int(args[3], &g.queue_id)
        || !rs_state_int(args[4], &g.offset) || !rs_state_int(args[5], &g.max_count)
        || !rs_state_int(args[6], &g.max_bytes)) {
        Py_RETURN_NONE;
    }
    PyObject *cq_queue = ((rs_ConsumeQueueState *)cq)->queue;
    if (cq_queue == NULL || !PyObject_TypeCheck(cq_queue, &rs_FileQueueStateType)) {
        Py_RETURN_NONE;
    }
    PyObject *cq_files = ((rs_FileQueueState *)cq_queue)->files, *log_files = ((rs_FileQueueState *)log_queue)->files;
    long long lo = 0, hi = 0, want = 0, cq_file_size = 0, from = 0, wrote = 0;
    if (cq_files == NULL || log_files == NULL || !PyList_Check(cq_files) || !PyList_Check(log_files)
        || g.max_count < 1 || g.max_count > JAVA_INT_MAX || g.max_bytes < 0 || g.min_logic < 0 || g.offset < 0
        || g.offset > LLONG_MAX / UNIT_SIZE || !get_window(cq_files, &g, &lo, &hi, &want)
        || !rs_state_int(((rs_MappedFileState *)PyList_GET_ITEM(cq_files, 0))->file_size, &cq_file_size)) {
        Py_RETURN_NONE;
    }
    rs_MappedFileState *cq_file = NULL;
    Py_buffer entries;
    long long at = g.offset * UNIT_SIZE;
    int ok = file_holding(cq_files, cq_file_size, at, &cq_file, &from, &wrote) && cq_file != NULL
             && at - from + want * UNIT_SIZE <= wrote;
    ok = ok ? mapped_view(cq_file, wrote, &entries) : 0;
    if (ok <= 0) {
        return ok < 0 ? NULL : Py_NewRef(Py_None);
    }
    PyObject *messages = get_messages((PyTypeObject *)args[0], (const unsigned char *)entries.buf + (at - from), want,
                                      log_files, topic, &g);
    PyBuffer_Release(&entries);
    if (messages == NULL || messages == Py_None) {
        return messages;
    }
    return Py_BuildValue("(NLL)", messages, lo, hi);
}

/* The record at `phy` of the commitlog files q->log_files (a list of MappedFile of q->file_size bytes),
 * as a q->cls in *message (a new reference, NULL when no whole record starts there): 1, 0 when a file
 * is not a MappedFile with plain fields (query_records declines), -1 after an error. A file not mapped
 * now is mapped by q->map_file(file). */
static int
log_record(const struct query_call *q, long long phy, PyObject **message)
{
    *message = NULL;
    rs_MappedFileState *file = NULL;
    long long from = 0, wrote = 0;
    if (!file_holding(q->log_files, q->file_size, phy, &file, &from, &wrote)) {
        return 0;
    }
    if (file == NULL || phy - from < 0 || phy - from > wrote - 8) {
        return 1; /* out of the log */
    }
    PyObject *mm = file->mapping;
    if (mm == NULL || mm == Py_None) {
        mm = PyObject_CallOneArg(q->map_file, (PyObject *)file);
    } else {
        Py_INCREF(mm);
        rs_state_touch(&file->touched);
    }
    Py_buffer view;
    int held = mm == NULL ? -1 : PyObject_GetBuffer(mm, &view, PyBUF_SIMPLE);
    Py_XDECREF(mm);
    if (held < 0) {
        return -1;
    }
    if (wrote <= view.len) {
        *message = rs_record_in(q->cls, (const unsigned char *)view.buf + (phy - from), wrote - (phy - from), phy, NULL);
    }
    PyBuffer_Release(&view);
    return *message != NULL || !PyErr_Occurred() ? 1 : -1;
}

/* The newest `max_count` messages of `found` ({phy: message}) in ascending phy order, as a new list
 * (read_path.newest_ascending, the ordering `query` gives query_py's answer). */
static PyObject *
newest_ascending(PyObject *found, Py_ssize_t max_count)
{
    if (PyDict_GET_SIZE(found) <= 1) {
        return PyDict_Values(found);
    }
    PyObject *keys = PyDict_Keys(found);
    if (keys == NULL || PyList_Sort(keys) < 0) {
        Py_XDECREF(keys);
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(keys), first = count > max_count ? count - max_count : 0;
    PyObject *out = PyList_New(count - first);
    for (Py_ssize_t i = first; out != NULL && i < count; i++) {
        PyObject *message = PyDict_GetItemWithError(found, PyList_GET_ITEM(keys, i)); /* borrowed */
        if (message == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "query_records: a phy offset left its dict");
            }
            Py_CLEAR(out);
            break;
        }
        PyList_SET_ITEM(out, i - first, Py_NewRef(message));
    }
    Py_DECREF(keys);
    return out;
}

/* query_records' arguments into `q`: 1 when it takes them, 0 when query_py answers (a count or bound that
 * is not an exact int or is beyond int64, a count below 1, a text not ready), -1 with TypeError (or the
 * error of reading one). */
static int
query_call_of(PyObject *const *args, Py_ssize_t nargs, struct query_call *q)
{
    if (nargs != 12 || !PyType_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[2])
        || !PyUnicode_Check(args[4]) || !PyUnicode_Check(args[5]) || !PyCallable_Check(args[10])
        || !PyTuple_Check(args[11])) {
        PyErr_SetString(PyExc_TypeError, "query_records(cls, index_files, log_files, log_file_size, topic, key, "
                                         "max_count, begin, end, any_time, map_file, header_slots): a class, two "
                                         "lists, an int, two str, a callable and a tuple");
        return -1;
    }
    if (rs_check_message_class(args[0]) < 0) {
        return -1;
    }
    q->cls = (PyTypeObject *)args[0];
    q->index_files = args[1], q->log_files = args[2], q->topic = args[4], q->key = args[5], q->map_file = args[10];
    q->header_slots = args[11];
    if (!PyLong_Check(args[3]) || !PyLong_CheckExact(args[6]) || !PyLong_CheckExact(args[7])
        || !PyLong_CheckExact(args[8])) {
        return 0; /* a count or bound of another type (a bool too): ReadPath.query checks it */
    }
    int overflow = 0;
    q->file_size = PyLong_AsLongLong(args[3]);
    q->max_count = PyLong_AsLongLongAndOverflow(args[6], &overflow);
    int begin_over = 0, end_over = 0;
    q->begin = PyLong_AsLongLongAndOverflow(args[7], &begin_over);
    q->end = PyLong_AsLongLongAndOverflow(args[8], &end_over);
    if (PyErr_Occurred()) {
        return -1;
    }
    if (overflow || begin_over || end_over || q->file_size <= 0 || q->max_count < 1
        || q->max_count > PY_SSIZE_T_MAX / 8 || ready(q->topic) < 0 || ready(q->key) < 0) {
        return PyErr_Occurred() ? -1 : 0;
    }
    q->any_time = PyObject_IsTrue(args[9]);
    return q->any_time < 0 ? -1 : 1;
}

/* Whether the record `message` answers the query: its topic, store time (unless any time), then the key
 * (the index holds hashes). 1 keep, 0 not, -1 after an error, -2 when it is not a record's bytes (query_py
 * answers). */
static int
query_keeps(const struct query_call *q, PyObject *message)
{
    PyObject *its_topic = rs_message_topic(message); /* rs_record_in made it: both fields are set */
    int keep = its_topic != NULL && PyUnicode_Check(its_topic) && PyUnicode_Compare(its_topic, q->topic) == 0;
    if (keep == 1 && !q->any_time) {
        PyObject *raw = rs_message_raw(message);
        keep = 0;
        if (raw != NULL && PyBytes_Check(raw) && PyBytes_GET_SIZE(raw) >= MIN_RECORD_SIZE) {
            const unsigned char *at = (const unsigned char *)PyBytes_AS_STRING(raw);
            long long stored_at = FIXED_HEAD_SIZE + REC_AFTER_BORN_IP_STORETIMESTAMP_POS
                                  + ((read_be(at + REC_SYSFLAG_POS, REC_SYSFLAG_WIDTH) & BORN_V6) ? IPV6_WIDTH : IPV4_WIDTH);
            if (stored_at + REC_STORETIMESTAMP_WIDTH <= PyBytes_GET_SIZE(raw)) { /* rs_record_in checked the layout */
                long long stored = read_be(at + stored_at, REC_STORETIMESTAMP_WIDTH);
                keep = q->begin <= stored && stored <= q->end;
            } else {
                keep = -2;
            }
        } else {
            keep = -2; /* not a record's bytes: the Python way */
        }
    }
    if (keep == 1) {
        PyObject *carries = rs_message_carries_key(message, q->key);
        keep = carries == NULL ? -1 : carries == Py_True;
        Py_XDECREF(carries);
    }
    return keep;
}

/* The records at `offsets` that answer the query, put into `found` ({phy: message}, owned by the caller):
 * 0, -1 after an error, -2 when query_py answers (a record it does not read). */
static int
query_found_of(const struct query_call *q, const struct offsets *offsets, PyObject *found)
{
    for (Py_ssize_t i = 0; i < offsets->count; i++) {
        PyObject *phy = PyLong_FromLongLong(offsets->items[i]);
        int seen = phy == NULL ? -1 : PyDict_Contains(found, phy);
        PyObject *message = NULL;
        int read = seen == 0 ? log_record(q, offsets->items[i], &message) : 1;
        int keep = read != 1 ? read - 2 : message != NULL ? query_keeps(q, message) : 0; /* declined: -2 */
        if (keep == 1 && PyDict_SetItem(found, phy, message) < 0) {
            keep = -1;
        }
        int failed = seen < 0 || keep == -1 || read < 0 ? -1 : keep == -2 ? -2 : 0;
        Py_XDECREF(phy);
        Py_XDECREF(message);
        if (failed < 0) {
            return failed;
        }
    }
    return 0;
}

/* query_records(cls, index_files, log_files, log_file_size, topic, key, max_count, begin, end, any_time,
 * map_file, header_slots) -> [message] or None: the loop of MessageStore.query_py over the index files (IndexService.files)
 * and the commitlog files (MappedFileQueue.files, each `log_file_size` bytes): the offsets the index
 * gives for `key` in [begin - 1 s, end], each record read as a `cls` (a StoredMessage) and kept when
 * its topic is `topic`, its store time in [begin, end] (unless `any_time` is true) and it carries
 * `key`; more offsets asked for until `max_count` are kept or the index has no more. The messages come
 * as `query` answers, the newest `max_count` in ascending phy order (newest_ascending). A file not
 * mapped now is mapped by calling `map_file(file)`, which answers its mapping; an index file's header is
 * read through `header_slots`, IndexHeader's six slots in file order.
 * None, having read nothing that matters, when an index file or a text is beyond what it takes:
 * query_py answers then. */
PyObject *
speedups_query_records(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    struct query_call q;
    int got = query_call_of(args, nargs, &q);
    if (got <= 0) {
        return got < 0 ? NULL : Py_NewRef(Py_None);
    }
    /* index times: whole seconds after the file's begin; any time: none filtered (a record whose store time
     * was damaged, which no CRC covers, misplaces the times of its whole index file) */
    long long widened = q.any_time ? LLONG_MIN : q.begin <= 1000 ? 0 : q.begin - 1000;
    long long key_hash = index_hash_of(hash_units(31u * hash_units(0, q.topic) + '#', q.key));
    struct offsets offsets;
    offsets_init(&offsets);
    PyObject *found = NULL;
    Py_ssize_t limit = (Py_ssize_t)q.max_count;
    for (;;) {
        offsets.count = 0;
        int walked = query_index(q.index_files, q.header_slots, q.map_file, key_hash, widened, q.end, limit, &offsets);
        if (walked != 1) {
            offsets_release(&offsets);
            Py_XDECREF(found);
            return walked < 0 ? NULL : Py_NewRef(Py_None);
        }
        Py_XSETREF(found, PyDict_New());
        if (found == NULL) {
            break;
        }
        int kept = query_found_of(&q, &offsets, found);
        if (kept < 0) {
            Py_CLEAR(found);
            if (kept == -2) {
                offsets_release(&offsets);
                Py_RETURN_NONE;
            }
            break;
        }
        if (PyDict_GET_SIZE(found) >= q.max_count || offsets.count < limit || limit > PY_SSIZE_T_MAX / 8) {
            break;
        }
        limit *= 4;
    }
    offsets_release(&offsets);
    if (found == NULL) {
        return NULL;
    }
    PyObject *ordered = newest_ascending(found, (Py_ssize_t)q.max_count);
    Py_DECREF(found);
    return ordered;
}

static PyMemberDef consume_queue_members[] = {
    STATE_MEMBER(rs_ConsumeQueueState, "queue", queue),
    STATE_MEMBER(rs_ConsumeQueueState, "max_physic_offset", max_physic_offset),
    {NULL, 0, 0, 0, NULL},
};

STATE_TYPE(rs_ConsumeQueueStateType, "rocketstore._speedups.ConsumeQueueState", rs_ConsumeQueueState,
           "The hot state of a ConsumeQueue (its base class): its MappedFileQueue and the end of the record "
           "of its last entry, read and written by the kernels without attribute lookups.",
           consume_queue_members);

static PyMemberDef index_file_members[] = {
    STATE_MEMBER(rs_IndexFileState, "_mm", mapping),
    STATE_MEMBER(rs_IndexFileState, "header", header),
    STATE_MEMBER(rs_IndexFileState, "slots", slots),
    STATE_MEMBER(rs_IndexFileState, "max_entries", max_entries),
    STATE_MEMBER(rs_IndexFileState, "touched", touched),
    {NULL, 0, 0, 0, NULL},
};

STATE_TYPE(rs_IndexFileStateType, "rocketstore._speedups.IndexFileState", rs_IndexFileState,
           "The hot state of an IndexFile (its base class): mapping, header, geometry and the mapping "
           "budget's clock bit, read and written by the kernels without attribute lookups.",
           index_file_members);
