/* samzapy._speedups: an optional C accelerator for KV, the pair every keyed message is.
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

static PyMethodDef speedups_methods[] = {
    {"accelerate_pair", accelerate_pair, METH_O,
     "accelerate_pair(cls): calls cls(a, b) build the pair in C (a NamedTuple of two fields)."},
    {"is_accelerated", is_accelerated, METH_O,
     "is_accelerated(cls): whether cls(a, b) takes the fast path now (accelerate_pair was "
     "applied, and the class's __new__ and __init__ are still those it had then)."},
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
    return PyModule_Create(&speedups_module);
#endif
}
