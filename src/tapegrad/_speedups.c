/* Compiled constructors for tapegrad's frozen Tensor record.
 *
 * Tensor is a frozen attrs class with slots: its __setattr__ raises (immutability), so Python
 * code must set each slot through its member descriptor, six calls per Tensor (about 400 ns on
 * the machine the benchmarks ran on). Building a Tensor is the commonest thing the library does
 * (every op's output, every traced value), so these functions allocate the object and fill its
 * slots directly (about 80 ns). They are optional: tapegrad/tensor.py keeps the pure-Python
 * constructors and uses them when this module is not built, and tests check that both give the
 * same records.
 *
 * init(Tensor) reads the slot offsets from Tensor's member descriptors once and checks them;
 * const(array, label=None) builds a level-0 constant; make(array, primal, level, trace, node,
 * label) builds any Tensor. No argument is checked beyond its count: these are internal
 * constructors for tapegrad's hot path, called only with values tapegrad made.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define N_SLOTS 6
static const char *slot_names[N_SLOTS] = {"_array", "_primal", "_level", "_trace", "_node", "label"};

static PyTypeObject *tensor_type = NULL;
static Py_ssize_t offsets[N_SLOTS];
static PyObject *level_zero = NULL;
static PyObject *node_none = NULL; /* -1: a constant names no node */

static inline PyObject *
fill(PyObject *const *values)
{
    PyObject *t = tensor_type->tp_alloc(tensor_type, 0); /* zeroed, GC-tracked */
    if (t == NULL)
        return NULL;
    char *base = (char *)t;
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *v = values[i];
        Py_INCREF(v);
        *(PyObject **)(base + offsets[i]) = v;
    }
    return t;
}

static int
ready(void)
{
    if (tensor_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tapegrad._speedups: init(Tensor) was not called");
        return 0;
    }
    return 1;
}

static PyObject *
sp_const(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "const(array, label=None) takes 1 or 2 arguments, got %zd",
                     nargs);
        return NULL;
    }
    if (!ready())
        return NULL;
    PyObject *values[N_SLOTS] = {args[0], Py_None, level_zero, Py_None, node_none,
                                 nargs == 2 ? args[1] : Py_None};
    return fill(values);
}

static PyObject *
sp_make(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != N_SLOTS) {
        PyErr_Format(PyExc_TypeError,
                     "make(array, primal, level, trace, node, label) takes 6 arguments, got %zd",
                     nargs);
        return NULL;
    }
    if (!ready())
        return NULL;
    return fill(args);
}

static PyObject *
sp_init(PyObject *self, PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "init: expected the Tensor class");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t found[N_SLOTS];
    for (int i = 0; i < N_SLOTS; i++) {
        /* The descriptor must be the class's own object slot, inside its instances. */
        PyObject *d = PyDict_GetItemString(type->tp_dict, slot_names[i]); /* borrowed */
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            PyErr_Format(PyExc_TypeError, "init: %s.%s is not a slot", type->tp_name,
                         slot_names[i]);
            return NULL;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != T_OBJECT_EX || m->offset < (Py_ssize_t)sizeof(PyObject) ||
            m->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "init: %s.%s is not an object slot", type->tp_name,
                         slot_names[i]);
            return NULL;
        }
        found[i] = m->offset;
    }
    if (type->tp_alloc == NULL) {
        PyErr_SetString(PyExc_TypeError, "init: the class cannot allocate instances");
        return NULL;
    }
    for (int i = 0; i < N_SLOTS; i++)
        offsets[i] = found[i];
    Py_INCREF(cls);
    Py_XSETREF(tensor_type, type);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)sp_init, METH_O,
     "init(Tensor): read the slot offsets of the Tensor class (once, at import)."},
    {"const", (PyCFunction)(void (*)(void))sp_const, METH_FASTCALL,
     "const(array, label=None) -> a level-0 constant Tensor holding array."},
    {"make", (PyCFunction)(void (*)(void))sp_make, METH_FASTCALL,
     "make(array, primal, level, trace, node, label) -> Tensor with these slot values."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "tapegrad._speedups",
    "Compiled constructors for tapegrad's frozen Tensor record (see _speedups.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    level_zero = PyLong_FromLong(0);
    node_none = PyLong_FromLong(-1);
    if (level_zero == NULL || node_none == NULL)
        return NULL;
    return PyModule_Create(&module);
}
