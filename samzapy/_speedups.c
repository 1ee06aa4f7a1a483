/* samzapy._speedups: an optional C accelerator for KV, the pair every keyed message is.
 *
 * KV is a typing.NamedTuple (samzapy/api/envelope.py), and making one goes through the
 * class's Python __new__: about 2,700 more CPU instructions than a plain tuple on CPython
 * 3.12, most of what a filter/map application costs beyond the same task class.
 * accelerate_pair() gives the class a vectorcall constructor (PyTypeObject.tp_vectorcall,
 * which CPython consults when a class is called and which subclasses never inherit): a call
 * with two positional arguments allocates the tuple subclass and fills it, exactly what
 * __new__ makes (``tuple.__new__(cls, (key, value))``); any other call goes the usual way
 * (type.__call__, so keywords, a wrong count and their errors are Python's own). Everything
 * else about the class (fields, _replace, _asdict, pickling, repr) stays the NamedTuple's.
 *
 * Built when a C compiler is there (pyproject.toml marks the extension optional); without it,
 * or with SAMZAPY_NO_SPEEDUPS=1, KV is the plain NamedTuple and behaves the same.
 * tests/unit/api/test_kv_speedups.py holds both to the same behaviour.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
pair_vectorcall(PyObject *type, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs == 2 && kwnames == NULL) {
        PyTypeObject *tp = (PyTypeObject *)type;
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
    if (tp->tp_vectorcall != NULL && tp->tp_vectorcall != pair_vectorcall) {
        PyErr_Format(PyExc_TypeError, "accelerate_pair: %s already has a vectorcall constructor",
                     tp->tp_name);
        return NULL;
    }
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
    return PyBool_FromLong(((PyTypeObject *)cls)->tp_vectorcall == pair_vectorcall);
}

static PyMethodDef speedups_methods[] = {
    {"accelerate_pair", accelerate_pair, METH_O,
     "accelerate_pair(cls): calls cls(a, b) build the pair in C (a NamedTuple of two fields)."},
    {"is_accelerated", is_accelerated, METH_O,
     "is_accelerated(cls): whether accelerate_pair was applied to cls."},
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
    return PyModule_Create(&speedups_module);
#endif
}
