/* samzapy._speedups: optional C accelerators for two per-message paths: KV, the pair every
 * keyed message is, and the origins of records on intermediate streams (further below).
 *
 * KV is a typing.NamedTuple (samzapy/api/envelope.py), and making one goes through the
 * class's Python __new__: about 2,700 more CPU instructions than a plain tuple on CPython
 * 3.12, most of what a filter/map application costs beyond the same task class.
 * accelerate_pair() gives the class a vectorcall constructor (PyTypeObject.tp_vectorcall,
 * which CPython consults when a class is called and which subclasses never inherit): a call
 * with two positional arguments allocates the tuple subclass and fills it, exactly what
 * __new__ makes (``tuple.__new__(cls, (key, value))``); any other call goes the usual way
 * (type.__call__, so keywords, a wrong count and their errors are Python's own), as does
 * every call once the class's __new__ or __init__ was replaced. Everything else about the
 * class (fields, _replace, _asdict, pickling, repr) stays the NamedTuple's.
 *
 * Built when a C compiler is there (setup.py marks the extension optional); without it,
 * or with SAMZAPY_NO_SPEEDUPS=1, KV is the plain NamedTuple and behaves the same.
 * tests/unit/api/test_kv_speedups.py holds both to the same behaviour.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>

/* The classes accelerated, each with its own __new__ as it was then and the type version at
 * which that was last checked. A class changed since (KV.__new__ or KV.__init__ replaced, as
 * unittest.mock.patch does) must be called the usual way: CPython keeps tp_vectorcall on a
 * heap type whatever is assigned to it. Any change to a class changes its tp_version_tag (so
 * does CPython itself: pickling caches __slotnames__ on the class), so a changed tag means a
 * check of the class's __new__ and __init__, and the fast path again if they are unchanged. */
#define MAX_PAIRS 16

typedef struct {
    PyTypeObject *type;
    PyObject *new_;
    unsigned int version;
} Pair;

static Pair pairs[MAX_PAIRS];
static int pair_count = 0;

static PyObject *dunder_new = NULL;

static Pair *
pair_of(PyTypeObject *tp)
{
    for (int i = 0; i < pair_count; i++) {
        if (pairs[i].type == tp) {
            return &pairs[i];
        }
    }
    return NULL;
}

/* Whether a call of tp may skip its __new__: the class's __new__ and __init__ are still those
 * it was accelerated with. */
static int
still_plain(PyTypeObject *tp)
{
    Pair *pair = pair_of(tp);
    if (pair == NULL) {
        return 0;
    }
    if (tp->tp_version_tag != 0 && tp->tp_version_tag == pair->version) {
        return 1;
    }
    if (tp->tp_init != PyBaseObject_Type.tp_init
        || PyDict_GetItemWithError(tp->tp_dict, dunder_new) != pair->new_) {
        PyErr_Clear();
        return 0;
    }
    /* Unchanged: a look-up through the type assigns it a version tag again. */
    PyObject *found = PyObject_GetAttr((PyObject *)tp, dunder_new);
    if (found == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(found);
    pair->version = tp->tp_version_tag;
    return 1;
}

static PyObject *
pair_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyTypeObject *tp = (PyTypeObject *)type;
    if (nargs == 2 && kwnames == NULL && still_plain(tp)) {
        /* As tuple's own subtype constructor does: allocate, then set the items. */
        PyObject *self = tp->tp_alloc(tp, 2);
        if (self == NULL) {
            return NULL;
        }
        Py_INCREF(args[0]);
        PyTuple_SET_ITEM(self, 0, args[0]);
        Py_INCREF(args[1]);
        PyTuple_SET_ITEM(self, 1, args[1]);
        return self;
    }
    /* Any other call: type.__call__ with a tuple and a dict, as without the accelerator. */
    PyObject *positional = PyTuple_New(nargs);
    if (positional == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(positional, i, args[i]);
    }
    PyObject *keywords = NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        keywords = PyDict_New();
        if (keywords == NULL) {
            Py_DECREF(positional);
            return NULL;
        }
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            if (PyDict_SetItem(keywords, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) {
                Py_DECREF(positional);
                Py_DECREF(keywords);
                return NULL;
            }
        }
    }
    PyObject *result = PyType_Type.tp_call(type, positional, keywords);
    Py_DECREF(positional);
    Py_XDECREF(keywords);
    return result;
}

static PyObject *
accelerate_pair(PyObject *module, PyObject *cls)
{
    (void)module;
    if (!PyType_Check(cls) || !PyType_CheckExact(Py_TYPE(cls))
        || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "accelerate_pair takes a class whose metaclass is type and "
                                         "whose base is tuple (a NamedTuple of two fields)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    /* Only a NamedTuple's shape: a heap type laid out as a tuple (no __dict__ or slots of its
     * own), allocated by the generic allocator. */
    if (!(tp->tp_flags & Py_TPFLAGS_HEAPTYPE) || tp->tp_basicsize != PyTuple_Type.tp_basicsize
        || tp->tp_itemsize != PyTuple_Type.tp_itemsize || tp->tp_dictoffset != 0
        || tp->tp_alloc != PyType_GenericAlloc) {
        PyErr_Format(PyExc_TypeError, "accelerate_pair: %s is not laid out as a plain tuple",
                     tp->tp_name);
        return NULL;
    }
    /* A NamedTuple's own __new__ (a subclass of one, with a __new__ of its own that checks
     * its arguments, say, is refused: the fast path would skip that check). */
    PyObject *new_ = PyDict_GetItemWithError(tp->tp_dict, dunder_new);
    if (new_ == NULL || tp->tp_base != &PyTuple_Type || tp->tp_init != PyBaseObject_Type.tp_init) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError,
                         "accelerate_pair: %s is not a NamedTuple (its base tuple, a __new__ of its "
                         "own and no __init__)", tp->tp_name);
        }
        return NULL;
    }
    if (tp->tp_vectorcall == pair_vectorcall) {
        Py_RETURN_NONE;
    }
    if (tp->tp_vectorcall != NULL) {
        PyErr_Format(PyExc_TypeError, "accelerate_pair: %s already has a vectorcall constructor",
                     tp->tp_name);
        return NULL;
    }
    if (pair_count == MAX_PAIRS) {
        PyErr_SetString(PyExc_RuntimeError, "accelerate_pair: too many classes accelerated");
        return NULL;
    }
    /* The class and its __new__ are kept for the life of the process, as the class's
     * tp_vectorcall refers to this module. */
    Py_INCREF(cls);
    Py_INCREF(new_);
    pairs[pair_count].type = tp;
    pairs[pair_count].new_ = new_;
    pairs[pair_count].version = 0;
    pair_count++;
    tp->tp_vectorcall = pair_vectorcall;
    Py_RETURN_NONE;
}

static PyObject *
is_accelerated(PyObject *module, PyObject *cls)
{
    (void)module;
    if (!PyType_Check(cls)) {
        Py_RETURN_FALSE;
    }
    PyTypeObject *tp = (PyTypeObject *)cls;
    return PyBool_FromLong(tp->tp_vectorcall == pair_vectorcall && still_plain(tp));
}

/* -- Framed records (samzapy/control/): their origins tagged and admitted, their frames read --
 *
 * Each record a task writes to an intermediate stream carries its origin, and each one read
 * back is checked against the positions applied (origins.py). Both are per message, and in
 * Python cost about a tenth of a two-stage pass-through. origin_tagger() and origin_admitter()
 * make callables with the signatures of WriterOrigins.tag and ReaderOrigins.admit that take
 * the common case in C and hand any other call to the Python method (``fallback``), which
 * stays the one definition of what happens; frame_decoder() does the same for every framed
 * record read (wire.decode_timed):
 *
 * - tag(ssp, offset, ordinal, payload, floor=None): with no floor, a prefix made already for
 *   ssp, an offset of plain ASCII digits below 2**64, an ordinal below 2**32 and bytes, the
 *   record is wire.frame_with_compact_origin(prefix, int(offset), ordinal, payload): type 5,
 *   the prefix's source, a byte of sizes and the epoch, offset and ordinal in as many
 *   big-endian bytes as they need, when the epoch and the ordinal are below 2**24; else type 3,
 *   prefix + offset (8 bytes) + ordinal (4 bytes, both big-endian) + payload;
 * - admit(ssp, record): a type-3 or type-5 record (one call in flight) of a source whose last
 *   position applied is bytes below the record's (a type-5 record's read into type 3's fixed
 *   form, 16 bytes) is new: its position is noted and True returned. The
 *   first record of a source, a copy (False, counted by the Python method), type 4 and
 *   anything unusual go to the fallback. The C path changes nothing before it decides, so the
 *   fallback sees the state as it was. */

#define ORIGIN_PREFIX_SIZE 13 /* the type byte, the source (8) and the epoch (4) */
#define ORIGIN_SOURCE_AT 1
#define ORIGIN_SOURCE_SIZE 8
#define ORIGIN_POSITION_AT 9
#define ORIGIN_POSITION_SIZE 16 /* the epoch (4), the offset (8) and the ordinal (4) */
#define ORIGIN_END 25
#define ORIGIN_TYPE 3           /* USER_MESSAGE_WITH_ORIGIN */
#define COMPACT_TYPE 5          /* USER_MESSAGE_WITH_COMPACT_ORIGIN */
#define COMPACT_SIZES_AT 9      /* where a type-5 record's sizes byte is */
#define COMPACT_LIMIT (1ULL << 24) /* a type-5 record's epochs and ordinals stay below it */
#define EVENT_TIME_FLAG 0x80

/* The result, or NULL: with an error set, that error; without, take the fallback. */
typedef PyObject *(*fast_path)(PyObject *state, PyObject *const *args, Py_ssize_t nargs);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    fast_path fast;
    PyObject *state;    /* the dict the fast path reads */
    PyObject *fallback; /* the Python method */
} FastCall;

static PyObject *
fast_call(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastCall *self = (FastCall *)callable;
    if (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) {
        PyObject *result = self->fast(self->state, args, PyVectorcall_NARGS(nargsf));
        if (result != NULL || PyErr_Occurred()) {
            return result;
        }
    }
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

static int
fast_traverse(FastCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->state);
    Py_VISIT(self->fallback);
    return 0;
}

static int
fast_clear(FastCall *self)
{
    Py_CLEAR(self->state);
    Py_CLEAR(self->fallback);
    return 0;
}

static void
fast_dealloc(FastCall *self)
{
    PyObject_GC_UnTrack(self);
    fast_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "samzapy._speedups.FastCall",
    .tp_doc = "A call taking its common case in C, any other through its Python fallback.",
    .tp_basicsize = sizeof(FastCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(FastCall, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_traverse = (traverseproc)fast_traverse,
    .tp_clear = (inquiry)fast_clear,
    .tp_dealloc = (destructor)fast_dealloc,
};

static PyObject *
new_fast_call(PyObject *args, fast_path fast, const char *name)
{
    PyObject *state, *fallback;
    if (!PyArg_ParseTuple(args, "O!O:origin_call", &PyDict_Type, &state, &fallback)) {
        return NULL;
    }
    if (!PyDict_CheckExact(state) || !PyCallable_Check(fallback)) {
        /* A dict subclass's own __getitem__ or __missing__ would be skipped by the look-ups. */
        PyErr_Format(PyExc_TypeError, "%s takes a dict (not a subclass) and a callable", name);
        return NULL;
    }
    FastCall *self = PyObject_GC_New(FastCall, &FastCallType);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = fast_call;
    self->fast = fast;
    Py_INCREF(state);
    self->state = state;
    Py_INCREF(fallback);
    self->fallback = fallback;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* How many bytes ``number`` takes big-endian without leading zero bytes (none for 0). */
static int
bytes_of(unsigned long long number)
{
    int size = 0;
    while (number != 0) {
        size++;
        number >>= 8;
    }
    return size;
}

/* ``number``'s low ``size`` bytes, big-endian, at ``out``. */
static void
put_big_endian(unsigned char *out, unsigned long long number, int size)
{
    for (int i = size - 1; i >= 0; i--) {
        out[i] = (unsigned char)(number & 0xFF);
        number >>= 8;
    }
}

/* A type-5 record's sizes (offset, epoch, ordinal) and where its numbers end, or 0 when the
 * sizes byte is no such byte or the record is cut short. */
static Py_ssize_t
compact_end(const unsigned char *record, Py_ssize_t size, int *epoch, int *offset, int *ordinal)
{
    if (size <= COMPACT_SIZES_AT) {
        return 0;
    }
    unsigned int sizes = record[COMPACT_SIZES_AT];
    *offset = (int)(sizes >> 4);
    *epoch = (int)((sizes >> 2) & 3);
    *ordinal = (int)(sizes & 3);
    Py_ssize_t end = COMPACT_SIZES_AT + 1 + *epoch + *offset + *ordinal;
    return (*offset > 8 || size < end) ? 0 : end;
}

/* args: ssp, offset, ordinal, payload[, floor]; state: WriterOrigins' prefixes per ssp. */
static PyObject *
tag_fast(PyObject *prefixes, PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 4 && nargs != 5) || (nargs == 5 && args[4] != Py_None)) {
        return NULL;
    }
    PyObject *offset = args[1], *ordinal = args[2], *payload = args[3];
    if (!PyUnicode_CheckExact(offset) || !PyUnicode_IS_ASCII(offset) || !PyLong_CheckExact(ordinal)
        || !PyBytes_CheckExact(payload)) {
        return NULL;
    }
    PyObject *prefix = PyDict_GetItemWithError(prefixes, args[0]); /* borrowed */
    if (prefix == NULL || !PyBytes_CheckExact(prefix)
        || PyBytes_GET_SIZE(prefix) != ORIGIN_PREFIX_SIZE) {
        return NULL; /* an error from the look-up (an unhashable ssp) stays set */
    }
    Py_ssize_t length = PyUnicode_GET_LENGTH(offset);
    if (length < 1 || length > 20) {
        return NULL;
    }
    const Py_UCS1 *digits = PyUnicode_1BYTE_DATA(offset);
    unsigned long long number = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        unsigned int digit = (unsigned int)digits[i] - '0';
        if (digit > 9 || number > (ULLONG_MAX - digit) / 10) {
            return NULL;
        }
        number = number * 10 + digit;
    }
    int overflow = 0;
    long long count = PyLong_AsLongLongAndOverflow(ordinal, &overflow);
    if (overflow != 0 || count < 0 || count > 0xFFFFFFFFLL) {
        return NULL;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(payload);
    const unsigned char *head = (const unsigned char *)PyBytes_AS_STRING(prefix);
    unsigned long long epoch = 0;
    for (int i = ORIGIN_POSITION_AT; i < ORIGIN_PREFIX_SIZE; i++) {
        epoch = (epoch << 8) | head[i];
    }
    if (epoch < COMPACT_LIMIT && (unsigned long long)count < COMPACT_LIMIT) {
        int epoch_size = bytes_of(epoch), offset_size = bytes_of(number);
        int ordinal_size = bytes_of((unsigned long long)count);
        Py_ssize_t header = COMPACT_SIZES_AT + 1 + epoch_size + offset_size + ordinal_size;
        PyObject *record = PyBytes_FromStringAndSize(NULL, header + size);
        if (record == NULL) {
            return NULL;
        }
        unsigned char *out = (unsigned char *)PyBytes_AS_STRING(record);
        out[0] = COMPACT_TYPE;
        memcpy(out + ORIGIN_SOURCE_AT, head + ORIGIN_SOURCE_AT, ORIGIN_SOURCE_SIZE);
        out[COMPACT_SIZES_AT] = (unsigned char)(offset_size << 4 | epoch_size << 2 | ordinal_size);
        out += COMPACT_SIZES_AT + 1;
        put_big_endian(out, epoch, epoch_size);
        out += epoch_size;
        put_big_endian(out, number, offset_size);
        out += offset_size;
        put_big_endian(out, (unsigned long long)count, ordinal_size);
        out += ordinal_size;
        memcpy(out, PyBytes_AS_STRING(payload), size);
        return record;
    }
    PyObject *record = PyBytes_FromStringAndSize(NULL, ORIGIN_PREFIX_SIZE + 12 + size);
    if (record == NULL) {
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(record);
    memcpy(out, head, ORIGIN_PREFIX_SIZE);
    out += ORIGIN_PREFIX_SIZE;
    put_big_endian(out, number, 8);
    out += 8;
    put_big_endian(out, (unsigned long long)count, 4);
    out += 4;
    memcpy(out, PyBytes_AS_STRING(payload), size);
    return record;
}

/* admit_fast's work on the partition's dict, ``sources``, which the caller holds: the
 * record's source, and its position in type 3's form (ORIGIN_POSITION_SIZE bytes at ``at``). */
static PyObject *
admit_into(PyObject *sources, const unsigned char *record, const unsigned char *at)
{
    PyObject *source = PyBytes_FromStringAndSize((const char *)record + ORIGIN_SOURCE_AT,
                                                 ORIGIN_SOURCE_SIZE);
    if (source == NULL) {
        return NULL;
    }
    PyObject *last = PyDict_GetItemWithError(sources, source); /* borrowed */
    if (last == NULL || !PyBytes_CheckExact(last)) {
        Py_DECREF(source);
        return NULL;
    }
    /* at > last, as bytes compare: the first difference, else the longer one. */
    Py_ssize_t last_size = PyBytes_GET_SIZE(last);
    Py_ssize_t common = last_size < ORIGIN_POSITION_SIZE ? last_size : ORIGIN_POSITION_SIZE;
    int order = memcmp(at, PyBytes_AS_STRING(last), (size_t)common);
    if (order < 0 || (order == 0 && ORIGIN_POSITION_SIZE <= last_size)) {
        Py_DECREF(source);
        return NULL; /* a copy: the fallback drops and counts it */
    }
    PyObject *position = PyBytes_FromStringAndSize((const char *)at, ORIGIN_POSITION_SIZE);
    if (position == NULL) {
        Py_DECREF(source);
        return NULL;
    }
    int failed = PyDict_SetItem(sources, source, position);
    Py_DECREF(source);
    Py_DECREF(position);
    if (failed < 0) {
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* args: ssp, record; state: ReaderOrigins' applied positions, per ssp then per source. */
static PyObject *
admit_fast(PyObject *applied, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_CheckExact(args[1]) || PyBytes_GET_SIZE(args[1]) < 1) {
        return NULL;
    }
    const unsigned char *record = (const unsigned char *)PyBytes_AS_STRING(args[1]);
    unsigned int kind = record[0] & ~EVENT_TIME_FLAG & 0xFF;
    unsigned char compact[ORIGIN_POSITION_SIZE];
    const unsigned char *at = record + ORIGIN_POSITION_AT;
    if (kind == COMPACT_TYPE) {
        int epoch_size, offset_size, ordinal_size;
        if (compact_end(record, PyBytes_GET_SIZE(args[1]), &epoch_size, &offset_size,
                        &ordinal_size) == 0) {
            return NULL;
        }
        /* Read into type 3's form: epoch (4 bytes), offset (8), ordinal (4), zero-filled. */
        memset(compact, 0, sizeof compact);
        const unsigned char *from = record + COMPACT_SIZES_AT + 1;
        memcpy(compact + 4 - epoch_size, from, (size_t)epoch_size);
        from += epoch_size;
        memcpy(compact + 12 - offset_size, from, (size_t)offset_size);
        from += offset_size;
        memcpy(compact + 16 - ordinal_size, from, (size_t)ordinal_size);
        at = compact;
    } else if (kind != ORIGIN_TYPE || PyBytes_GET_SIZE(args[1]) < ORIGIN_END) {
        return NULL;
    }
    PyObject *sources = PyDict_GetItemWithError(applied, args[0]); /* borrowed */
    if (sources == NULL || !PyDict_CheckExact(sources)) {
        return NULL;
    }
    /* Held for the call: looking the source up and setting it compare it with the dict's
     * keys, and a key that is not bytes runs Python code there, which may take the dict out
     * of ``applied`` (the Python method holds it in a local variable likewise). */
    Py_INCREF(sources);
    PyObject *result = admit_into(sources, record, at);
    Py_DECREF(sources);
    return result;
}

/* args: record; state: wire.py's _BODY_AT (a user message's type byte -> where its body
 * starts). A user message as bytes, long enough for its type: (type, body, event time or
 * None), what decode_timed returns; anything else (a control message, another object, a
 * record cut short) goes to decode_timed itself, errors included. */
static PyObject *
decode_fast(PyObject *body_at, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1 || !PyBytes_CheckExact(args[0]) || PyBytes_GET_SIZE(args[0]) < 1) {
        return NULL;
    }
    const unsigned char *record = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    unsigned int kind = record[0];
    Py_ssize_t end;
    if ((kind & ~EVENT_TIME_FLAG & 0xFF) == COMPACT_TYPE) {
        /* Its body starts after its numbers (and its event time); it reads as type 3. */
        int epoch_size, offset_size, ordinal_size;
        end = compact_end(record, size, &epoch_size, &offset_size, &ordinal_size);
        if (end == 0) {
            return NULL;
        }
        if (kind & EVENT_TIME_FLAG) {
            end += 8;
        }
        if (size < end) {
            return NULL;
        }
        kind = ORIGIN_TYPE | (kind & EVENT_TIME_FLAG);
    } else {
        PyObject *type_byte = PyLong_FromLong((long)kind);
        if (type_byte == NULL) {
            return NULL;
        }
        PyObject *found = PyDict_GetItemWithError(body_at, type_byte); /* borrowed */
        Py_DECREF(type_byte);
        if (found == NULL || !PyLong_CheckExact(found)) {
            return NULL;
        }
        end = PyLong_AsSsize_t(found);
        if (end < 1 || size < end || ((kind & EVENT_TIME_FLAG) && end < 9)) {
            return NULL; /* an error from the conversion stays set */
        }
    }
    PyObject *event_time = Py_None;
    Py_INCREF(event_time);
    if (kind & EVENT_TIME_FLAG) {
        unsigned long long bits = 0;
        for (int i = 0; i < 8; i++) {
            bits = (bits << 8) | record[end - 8 + i];
        }
        Py_DECREF(event_time);
        event_time = PyLong_FromLongLong((long long)bits);
        if (event_time == NULL) {
            return NULL;
        }
        kind &= ~EVENT_TIME_FLAG & 0xFF;
    }
    PyObject *body = PyBytes_FromStringAndSize((const char *)record + end, size - end);
    PyObject *type_out = PyLong_FromLong((long)kind);
    if (body == NULL || type_out == NULL) {
        Py_XDECREF(body);
        Py_XDECREF(type_out);
        Py_DECREF(event_time);
        return NULL;
    }
    PyObject *result = PyTuple_New(3);
    if (result == NULL) {
        Py_DECREF(body);
        Py_DECREF(type_out);
        Py_DECREF(event_time);
        return NULL;
    }
    PyTuple_SET_ITEM(result, 0, type_out);
    PyTuple_SET_ITEM(result, 1, body);
    PyTuple_SET_ITEM(result, 2, event_time);
    return result;
}

static PyObject *
origin_tagger(PyObject *module, PyObject *args)
{
    (void)module;
    return new_fast_call(args, tag_fast, "origin_tagger");
}

static PyObject *
origin_admitter(PyObject *module, PyObject *args)
{
    (void)module;
    return new_fast_call(args, admit_fast, "origin_admitter");
}

static PyObject *
frame_decoder(PyObject *module, PyObject *args)
{
    (void)module;
    return new_fast_call(args, decode_fast, "frame_decoder");
}

static PyMethodDef speedups_methods[] = {
    {"accelerate_pair", accelerate_pair, METH_O,
     "accelerate_pair(cls): calls cls(a, b) build the pair in C (a NamedTuple of two fields)."},
    {"is_accelerated", is_accelerated, METH_O,
     "is_accelerated(cls): whether cls(a, b) takes the fast path now (accelerate_pair was "
     "applied, and the class's __new__ and __init__ are still those it had then)."},
    {"origin_tagger", origin_tagger, METH_VARARGS,
     "origin_tagger(prefixes, fallback): WriterOrigins.tag's common case in C."},
    {"origin_admitter", origin_admitter, METH_VARARGS,
     "origin_admitter(applied, fallback): ReaderOrigins.admit's common case in C."},
    {"frame_decoder", frame_decoder, METH_VARARGS,
     "frame_decoder(body_at, fallback): wire.decode_timed's common case in C."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "samzapy._speedups",
    "Optional C accelerators (see samzapy/_speedups.c).", -1, speedups_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
#if PY_VERSION_HEX >= 0x030E0000
    /* Not proven on 3.14+ (tuples there cache their hash in the object): refuse, so that
     * samzapy falls back to the plain NamedTuple. */
    PyErr_SetString(PyExc_ImportError, "samzapy._speedups is built for CPython 3.11 to 3.13");
    return NULL;
#else
    dunder_new = PyUnicode_InternFromString("__new__");
    if (dunder_new == NULL) {
        return NULL;
    }
    if (PyType_Ready(&FastCallType) < 0) {
        return NULL;
    }
    return PyModule_Create(&speedups_module);
#endif
}
