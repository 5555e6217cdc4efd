/* Compiled constructors for tapegrad's frozen Tensor record, and the hot paths of
 * Function.apply and the backward replay.
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
 *
 * init_core(...) hands over the pieces of tapegrad/function.py and tape.py the hot paths need;
 * apply(cls, *args, **params) is then Function.apply (installed as a classmethod) and
 * backward_pass(records, ct, consume) is the backward replay. Each is a line-by-line
 * translation of the common case of its Python original (Function._apply_py, whose one-level
 * recording branch is Function._record_small; tape._backward_pass): NumPy arrays, an eager op
 * or a one-level recording. Anything else (devices, lazy mode, nested levels, ops with no
 * derivative at their level) is handed to the Python original before any work is done, and
 * rare results (several outputs, scalars, non-Tensor cotangents, broadcast cotangents) go
 * through the same Python helpers the original uses, so both behave identically; the tests run
 * with and without this module (TAPEGRAD_NO_SPEEDUPS=1).
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

/* The offsets of ``cls``'s own object slots ``names`` (member descriptors of the class itself,
 * looked up as attributes: static types have no tp_dict of their own since 3.12). 0, or -1
 * with TypeError. */
static int
slot_offsets(PyObject *cls, const char *const *names, int n, Py_ssize_t *found)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "init: expected a class");
        return -1;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    for (int i = 0; i < n; i++) {
        PyObject *d = PyObject_GetAttrString(cls, names[i]);
        if (d == NULL)
            PyErr_Clear();
        int own = d != NULL && Py_TYPE(d) == &PyMemberDescr_Type &&
                  ((PyDescrObject *)d)->d_type == type;
        PyMemberDef *m = own ? ((PyMemberDescrObject *)d)->d_member : NULL;
        Py_XDECREF(d); /* the class keeps the descriptor alive */
        if (!own) {
            PyErr_Format(PyExc_TypeError, "init: %s.%s is not a slot", type->tp_name, names[i]);
            return -1;
        }
        if (m->type != T_OBJECT_EX || m->offset < (Py_ssize_t)sizeof(PyObject) ||
            m->offset + (Py_ssize_t)sizeof(PyObject *) > type->tp_basicsize) {
            PyErr_Format(PyExc_TypeError, "init: %s.%s is not an object slot", type->tp_name,
                         names[i]);
            return -1;
        }
        found[i] = m->offset;
    }
    return 0;
}

static PyObject *
sp_init(PyObject *self, PyObject *cls)
{
    Py_ssize_t found[N_SLOTS];
    if (slot_offsets(cls, slot_names, N_SLOTS, found) < 0)
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
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

/* tape.Trace's slots, read and written directly (a Trace is read several times per recorded
 * op); any other recorder (forward mode's) goes through getattr/setattr. */
#define N_TSLOTS 6
enum { T_LEVEL, T_RECORDS, T_N_NODES, T_DONE, T_LABELS, T_AVALS };
static const char *trace_slot_names[N_TSLOTS] = {"level", "records", "n_nodes",
                                                 "done",  "labels",  "avals"};
static PyTypeObject *trace_type = NULL;
static Py_ssize_t trace_offsets[N_TSLOTS];

static PyObject *
sp_init_trace(PyObject *self, PyObject *cls)
{
    Py_ssize_t found[N_TSLOTS];
    if (slot_offsets(cls, trace_slot_names, N_TSLOTS, found) < 0)
        return NULL;
    for (int i = 0; i < N_TSLOTS; i++)
        trace_offsets[i] = found[i];
    Py_INCREF(cls);
    Py_XSETREF(trace_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

/* trace.<slot i> as a new reference (AttributeError if unset, as getattr) */
static PyObject *
trace_get(PyObject *trace, int i, PyObject *name)
{
    if (Py_TYPE(trace) == trace_type) {
        PyObject *v = *(PyObject **)((char *)trace + trace_offsets[i]);
        if (v != NULL)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(trace, name);
}

/* trace.<slot i> = v; 0 or -1 */
static int
trace_set(PyObject *trace, int i, PyObject *name, PyObject *v)
{
    if (Py_TYPE(trace) == trace_type) {
        PyObject **p = (PyObject **)((char *)trace + trace_offsets[i]);
        Py_XSETREF(*p, Py_NewRef(v));
        return 0;
    }
    return PyObject_SetAttr(trace, name, v);
}


/* ---------------------------------------------------------------------------------------- */
/* The hot paths: Function.apply and the backward replay                                     */
/* ---------------------------------------------------------------------------------------- */

enum { S_ARRAY, S_PRIMAL, S_LEVEL, S_TRACE, S_NODE, S_LABEL };
#define SLOT(t, i) (*(PyObject **)((char *)(t) + offsets[i]))
#define MAX_ARGS 16

static int core_ready = 0;
static PyTypeObject *context_type = NULL;
static PyTypeObject *ndarray_type = NULL;
static PyObject *grad_state = NULL;   /* threading.local with .disabled */
static PyObject *lazy_state = NULL;   /* threading.local with .depth */
static PyObject *lazy_global = NULL;  /* dict with "lazy" */
static PyObject *py_wrap_eager = NULL, *py_as_array = NULL, *py_unbroadcast = NULL;
static PyObject *py_multi_grads = NULL, *py_as_cotangent = NULL, *tape_module = NULL;
static PyObject *np_module = NULL;
static PyObject *falses[MAX_ARGS + 1];
static PyObject *empty_tuple = NULL;

static PyObject *s_forward, *s_backward, *s_needs_input_grad, *s_saved_tensors, *s_to_save,
    *s_non_diff, *s_differentiable, *s_nondiff_argnums, *s_disabled, *s_depth, *s_lazy,
    *s_done, *s_n_nodes, *s_avals, *s_records, *s_append, *s_apply_py, *s_explain,
    *s_finish_multi, *s_shape, *s_dtype, *s_kind, *s_astype, *s_base, *s_flags, *s_writeable,
    *s_out, *s_name, *s_np_add, *s_record, *s_level, *s_labels;

static PyObject *long_one = NULL;

/* d.pop(key, None) as a new reference (NULL with no error when absent); PyDict_Pop is 3.13+ */
static int
dict_pop(PyObject *d, PyObject *key, PyObject **out)
{
    PyObject *v = PyDict_GetItemWithError(d, key); /* borrowed */
    *out = NULL;
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(v);
    if (PyDict_DelItem(d, key) < 0) {
        Py_DECREF(v);
        return -1;
    }
    *out = v;
    return 1;
}

/* A sentinel: the fast path declines before doing any work; the Python original runs. */
static PyObject defer_obj;
#define DEFER (&defer_obj)

static inline long
level_of(PyObject *t)
{
    PyObject *lv = SLOT(t, S_LEVEL);
    return lv == NULL ? -1 : PyLong_AsLong(lv);
}

/* Whether an attribute is truthy (-1 on error). */
static int
attr_true(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL)
        return -1;
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
}

/* dtype.kind in "fc" for an ndarray, with a small cache keyed by the dtype object (builtin
 * dtypes are singletons). -1 on error. */
#define KIND_CACHE 16
static PyObject *kind_keys[KIND_CACHE];
static char kind_vals[KIND_CACHE];
static int kind_used = 0;

static int
is_floating_array(PyObject *arr)
{
    PyObject *dt = PyObject_GetAttr(arr, s_dtype);
    if (dt == NULL)
        return -1;
    for (int i = 0; i < kind_used; i++) {
        if (kind_keys[i] == dt) {
            Py_DECREF(dt);
            return kind_vals[i];
        }
    }
    PyObject *kind = PyObject_GetAttr(dt, s_kind);
    if (kind == NULL) {
        Py_DECREF(dt);
        return -1;
    }
    int r = 0;
    if (PyUnicode_Check(kind) && PyUnicode_GET_LENGTH(kind) == 1) {
        Py_UCS4 c = PyUnicode_READ_CHAR(kind, 0);
        r = (c == 'f' || c == 'c');
    }
    Py_DECREF(kind);
    if (kind_used < KIND_CACHE) {
        kind_keys[kind_used] = dt; /* keeps the reference: the dtype stays alive */
        kind_vals[kind_used] = (char)r;
        kind_used++;
    }
    else {
        Py_DECREF(dt);
    }
    return r;
}

/* trace.done, truthy (-1 on error) */
static int
trace_done(PyObject *trace)
{
    PyObject *v = trace_get(trace, T_DONE, s_done);
    if (v == NULL)
        return -1;
    int r = v == Py_False ? 0 : (v == Py_True ? 1 : PyObject_IsTrue(v));
    Py_DECREF(v);
    return r;
}

/* no_grad() active in this thread (function._grad_state.disabled) */
static int
grad_disabled(void)
{
    return attr_true(grad_state, s_disabled);
}

/* lazy mode active: in this thread (lazy._state.depth) or globally (lazy._GLOBAL["lazy"]) */
static int
lazy_active(void)
{
    int r = attr_true(lazy_state, s_depth);
    if (r)
        return r;
    PyObject *g = PyDict_GetItemWithError(lazy_global, s_lazy); /* borrowed */
    if (g == NULL)
        return PyErr_Occurred() ? -1 : 0;
    return PyObject_IsTrue(g);
}

static PyObject *
call_py_apply(PyObject *cls, PyObject *const *xs, Py_ssize_t n, PyObject *kwnames)
{
    PyObject *m = PyObject_GetAttr(cls, s_apply_py);
    if (m == NULL)
        return NULL;
    PyObject *r = PyObject_Vectorcall(m, xs, n, kwnames);
    Py_DECREF(m);
    return r;
}

/* The keyword arguments as a new dict (a new empty one without any), as **params builds. */
static PyObject *
params_dict(PyObject *const *kwvalues, PyObject *kwnames)
{
    PyObject *d = PyDict_New();
    if (d == NULL || kwnames == NULL)
        return d;
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t i = 0; i < nk; i++) {
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(kwnames, i), kwvalues[i]) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

/* After forward raised: a ValueError, TypeError or IndexError becomes
 * ``raise cls._explain(e, arrays, params) from e``, as in the Python original. */
static void
explain_error(PyObject *cls, PyObject *const *arrays, Py_ssize_t n, PyObject *const *kwvalues,
              PyObject *kwnames)
{
    if (!(PyErr_ExceptionMatches(PyExc_ValueError) || PyErr_ExceptionMatches(PyExc_TypeError) ||
          PyErr_ExceptionMatches(PyExc_IndexError)))
        return;
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    if (tb != NULL)
        PyException_SetTraceback(ev, tb);
    PyObject *lst = PyList_New(n);
    PyObject *params = params_dict(kwvalues, kwnames);
    PyObject *clear = NULL;
    if (lst != NULL && params != NULL) {
        for (Py_ssize_t i = 0; i < n; i++)
            PyList_SET_ITEM(lst, i, Py_NewRef(arrays[i]));
        clear = PyObject_CallMethodObjArgs(cls, s_explain, ev, lst, params, NULL);
    }
    Py_XDECREF(lst);
    Py_XDECREF(params);
    if (clear == NULL) { /* _explain itself failed: keep the original error */
        PyErr_Clear();
        PyErr_Restore(et, ev, tb);
        return;
    }
    PyException_SetCause(clear, Py_NewRef(ev));
    PyException_SetContext(clear, Py_NewRef(ev));
    PyErr_SetObject((PyObject *)Py_TYPE(clear), clear);
    Py_DECREF(clear);
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(tb);
}

static PyObject *
new_context(PyObject *needs)
{
    PyObject *ctx = context_type->tp_alloc(context_type, 0);
    if (ctx == NULL)
        return NULL;
    if (PyObject_SetAttr(ctx, s_needs_input_grad, needs) < 0) {
        Py_DECREF(ctx);
        return NULL;
    }
    return ctx;
}

/* cls.forward(ctx, *arrays, **kwargs) */
static PyObject *
call_forward(PyObject *cls, PyObject *ctx, PyObject *const *arrays, Py_ssize_t n,
             PyObject *const *kwvalues, PyObject *kwnames)
{
    PyObject *stack[1 + MAX_ARGS + MAX_ARGS];
    Py_ssize_t nk = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *fwd = PyObject_GetAttr(cls, s_forward);
    if (fwd == NULL)
        return NULL;
    stack[0] = ctx;
    for (Py_ssize_t i = 0; i < n; i++)
        stack[1 + i] = arrays[i];
    for (Py_ssize_t i = 0; i < nk; i++)
        stack[1 + n + i] = kwvalues[i];
    PyObject *out = PyObject_Vectorcall(fwd, stack, 1 + n, kwnames);
    Py_DECREF(fwd);
    return out;
}

/* The eager branch of Function._apply_py: no transform holds any input. */
static PyObject *
apply_eager(PyObject *cls, PyObject *const *xs, Py_ssize_t n, PyObject *kwnames)
{
    PyObject *arrays[MAX_ARGS];
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = xs[i];
        if (Py_TYPE(x) == tensor_type) {
            PyObject *a = SLOT(x, S_ARRAY);
            if (a == NULL || Py_TYPE(a) != ndarray_type)
                return DEFER; /* a device or deferred array */
            arrays[i] = a;
        }
        else {
            arrays[i] = x;
        }
    }
    PyObject *ctx = new_context(falses[n]);
    if (ctx == NULL)
        return NULL;
    PyObject *out = call_forward(cls, ctx, arrays, n, xs + n, kwnames);
    Py_DECREF(ctx);
    if (out == NULL) {
        explain_error(cls, arrays, n, xs + n, kwnames);
        return NULL;
    }
    if (Py_TYPE(out) == ndarray_type) {
        PyObject *values[N_SLOTS] = {out, Py_None, level_zero, Py_None, node_none, Py_None};
        PyObject *t = fill(values);
        Py_DECREF(out);
        return t;
    }
    PyObject *t = PyObject_CallFunctionObjArgs(py_wrap_eager, out, np_module, NULL);
    Py_DECREF(out);
    return t;
}

/* A level-0 Tensor's primal slot, made and cached when None (tensor._primal_of). New ref. */
static PyObject *
primal_of(PyObject *t)
{
    PyObject *p = SLOT(t, S_PRIMAL);
    if (p != Py_None)
        return Py_NewRef(p);
    PyObject *values[N_SLOTS] = {SLOT(t, S_ARRAY), Py_None, level_zero, Py_None, node_none,
                                 Py_None};
    p = fill(values);
    if (p == NULL)
        return NULL;
    PyObject *old = SLOT(t, S_PRIMAL);
    SLOT(t, S_PRIMAL) = Py_NewRef(p);
    Py_DECREF(old);
    return p;
}

/* (shape, dtype) of an array, new ref */
static PyObject *
aval_of(PyObject *arr)
{
    PyObject *shape = PyObject_GetAttr(arr, s_shape);
    if (shape == NULL)
        return NULL;
    PyObject *dtype = PyObject_GetAttr(arr, s_dtype);
    if (dtype == NULL) {
        Py_DECREF(shape);
        return NULL;
    }
    PyObject *t = PyTuple_Pack(2, shape, dtype);
    Py_DECREF(shape);
    Py_DECREF(dtype);
    return t;
}

/* trace.n_nodes: read and increment; returns the node id (new ref) */
static PyObject *
next_node(PyObject *trace)
{
    PyObject *node = trace_get(trace, T_N_NODES, s_n_nodes);
    if (node == NULL)
        return NULL;
    PyObject *next = PyNumber_Add(node, long_one);
    if (next == NULL || trace_set(trace, T_N_NODES, s_n_nodes, next) < 0) {
        Py_XDECREF(next);
        Py_DECREF(node);
        return NULL;
    }
    Py_DECREF(next);
    return node;
}

/* trace.avals.append(aval); trace.records.append(rec) (a forward-mode trace computes tangents
 * as its records arrive). 0 or -1. */
static int
append_record(PyObject *trace, PyObject *aval, PyObject *rec)
{
    PyObject *avals = trace_get(trace, T_AVALS, s_avals);
    if (avals == NULL)
        return -1;
    int rc = PyList_Append(avals, aval);
    Py_DECREF(avals);
    if (rc < 0)
        return -1;
    PyObject *records = trace_get(trace, T_RECORDS, s_records);
    if (records == NULL)
        return -1;
    if (PyList_CheckExact(records)) {
        rc = PyList_Append(records, rec);
    }
    else {
        PyObject *r = PyObject_CallMethodOneArg(records, s_append, rec);
        rc = r == NULL ? -1 : 0;
        Py_XDECREF(r);
    }
    Py_DECREF(records);
    return rc;
}

/* The one-level recording branch (Function._record_small, for any number of inputs): the op
 * is recorded at level top, where every traced input has a concrete (level-0) primal. */
static PyObject *
apply_record(PyObject *cls, long top, PyObject *const *xs, Py_ssize_t n, PyObject *kwnames)
{
    PyObject *arrays[MAX_ARGS];
    PyObject *nodes[MAX_ARGS];  /* borrowed node ids (ints) of traced inputs, NULL otherwise */
    PyObject *trace = NULL;     /* borrowed */
    PyObject *const *kwvalues = xs + n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = xs[i];
        nodes[i] = NULL;
        if (Py_TYPE(x) == tensor_type) {
            long lv = level_of(x);
            if (lv == top) {
                PyObject *p = SLOT(x, S_PRIMAL);
                if (p == NULL)
                    return DEFER;
                if (p != Py_None && level_of(p) != 0)
                    return DEFER; /* nested levels: the general path */
                nodes[i] = SLOT(x, S_NODE);
                trace = SLOT(x, S_TRACE);
            }
            else if (lv != 0) {
                return DEFER;
            }
            PyObject *a = SLOT(x, S_ARRAY);
            if (a == NULL || Py_TYPE(a) != ndarray_type)
                return DEFER; /* a device or deferred array */
            arrays[i] = a;
        }
        else {
            arrays[i] = x;
        }
    }
    if (trace == NULL)
        return DEFER;
    int done = trace_done(trace);
    if (done != 0)
        return done < 0 ? NULL : DEFER; /* the Python path raises the leaked-tracer error */

    /* needs_input_grad: traced here and floating (integer inputs get no cotangent) */
    PyObject *needs = PyTuple_New(n);
    if (needs == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        int f = 0;
        if (nodes[i] != NULL) {
            f = is_floating_array(arrays[i]);
            if (f < 0) {
                Py_DECREF(needs);
                return NULL;
            }
        }
        PyTuple_SET_ITEM(needs, i, Py_NewRef(f ? Py_True : Py_False));
    }
    PyObject *ctx = new_context(needs);
    Py_DECREF(needs);
    if (ctx == NULL)
        return NULL;
    PyObject *raw = call_forward(cls, ctx, arrays, n, kwvalues, kwnames);
    if (raw == NULL) {
        Py_DECREF(ctx);
        explain_error(cls, arrays, n, kwvalues, kwnames);
        return NULL;
    }
    PyObject *params = NULL, *res = NULL, *lo = NULL, *dict = NULL, *out = NULL;
    PyObject *in_nodes = NULL, *consts = NULL, *rec = NULL, *outs = NULL, *aval = NULL;
    if (Py_TYPE(raw) != ndarray_type) {
        if (PyTuple_Check(raw) || PyList_Check(raw)) { /* several outputs: the general path */
            PyObject *lst = PyList_New(n);
            PyObject *args = PyTuple_New(n);
            params = params_dict(kwvalues, kwnames);
            PyObject *top_obj = PyLong_FromLong(top);
            PyObject *r = NULL;
            if (lst && args && params && top_obj) {
                for (Py_ssize_t i = 0; i < n; i++) {
                    PyList_SET_ITEM(lst, i, Py_NewRef(arrays[i]));
                    PyTuple_SET_ITEM(args, i, Py_NewRef(xs[i]));
                }
                r = PyObject_CallMethodObjArgs(cls, s_finish_multi, ctx, raw, np_module, lst,
                                               top_obj, args, params, NULL);
            }
            Py_XDECREF(lst);
            Py_XDECREF(args);
            Py_XDECREF(params);
            Py_XDECREF(top_obj);
            Py_DECREF(raw);
            Py_DECREF(ctx);
            return r;
        }
        PyObject *conv = PyObject_CallFunctionObjArgs(py_as_array, raw, np_module, NULL);
        Py_DECREF(raw);
        if (conv == NULL)
            goto fail_ctx;
        raw = conv;
    }
    params = params_dict(kwvalues, kwnames);
    if (params == NULL)
        goto fail;
    dict = PyObject_GenericGetDict(ctx, NULL);
    if (dict == NULL)
        goto fail;

    /* what forward saved, as Tensors: traced inputs give their primal, the output its own
     * level-0 Tensor, Python values stay as they are, other arrays become constants */
    PyObject *saved = PyDict_GetItemWithError(dict, s_to_save); /* borrowed */
    if (saved == NULL && PyErr_Occurred())
        goto fail;
    if (saved != NULL && saved != Py_None && PyObject_IsTrue(saved)) {
        Py_INCREF(saved);
        if (PyDict_DelItem(dict, s_to_save) < 0) {
            Py_DECREF(saved);
            goto fail;
        }
        PyObject *seq = PySequence_Fast(saved, "save_for_backward");
        Py_DECREF(saved);
        if (seq == NULL)
            goto fail;
        Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
        res = PyTuple_New(ns);
        if (res == NULL) {
            Py_DECREF(seq);
            goto fail;
        }
        for (Py_ssize_t k = 0; k < ns; k++) {
            PyObject *v = PySequence_Fast_GET_ITEM(seq, k);
            PyObject *item = NULL;
            Py_ssize_t i;
            for (i = 0; i < n; i++) {
                if (v == arrays[i] && Py_TYPE(xs[i]) == tensor_type)
                    break;
            }
            if (i < n) { /* a Tensor input */
                PyObject *x = xs[i];
                if (nodes[i] == NULL) {
                    item = Py_NewRef(x);
                }
                else {
                    item = primal_of(x); /* built once and cached in the slot */
                    if (item == NULL) {
                        Py_DECREF(seq);
                        goto fail;
                    }
                }
            }
            else if (v == raw) {
                if (lo == NULL) {
                    PyObject *values[N_SLOTS] = {raw, Py_None, level_zero, Py_None, node_none,
                                                 Py_None};
                    lo = fill(values);
                    if (lo == NULL) {
                        Py_DECREF(seq);
                        goto fail;
                    }
                }
                item = Py_NewRef(lo);
            }
            else {
                for (i = 0; i < n; i++) {
                    if (v == arrays[i])
                        break;
                }
                if (i < n || Py_TYPE(v) == tensor_type) { /* a Python value, or a Tensor */
                    item = Py_NewRef(v);
                }
                else {
                    PyObject *values[N_SLOTS] = {v, Py_None, level_zero, Py_None, node_none,
                                                 Py_None};
                    item = fill(values);
                    if (item == NULL) {
                        Py_DECREF(seq);
                        goto fail;
                    }
                }
            }
            PyTuple_SET_ITEM(res, k, item);
        }
        Py_DECREF(seq);
    }
    else {
        if (saved != NULL && PyDict_DelItem(dict, s_to_save) < 0)
            goto fail;
        res = Py_NewRef(empty_tuple);
    }
    if (PyDict_SetItem(dict, s_saved_tensors, res) < 0)
        goto fail;
    Py_CLEAR(res);
    PyObject *rec_ctx = ctx;
    int nd = PyDict_Contains(dict, s_non_diff);
    if (nd < 0)
        goto fail;
    if (nd) { /* the only output carries no gradient: nothing flows back */
        if (PyDict_DelItem(dict, s_non_diff) < 0)
            goto fail;
        rec_ctx = Py_None;
    }
    Py_CLEAR(dict);

    /* the node, the output Tensor, its aval and the record (whose aval fields are the
     * trace's node table, as in the Python original) */
    PyObject *node_obj = next_node(trace);
    if (node_obj == NULL)
        goto fail;
    PyObject *top_obj = PyLong_FromLong(top);
    if (top_obj != NULL) {
        PyObject *values[N_SLOTS] = {raw, lo == NULL ? Py_None : lo, top_obj, trace, node_obj,
                                     Py_None};
        out = fill(values);
        Py_DECREF(top_obj);
    }
    if (out != NULL)
        outs = PyTuple_Pack(1, node_obj);
    Py_DECREF(node_obj);
    if (outs == NULL)
        goto fail;
    aval = aval_of(raw);
    PyObject *avals = aval == NULL ? NULL : trace_get(trace, T_AVALS, s_avals);
    in_nodes = PyTuple_New(n);
    consts = PyTuple_New(n);
    if (avals == NULL || in_nodes == NULL || consts == NULL) {
        Py_XDECREF(avals);
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyTuple_SET_ITEM(in_nodes, i, Py_NewRef(nodes[i] != NULL ? nodes[i] : node_none));
        PyTuple_SET_ITEM(consts, i, Py_NewRef(nodes[i] != NULL ? Py_None : xs[i]));
    }
    rec = PyTuple_Pack(8, cls, params, rec_ctx, in_nodes, consts, outs, avals, avals);
    Py_DECREF(avals);
    if (rec == NULL || append_record(trace, aval, rec) < 0)
        goto fail;
    Py_CLEAR(aval);
    Py_DECREF(rec);
    Py_DECREF(in_nodes);
    Py_DECREF(consts);
    Py_DECREF(outs);
    Py_DECREF(params);
    Py_XDECREF(lo);
    Py_DECREF(raw);
    Py_DECREF(ctx);
    return out;

fail:
    Py_XDECREF(rec);
    Py_XDECREF(in_nodes);
    Py_XDECREF(consts);
    Py_XDECREF(outs);
    Py_XDECREF(aval);
    Py_XDECREF(out);
    Py_XDECREF(res);
    Py_XDECREF(dict);
    Py_XDECREF(params);
    Py_XDECREF(lo);
    Py_DECREF(raw);
fail_ctx:
    Py_DECREF(ctx);
    return NULL;
}


/* ---- two-level recording: Function._record at level top over Function._record at sub ---- */

/* ctx.saved_tensors from the spec: kinds 0 (input k: inputs[k]), 1 (the output: out) and
 * 2 (a constant: obj). New ref to the tuple. */
static PyObject *
resolve_spec(Py_ssize_t ns, const int *kinds, const Py_ssize_t *idx, PyObject *const *objs,
             PyObject *const *inputs, PyObject *out)
{
    PyObject *t = PyTuple_New(ns);
    if (t == NULL)
        return NULL;
    for (Py_ssize_t j = 0; j < ns; j++) {
        PyObject *v = kinds[j] == 0 ? inputs[idx[j]] : (kinds[j] == 1 ? out : objs[j]);
        PyTuple_SET_ITEM(t, j, Py_NewRef(v));
    }
    return t;
}

/* One level's part of Function._record: ctx gets this level's needs and saved values, the
 * output is a Tensor of trace's level over `primal` (the output one level down), and the
 * record goes on trace (no context when the only output is non-differentiable). New ref. */
static PyObject *
record_level(PyObject *cls, PyObject *params, PyObject *ctx, int nondiff, PyObject *trace,
             PyObject *needs, PyObject *saved, PyObject *raw, PyObject *primal,
             PyObject *in_nodes, PyObject *consts, PyObject *in_avals, PyObject *out_avals,
             PyObject *aval)
{
    if (PyObject_SetAttr(ctx, s_needs_input_grad, needs) < 0 ||
        PyObject_SetAttr(ctx, s_saved_tensors, saved) < 0)
        return NULL;
    PyObject *node = next_node(trace);
    if (node == NULL)
        return NULL;
    PyObject *level = PyObject_GetAttrString(trace, "level");
    PyObject *out = NULL, *outs = NULL, *rec = NULL;
    if (level != NULL) {
        PyObject *v[N_SLOTS] = {raw, primal, level, trace, node, Py_None};
        out = fill(v);
    }
    if (out != NULL)
        outs = PyTuple_Pack(1, node);
    if (outs != NULL)
        rec = PyTuple_Pack(8, cls, params, nondiff ? Py_None : ctx, in_nodes, consts, outs,
                           in_avals, out_avals);
    if (rec == NULL || append_record(trace, aval, rec) < 0)
        Py_CLEAR(out);
    Py_XDECREF(rec);
    Py_XDECREF(outs);
    Py_XDECREF(level);
    Py_DECREF(node);
    return out;
}

static PyObject *
apply_record_nested(PyObject *cls, long top, PyObject *const *xs, Py_ssize_t n,
                    PyObject *kwnames)
{
    PyObject *const *kwvalues = xs + n;
    PyObject *arrays[MAX_ARGS];   /* level-0 arrays (borrowed) or Python values */
    PyObject *low1[MAX_ARGS];     /* inputs one level down (new refs where made) */
    PyObject *low2[MAX_ARGS];     /* inputs at level 0 (new refs where made) */
    int top_traced[MAX_ARGS], sub_traced[MAX_ARGS];
    PyObject *trace_top = NULL, *trace_sub = NULL; /* borrowed */
    long sub = 0;

    /* classify without doing anything (any surprise defers to the Python path) */
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *a = xs[k];
        top_traced[k] = sub_traced[k] = 0;
        if (Py_TYPE(a) != tensor_type)
            continue;
        long lv = level_of(a);
        PyObject *b = a; /* the value one level below top (a itself if not traced at top) */
        if (lv == top) {
            top_traced[k] = 1;
            trace_top = SLOT(a, S_TRACE);
            b = SLOT(a, S_PRIMAL);
            if (b == Py_None) { /* its primal is a level-0 constant over its array, made */
                b = a;          /* on demand; the array is a's own */
                lv = 0;
            }
            else if (b == NULL || Py_TYPE(b) != tensor_type) {
                return DEFER;
            }
            else {
                lv = level_of(b);
            }
        }
        if (lv > 0) {
            if (sub != 0 && lv != sub)
                return DEFER; /* three or more levels */
            sub = lv;
            PyObject *c = SLOT(b, S_PRIMAL);
            if (c == NULL || (c != Py_None && level_of(c) != 0))
                return DEFER;
            sub_traced[k] = 1;
            trace_sub = SLOT(b, S_TRACE);
        }
        PyObject *arr = SLOT(b, S_ARRAY);
        if (arr == NULL || Py_TYPE(arr) != ndarray_type)
            return DEFER;
    }
    if (trace_top == NULL || trace_sub == NULL || sub <= 0 || sub >= top)
        return DEFER;
    int done = trace_done(trace_top);
    if (done != 0)
        return done < 0 ? NULL : DEFER;
    done = trace_done(trace_sub);
    if (done != 0)
        return done < 0 ? NULL : DEFER;

    /* lower: low1 = values at level sub (or constants), low2 = values at level 0 */
    PyObject *top_needs = NULL, *needs_top = NULL, *needs_sub = NULL;
    PyObject *in_nodes_top = NULL, *consts_top = NULL, *in_nodes_sub = NULL, *consts_sub = NULL;
    PyObject *in_avals = NULL, *ctx0 = NULL, *raw = NULL, *raw0 = NULL, *lo = NULL;
    PyObject *params = NULL;
    PyObject *result = NULL;
    Py_ssize_t made = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        low1[k] = low2[k] = NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++, made = k) {
        PyObject *a = xs[k];
        low1[k] = top_traced[k] ? primal_of(a) : Py_NewRef(a);
        if (low1[k] == NULL)
            goto done;
        low2[k] = sub_traced[k] ? primal_of(low1[k]) : Py_NewRef(low1[k]);
        if (low2[k] == NULL)
            goto done;
        arrays[k] = Py_TYPE(a) == tensor_type ? SLOT(low2[k], S_ARRAY) : a;
    }
    made = n;
    top_needs = PyTuple_New(n);
    needs_top = PyTuple_New(n);
    needs_sub = PyTuple_New(n);
    in_nodes_top = PyTuple_New(n);
    consts_top = PyTuple_New(n);
    in_nodes_sub = PyTuple_New(n);
    consts_sub = PyTuple_New(n);
    in_avals = PyTuple_New(n);
    if (!top_needs || !needs_top || !needs_sub || !in_nodes_top || !consts_top ||
        !in_nodes_sub || !consts_sub || !in_avals)
        goto done;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *a = xs[k];
        int is_t = Py_TYPE(a) == tensor_type;
        int fl = 0;
        if (is_t && (top_traced[k] || sub_traced[k])) {
            fl = is_floating_array(arrays[k]);
            if (fl < 0)
                goto done;
        }
        PyTuple_SET_ITEM(top_needs, k, Py_NewRef(is_t && level_of(a) > 0 ? Py_True : Py_False));
        PyTuple_SET_ITEM(needs_top, k, Py_NewRef(top_traced[k] && fl ? Py_True : Py_False));
        PyTuple_SET_ITEM(needs_sub, k, Py_NewRef(sub_traced[k] && fl ? Py_True : Py_False));
        PyTuple_SET_ITEM(in_nodes_top, k, Py_NewRef(top_traced[k] ? SLOT(a, S_NODE) : node_none));
        PyTuple_SET_ITEM(consts_top, k, Py_NewRef(top_traced[k] ? Py_None : a));
        PyTuple_SET_ITEM(in_nodes_sub, k,
                         Py_NewRef(sub_traced[k] ? SLOT(low1[k], S_NODE) : node_none));
        PyTuple_SET_ITEM(consts_sub, k, Py_NewRef(sub_traced[k] ? Py_None : low1[k]));
        PyObject *av = is_t ? aval_of(arrays[k]) : Py_NewRef(Py_None);
        if (av == NULL)
            goto done;
        PyTuple_SET_ITEM(in_avals, k, av);
    }

    /* forward at level 0 (Function._base), seeing every level's needs */
    ctx0 = new_context(top_needs);
    if (ctx0 == NULL)
        goto done;
    raw = call_forward(cls, ctx0, arrays, n, kwvalues, kwnames);
    if (raw == NULL) {
        explain_error(cls, arrays, n, kwvalues, kwnames);
        goto done;
    }
    params = params_dict(kwvalues, kwnames);
    if (params == NULL)
        goto done;
    if (Py_TYPE(raw) != ndarray_type) {
        if (PyTuple_Check(raw) || PyList_Check(raw)) { /* several outputs: the general path */
            PyObject *lst = PyList_New(n), *args = PyTuple_New(n);
            PyObject *top_obj = PyLong_FromLong(top);
            if (lst && args && top_obj) {
                for (Py_ssize_t k = 0; k < n; k++) {
                    PyList_SET_ITEM(lst, k, Py_NewRef(arrays[k]));
                    PyTuple_SET_ITEM(args, k, Py_NewRef(xs[k]));
                }
                PyObject *pre = PyObject_CallMethod(cls, "_wrap_base", "OOOO", ctx0, raw, lst,
                                                    np_module);
                if (pre != NULL) {
                    PyObject *r = PyObject_CallMethodObjArgs(cls, s_record, top_obj, args,
                                                             params, Py_True, Py_None, pre,
                                                             NULL);
                    Py_DECREF(pre);
                    if (r != NULL) { /* (outs, ctx0, multi, spec, nondiff) */
                        PyObject *outs = PyTuple_GET_ITEM(r, 0);
                        int multi = PyObject_IsTrue(PyTuple_GET_ITEM(r, 2));
                        result = Py_NewRef(multi ? outs : PyTuple_GET_ITEM(outs, 0));
                        Py_DECREF(r);
                    }
                }
            }
            Py_XDECREF(lst);
            Py_XDECREF(args);
            Py_XDECREF(top_obj);
            goto done;
        }
        raw0 = raw; /* forward's own result: saved values are matched against it too */
        raw = PyObject_CallFunctionObjArgs(py_as_array, raw0, np_module, NULL);
        if (raw == NULL)
            goto done;
    }
    {
        /* Function._wrap_base: the output as a constant, the saved spec, non-diff outputs */
        PyObject *values[N_SLOTS] = {raw, Py_None, level_zero, Py_None, node_none, Py_None};
        lo = fill(values);
        if (lo == NULL)
            goto done;
        PyObject *dict = PyObject_GenericGetDict(ctx0, NULL);
        if (dict == NULL)
            goto done;
        PyObject *saved, *nd;
        if (dict_pop(dict, s_to_save, &saved) < 0 || dict_pop(dict, s_non_diff, &nd) < 0) {
            Py_DECREF(dict);
            goto done;
        }
        Py_DECREF(dict);
        PyObject *seq = NULL;
        Py_ssize_t ns = 0;
        int nondiff = 0;
        if (nd != NULL) {
            int t = PyObject_IsTrue(nd);
            if (t > 0) {
                PyObject *ndseq = PySequence_Fast(nd, "mark_non_differentiable");
                if (ndseq != NULL) {
                    for (Py_ssize_t j = 0; j < PySequence_Fast_GET_SIZE(ndseq); j++) {
                        PyObject *v = PySequence_Fast_GET_ITEM(ndseq, j);
                        if (v == raw || (raw0 != NULL && v == raw0))
                            nondiff = 1;
                    }
                    Py_DECREF(ndseq);
                }
                else {
                    t = -1;
                }
            }
            Py_DECREF(nd);
            if (t < 0) {
                Py_XDECREF(saved);
                goto done;
            }
        }
        if (saved != NULL) {
            int t = PyObject_IsTrue(saved);
            if (t > 0)
                seq = PySequence_Fast(saved, "save_for_backward");
            Py_DECREF(saved);
            if (t < 0 || (t > 0 && seq == NULL))
                goto done;
            if (seq != NULL)
                ns = PySequence_Fast_GET_SIZE(seq);
        }
        int *kinds = PyMem_Calloc(ns ? ns : 1, sizeof(int));
        Py_ssize_t *idx = PyMem_Calloc(ns ? ns : 1, sizeof(Py_ssize_t));
        PyObject **objs = PyMem_Calloc(ns ? ns : 1, sizeof(PyObject *));
        PyObject *ctx = NULL, *out_sub = NULL, *out_top = NULL, *aval = NULL;
        PyObject *sv = NULL, *out_avals = NULL;
        if (kinds == NULL || idx == NULL || objs == NULL) {
            PyErr_NoMemory();
            goto spec_done;
        }
        for (Py_ssize_t j = 0; j < ns; j++) {
            PyObject *v = PySequence_Fast_GET_ITEM(seq, j);
            Py_ssize_t k;
            for (k = 0; k < n; k++)
                if (arrays[k] == v)
                    break;
            if (k < n) {
                kinds[j] = 0;
                idx[j] = k;
            }
            else if (v == raw || (raw0 != NULL && v == raw0)) {
                kinds[j] = 1;
            }
            else {
                kinds[j] = 2;
                if (Py_TYPE(v) == tensor_type) {
                    objs[j] = Py_NewRef(v);
                }
                else {
                    PyObject *cv[N_SLOTS] = {v, Py_None, level_zero, Py_None, node_none,
                                             Py_None};
                    objs[j] = fill(cv);
                    if (objs[j] == NULL)
                        goto spec_done;
                }
            }
        }
        aval = aval_of(raw);
        out_avals = aval == NULL ? NULL : PyTuple_Pack(1, aval);
        if (out_avals == NULL)
            goto spec_done;

        /* level sub (Function._record with sub == 0 below it): ctx0 itself */
        sv = resolve_spec(ns, kinds, idx, objs, low2, lo);
        if (sv == NULL)
            goto spec_done;
        out_sub = record_level(cls, params, ctx0, nondiff, trace_sub, needs_sub, sv, raw, lo,
                               in_nodes_sub, consts_sub, in_avals, out_avals, aval);
        Py_CLEAR(sv);
        if (out_sub == NULL)
            goto spec_done;

        /* level top: a copy of ctx0 with this level's needs and saved values */
        ctx = context_type->tp_alloc(context_type, 0);
        if (ctx == NULL)
            goto spec_done;
        {
            PyObject *d0 = PyObject_GenericGetDict(ctx0, NULL);
            PyObject *d1 = d0 == NULL ? NULL : PyObject_GenericGetDict(ctx, NULL);
            int rc = d1 == NULL ? -1 : PyDict_Update(d1, d0);
            Py_XDECREF(d0);
            Py_XDECREF(d1);
            if (rc < 0)
                goto spec_done;
        }
        sv = resolve_spec(ns, kinds, idx, objs, low1, out_sub);
        if (sv == NULL)
            goto spec_done;
        out_top = record_level(cls, params, ctx, nondiff, trace_top, needs_top, sv, raw, out_sub,
                               in_nodes_top, consts_top, in_avals, out_avals, aval);
        Py_CLEAR(sv);
        if (out_top == NULL)
            goto spec_done;
        result = Py_NewRef(out_top);
    spec_done:
        Py_XDECREF(seq);
        if (objs != NULL)
            for (Py_ssize_t j = 0; j < ns; j++)
                Py_XDECREF(objs[j]);
        PyMem_Free(kinds);
        PyMem_Free(idx);
        PyMem_Free(objs);
        Py_XDECREF(ctx);
        Py_XDECREF(out_sub);
        Py_XDECREF(out_top);
        Py_XDECREF(aval);
        Py_XDECREF(sv);
        Py_XDECREF(out_avals);
    }
done:
    for (Py_ssize_t k = 0; k < made; k++) {
        Py_XDECREF(low1[k]);
        Py_XDECREF(low2[k]);
    }
    if (made < n) { /* a failure while lowering input `made` */
        Py_XDECREF(low1[made]);
        Py_XDECREF(low2[made]);
    }
    Py_XDECREF(top_needs);
    Py_XDECREF(needs_top);
    Py_XDECREF(needs_sub);
    Py_XDECREF(in_nodes_top);
    Py_XDECREF(consts_top);
    Py_XDECREF(in_nodes_sub);
    Py_XDECREF(consts_sub);
    Py_XDECREF(in_avals);
    Py_XDECREF(ctx0);
    Py_XDECREF(raw);
    Py_XDECREF(raw0);
    Py_XDECREF(lo);
    Py_XDECREF(params);
    return result;
}

/* Function.apply(cls, *args, **params) */
static PyObject *
sp_apply(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (!core_ready) {
        PyErr_SetString(PyExc_RuntimeError, "tapegrad._speedups: init_core was not called");
        return NULL;
    }
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "apply: missing the Function class");
        return NULL;
    }
    PyObject *cls = args[0];
    PyObject *const *xs = args + 1;
    Py_ssize_t n = nargs - 1;
    Py_ssize_t nk = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (n > MAX_ARGS || nk > MAX_ARGS)
        return call_py_apply(cls, xs, n, kwnames);
    long top = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (Py_TYPE(xs[i]) == tensor_type) {
            long lv = level_of(xs[i]);
            if (lv < 0) {
                if (PyErr_Occurred())
                    return NULL;
                return call_py_apply(cls, xs, n, kwnames);
            }
            if (lv > top)
                top = lv;
        }
    }
    PyObject *r;
    if (top) {
        int d = attr_true(cls, s_differentiable);
        if (d < 0)
            return NULL;
        if (!d)
            return call_py_apply(cls, xs, n, kwnames);
        int nd = attr_true(cls, s_nondiff_argnums);
        if (nd < 0)
            return NULL;
        if (nd)
            return call_py_apply(cls, xs, n, kwnames);
        int off = grad_disabled();
        if (off < 0)
            return NULL;
        if (off)
            return call_py_apply(cls, xs, n, kwnames);
        r = apply_record(cls, top, xs, n, kwnames);
        if (r == DEFER)
            r = apply_record_nested(cls, top, xs, n, kwnames);
    }
    else {
        int lz = lazy_active();
        if (lz < 0)
            return NULL;
        if (lz)
            return call_py_apply(cls, xs, n, kwnames);
        r = apply_eager(cls, xs, n, kwnames);
    }
    if (r == DEFER)
        return call_py_apply(cls, xs, n, kwnames);
    return r;
}

/* ---- the backward replay (tape._backward_pass) ------------------------------------------- */

/* prev + g written into prev's array when only the cotangent dict holds prev, only prev holds
 * its array, and the arrays are first-order NumPy arrays of one shape and dtype, the first
 * owning its data and writable (tape._add_in_place; exact reference counts here). 1 if added,
 * 0 if not, -1 on error. */
static int
add_in_place(PyObject *prev, PyObject *g)
{
#ifdef Py_GIL_DISABLED
    return 0;
#else
    if (Py_TYPE(prev) != tensor_type || Py_TYPE(g) != tensor_type)
        return 0;
    PyObject *pa = SLOT(prev, S_ARRAY), *ga = SLOT(g, S_ARRAY);
    if (pa == NULL || ga == NULL || Py_TYPE(pa) != ndarray_type || Py_TYPE(ga) != ndarray_type)
        return 0;
    if (Py_REFCNT(prev) != 1 || Py_REFCNT(pa) != 1 || level_of(prev) != 0 || level_of(g) != 0)
        return 0;
    PyObject *base = PyObject_GetAttr(pa, s_base);
    if (base == NULL)
        return -1;
    int owns = base == Py_None;
    Py_DECREF(base);
    if (!owns)
        return 0;
    PyObject *flags = PyObject_GetAttr(pa, s_flags);
    if (flags == NULL)
        return -1;
    int w = attr_true(flags, s_writeable);
    Py_DECREF(flags);
    if (w <= 0)
        return w;
    int same = 0;
    PyObject *s1 = PyObject_GetAttr(pa, s_shape), *s2 = PyObject_GetAttr(ga, s_shape);
    if (s1 && s2)
        same = PyObject_RichCompareBool(s1, s2, Py_EQ);
    Py_XDECREF(s1);
    Py_XDECREF(s2);
    if (same <= 0)
        return same;
    PyObject *d1 = PyObject_GetAttr(pa, s_dtype), *d2 = PyObject_GetAttr(ga, s_dtype);
    same = (d1 && d2) ? PyObject_RichCompareBool(d1, d2, Py_EQ) : -1;
    Py_XDECREF(d1);
    Py_XDECREF(d2);
    if (same <= 0)
        return same;
    PyObject *kw = PyDict_New();
    if (kw == NULL || PyDict_SetItem(kw, s_out, pa) < 0) {
        Py_XDECREF(kw);
        return -1;
    }
    PyObject *add = PyObject_GetAttr(tape_module, s_np_add); /* tape._np_add: tests count it */
    PyObject *a = add == NULL ? NULL : PyTuple_Pack(2, pa, ga);
    PyObject *r = a == NULL ? NULL : PyObject_Call(add, a, kw);
    Py_XDECREF(a);
    Py_XDECREF(add);
    Py_DECREF(kw);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 1;
#endif
}

/* One entry's cotangents into ct. 0 on success, -1 on error. */
static int
backward_entry(PyObject *rec, PyObject *ct)
{
    if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) != 8) { /* guards */
        if (PyTuple_Check(rec) && PyTuple_GET_SIZE(rec) >= 3 && PyTuple_GET_ITEM(rec, 2) == Py_None)
            return 0;
        PyErr_SetString(PyExc_TypeError, "backward_pass: malformed tape record");
        return -1;
    }
    PyObject *fn = PyTuple_GET_ITEM(rec, 0), *ctx = PyTuple_GET_ITEM(rec, 2);
    if (ctx == Py_None)
        return 0;
    PyObject *in_nodes = PyTuple_GET_ITEM(rec, 3), *out_nodes = PyTuple_GET_ITEM(rec, 5);
    PyObject *in_avals = PyTuple_GET_ITEM(rec, 6);
    PyObject *grads;
    if (PyTuple_GET_SIZE(out_nodes) == 1) {
        PyObject *g;
        if (dict_pop(ct, PyTuple_GET_ITEM(out_nodes, 0), &g) < 0)
            return -1;
        if (g == NULL)
            return 0;
        PyObject *bw = PyObject_GetAttr(fn, s_backward);
        if (bw == NULL) {
            Py_DECREF(g);
            return -1;
        }
        PyObject *stack[2] = {ctx, g};
        grads = PyObject_Vectorcall(bw, stack, 2, NULL);
        Py_DECREF(bw);
        Py_DECREF(g);
    }
    else {
        PyObject *wrapped = PyObject_CallFunctionObjArgs(py_multi_grads, rec, ct, NULL);
        if (wrapped == NULL)
            return -1;
        if (wrapped == Py_None) { /* no cotangent reached any output */
            Py_DECREF(wrapped);
            return 0;
        }
        if (!PyTuple_Check(wrapped) || PyTuple_GET_SIZE(wrapped) != 1) {
            Py_DECREF(wrapped);
            PyErr_SetString(PyExc_TypeError, "backward_pass: _multi_grads must return (grads,)");
            return -1;
        }
        grads = Py_NewRef(PyTuple_GET_ITEM(wrapped, 0));
        Py_DECREF(wrapped);
    }
    if (grads == NULL)
        return -1;
    if (!PyTuple_CheckExact(grads)) {
        PyObject *t = PyList_CheckExact(grads) ? PyList_AsTuple(grads) : PyTuple_Pack(1, grads);
        Py_DECREF(grads);
        if (t == NULL)
            return -1;
        grads = t;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(in_nodes);
    if (PyTuple_GET_SIZE(grads) != n) {
        PyObject *name = PyObject_GetAttr(fn, s_name);
        PyErr_Format(PyExc_ValueError,
                     "%S.backward returned %zd value(s) for %zd input(s); return one cotangent "
                     "(or None) per positional input of forward.",
                     name ? name : Py_None, PyTuple_GET_SIZE(grads), n);
        Py_XDECREF(name);
        Py_DECREF(grads);
        return -1;
    }
    PyObject *needs = PyObject_GetAttr(ctx, s_needs_input_grad);
    if (needs == NULL) {
        Py_DECREF(grads);
        return -1;
    }
    int list_avals = PyList_CheckExact(in_avals);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *node = PyTuple_GET_ITEM(in_nodes, i);
        long nid = PyLong_AsLong(node);
        if (nid == -1 && PyErr_Occurred())
            goto fail;
        if (nid < 0)
            continue;
        PyObject *need = PySequence_GetItem(needs, i);
        if (need == NULL)
            goto fail;
        int nv = PyObject_IsTrue(need);
        Py_DECREF(need);
        if (nv < 0)
            goto fail;
        if (!nv)
            continue;
        PyObject *g = PyTuple_GET_ITEM(grads, i);
        if (g == Py_None)
            continue;
        Py_INCREF(g);
        if (Py_TYPE(g) != tensor_type) {
            PyObject *t = PyObject_CallOneArg(py_as_cotangent, g);
            Py_DECREF(g);
            if (t == NULL)
                goto fail;
            g = t;
        }
        PyObject *aval = list_avals ? PyList_GetItem(in_avals, nid) : PyTuple_GetItem(in_avals, i);
        if (aval == NULL || !PyTuple_Check(aval) || PyTuple_GET_SIZE(aval) != 2) {
            Py_DECREF(g);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "backward_pass: malformed aval");
            goto fail;
        }
        PyObject *shape = PyTuple_GET_ITEM(aval, 0), *dtype = PyTuple_GET_ITEM(aval, 1);
        PyObject *gshape = PyObject_GetAttr(SLOT(g, S_ARRAY), s_shape);
        if (gshape == NULL) {
            Py_DECREF(g);
            goto fail;
        }
        int eq = PyObject_RichCompareBool(gshape, shape, Py_EQ);
        Py_DECREF(gshape);
        if (eq < 0) {
            Py_DECREF(g);
            goto fail;
        }
        if (!eq) {
            PyObject *idx = PyLong_FromSsize_t(i);
            PyObject *t = idx == NULL ? NULL
                                      : PyObject_CallFunctionObjArgs(py_unbroadcast, g, shape, fn,
                                                                     idx, NULL);
            Py_XDECREF(idx);
            Py_DECREF(g);
            if (t == NULL)
                goto fail;
            g = t;
        }
        PyObject *gdtype = PyObject_GetAttr(SLOT(g, S_ARRAY), s_dtype);
        if (gdtype == NULL) {
            Py_DECREF(g);
            goto fail;
        }
        eq = gdtype == dtype ? 1 : PyObject_RichCompareBool(gdtype, dtype, Py_EQ);
        Py_DECREF(gdtype);
        if (eq < 0) {
            Py_DECREF(g);
            goto fail;
        }
        if (!eq) {
            PyObject *t = PyObject_CallMethodOneArg(g, s_astype, dtype);
            Py_DECREF(g);
            if (t == NULL)
                goto fail;
            g = t;
        }
        PyObject *prev = PyDict_GetItemWithError(ct, node); /* borrowed */
        if (prev == NULL) {
            int rc = PyErr_Occurred() ? -1 : PyDict_SetItem(ct, node, g);
            Py_DECREF(g);
            if (rc < 0)
                goto fail;
            continue;
        }
        int added = add_in_place(prev, g);
        if (added < 0) {
            Py_DECREF(g);
            goto fail;
        }
        if (!added) {
            PyObject *sum = PyNumber_Add(prev, g);
            int rc = sum == NULL ? -1 : PyDict_SetItem(ct, node, sum);
            Py_XDECREF(sum);
            if (rc < 0) {
                Py_DECREF(g);
                goto fail;
            }
        }
        Py_DECREF(g);
    }
    Py_DECREF(needs);
    Py_DECREF(grads);
    return 0;
fail:
    Py_DECREF(needs);
    Py_DECREF(grads);
    return -1;
}

/* backward_pass(records, ct, consume): replay records backward, accumulating into ct. */
static PyObject *
sp_backward_pass(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (!core_ready) {
        PyErr_SetString(PyExc_RuntimeError, "tapegrad._speedups: init_core was not called");
        return NULL;
    }
    if (nargs != 3 || !PyList_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "backward_pass(records: list, ct: dict, consume)");
        return NULL;
    }
    PyObject *records = args[0], *ct = args[1];
    int consume = PyObject_IsTrue(args[2]);
    if (consume < 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    while (n > 0) {
        n--;
        if (n >= PyList_GET_SIZE(records)) { /* a rule changed the list: take what is left */
            n = PyList_GET_SIZE(records);
            continue;
        }
        PyObject *rec = Py_NewRef(PyList_GET_ITEM(records, n));
        if (consume && PyList_SetSlice(records, n, n + 1, NULL) < 0) {
            Py_DECREF(rec);
            return NULL;
        }
        int rc = backward_entry(rec, ct);
        Py_DECREF(rec);
        if (rc < 0)
            return NULL;
    }
    return Py_NewRef(ct);
}

/* function._all_concrete(*tensors): no lazy recording open and every argument a level-0
 * Tensor (the first-order fast paths of backward rules ask this once per call). */
static PyObject *
sp_all_concrete(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    if (!core_ready) {
        PyErr_SetString(PyExc_RuntimeError, "all_concrete: init_core has not run");
        return NULL;
    }
    int lz = lazy_active();
    if (lz < 0)
        return NULL;
    if (lz)
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (Py_TYPE(args[i]) != tensor_type)
            Py_RETURN_FALSE;
        long lv = level_of(args[i]);
        if (lv == -1 && PyErr_Occurred())
            return NULL;
        if (lv != 0)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

/* Whether arr's dtype is a real floating one (kind 'f'); -1 on error. */
static int
is_real_floating(PyObject *arr)
{
    PyObject *dt = PyObject_GetAttr(arr, s_dtype);
    if (dt == NULL)
        return -1;
    PyObject *kind = PyObject_GetAttr(dt, s_kind);
    Py_DECREF(dt);
    if (kind == NULL)
        return -1;
    int r = PyUnicode_Check(kind) && PyUnicode_GET_LENGTH(kind) == 1 &&
            PyUnicode_READ_CHAR(kind, 0) == 'f';
    Py_DECREF(kind);
    return r;
}

/* trace_inputs(leaves, trace) -> list | None: transforms._call_traced's inputs in the common
 * case, every leaf (a list or tuple of them) a level-0 Tensor holding a real floating NumPy
 * array. Then leaf i becomes the traced Tensor of node i (its primal the leaf, its label the
 * leaf's), its (shape, dtype) is appended to trace.avals and its label, if any, entered in
 * trace.labels, as Trace.new_input does; trace.n_nodes becomes the number of leaves. Returns
 * None, having changed nothing, when any leaf is something else (the Python loop then takes
 * every leaf). */
static PyObject *
sp_trace_inputs(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "trace_inputs(leaves, trace) takes 2 arguments");
        return NULL;
    }
    if (!core_ready) {
        PyErr_SetString(PyExc_RuntimeError, "trace_inputs: init_core has not run");
        return NULL;
    }
    PyObject *seq = args[0], *trace = args[1];
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq))
        Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) { /* check every leaf before changing anything */
        PyObject *v = items[i];
        if (Py_TYPE(v) != tensor_type)
            Py_RETURN_NONE;
        long lv = level_of(v);
        if (lv != 0) {
            if (lv == -1 && PyErr_Occurred())
                return NULL;
            Py_RETURN_NONE;
        }
        PyObject *a = SLOT(v, S_ARRAY);
        if (a == NULL || Py_TYPE(a) != ndarray_type)
            Py_RETURN_NONE;
        int f = is_real_floating(a);
        if (f < 0)
            return NULL;
        if (!f)
            Py_RETURN_NONE;
    }
    PyObject *level = trace_get(trace, T_LEVEL, s_level);
    PyObject *avals = level == NULL ? NULL : trace_get(trace, T_AVALS, s_avals);
    PyObject *labels = avals == NULL ? NULL : trace_get(trace, T_LABELS, s_labels);
    PyObject *out = labels == NULL ? NULL : PyList_New(n);
    PyObject *count = NULL;
    if (out == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = items[i];
        PyObject *a = SLOT(v, S_ARRAY), *label = SLOT(v, S_LABEL);
        PyObject *aval = aval_of(a);
        if (aval == NULL)
            goto fail;
        int rc = PyList_Append(avals, aval);
        Py_DECREF(aval);
        if (rc < 0)
            goto fail;
        PyObject *node = PyLong_FromSsize_t(i);
        if (node == NULL)
            goto fail;
        if (label != Py_None && PyObject_SetItem(labels, node, label) < 0) {
            Py_DECREF(node);
            goto fail;
        }
        PyObject *values[N_SLOTS] = {a, v, level, trace, node, label};
        PyObject *t = fill(values);
        Py_DECREF(node);
        if (t == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, t);
    }
    count = PyLong_FromSsize_t(n);
    if (count == NULL || trace_set(trace, T_N_NODES, s_n_nodes, count) < 0)
        goto fail;
    Py_DECREF(count);
    Py_DECREF(level);
    Py_DECREF(avals);
    Py_DECREF(labels);
    return out;
fail:
    Py_XDECREF(count);
    Py_XDECREF(out);
    Py_XDECREF(labels);
    Py_XDECREF(avals);
    Py_XDECREF(level);
    return NULL;
}

/* Whether a and b are equal (identical, or == says so); -1 on error. */
static int
same(PyObject *a, PyObject *b)
{
    return a == b ? 1 : PyObject_RichCompareBool(a, b, Py_EQ);
}

/* add_scaled(params, updates, factor) -> list | None: optim.transforms._add_scaled's loop.
 * params and updates are equally long lists (or tuples) of level-0 Tensors holding NumPy
 * arrays of one real floating dtype and one shape (at least one dimension), factor a Python
 * float; then entry i is a new constant Tensor holding ``updates[i] * factor + params[i]``,
 * computed as the Python loop does (the product a fresh array, the parameter added into it).
 * Returns None, having computed nothing, when any pair is something else. */
static PyObject *
sp_add_scaled(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add_scaled(params, updates, factor) takes 3 arguments");
        return NULL;
    }
    if (!core_ready) {
        PyErr_SetString(PyExc_RuntimeError, "add_scaled: init_core has not run");
        return NULL;
    }
    PyObject *ps = args[0], *us = args[1], *factor = args[2];
    if (!(PyList_CheckExact(ps) || PyTuple_CheckExact(ps)) ||
        !(PyList_CheckExact(us) || PyTuple_CheckExact(us)) || !PyFloat_CheckExact(factor))
        Py_RETURN_NONE;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(ps);
    if (PySequence_Fast_GET_SIZE(us) != n)
        Py_RETURN_NONE;
    PyObject **pi = PySequence_Fast_ITEMS(ps), **ui = PySequence_Fast_ITEMS(us);
    for (Py_ssize_t i = 0; i < n; i++) { /* check every pair before computing anything */
        PyObject *t[2] = {pi[i], ui[i]}, *arr[2];
        for (int k = 0; k < 2; k++) {
            if (Py_TYPE(t[k]) != tensor_type)
                Py_RETURN_NONE;
            long lv = level_of(t[k]);
            if (lv != 0) {
                if (lv == -1 && PyErr_Occurred())
                    return NULL;
                Py_RETURN_NONE;
            }
            arr[k] = SLOT(t[k], S_ARRAY);
            if (arr[k] == NULL || Py_TYPE(arr[k]) != ndarray_type)
                Py_RETURN_NONE;
        }
        int ok = is_real_floating(arr[0]);
        if (ok < 0)
            return NULL;
        if (!ok)
            Py_RETURN_NONE;
        PyObject *names[2] = {s_dtype, s_shape};
        for (int k = 0; k < 2; k++) {
            PyObject *a = PyObject_GetAttr(arr[0], names[k]);
            PyObject *b = a == NULL ? NULL : PyObject_GetAttr(arr[1], names[k]);
            int eq = b == NULL ? -1 : same(a, b);
            if (eq > 0 && k == 1)
                eq = PyTuple_Check(a) && PyTuple_GET_SIZE(a) > 0; /* at least one dimension */
            Py_XDECREF(a);
            Py_XDECREF(b);
            if (eq < 0)
                return NULL;
            if (!eq)
                Py_RETURN_NONE;
        }
    }
    PyObject *out = PyList_New(n);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *new = PyNumber_Multiply(SLOT(ui[i], S_ARRAY), factor); /* a fresh array ... */
        if (new == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyObject *r = PyNumber_InPlaceAdd(new, SLOT(pi[i], S_ARRAY)); /* ... the parameter added in */
        if (r == NULL) {
            Py_DECREF(new);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(r); /* the same array */
        PyObject *values[N_SLOTS] = {new, Py_None, level_zero, Py_None, node_none, Py_None};
        PyObject *tensor = fill(values);
        Py_DECREF(new);
        if (tensor == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, tensor);
    }
    return out;
}

/* ---- tape._GCPause: the collector pause while transforms run ----
 * ``with GCPause(): ...`` switches Python's cyclic collector off at the outermost entry (if it
 * was on) and back on at the matching exit; entries nest and may come from several threads.
 * Each instance remembers whether its entry counted (the pause may be turned off meanwhile, see
 * tape.set_gc_pause). The interpreter lock makes the counter's updates atomic: tape.py uses
 * this only where the lock runs (a free-threaded build re-enables it for this module, which does
 * not declare that it can run without; PYTHON_GIL=0 forces it off, and tape.py then keeps the
 * Python pause). */
static long pause_depth = 0;
static int pause_restore = 0;
static int pause_enabled = 1;

typedef struct {
    PyObject_HEAD
    int counted;
} PauseObject;

static PyObject *
pause_enter(PyObject *op, PyObject *unused)
{
    PauseObject *self = (PauseObject *)op;
    self->counted = pause_enabled;
    if (self->counted && pause_depth++ == 0)
        pause_restore = PyGC_Disable();
    return Py_NewRef(op);
}

static PyObject *
pause_exit(PyObject *op, PyObject *const *args, Py_ssize_t n)
{
    PauseObject *self = (PauseObject *)op;
    if (self->counted) {
        self->counted = 0;
        if (--pause_depth == 0 && pause_restore) {
            pause_restore = 0;
            PyGC_Enable();
        }
    }
    Py_RETURN_FALSE;
}

static PyMethodDef pause_methods[] = {
    {"__enter__", (PyCFunction)pause_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))pause_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject pause_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tapegrad._speedups.GCPause",
    .tp_basicsize = sizeof(PauseObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "with GCPause(): the cyclic collector is paused inside (see tape.set_gc_pause).",
    .tp_methods = pause_methods,
    .tp_new = PyType_GenericNew,
};

/* set_gc_pause(enabled) -> the previous setting: whether later entries pause the collector */
static PyObject *
sp_set_gc_pause(PyObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    int prev = pause_enabled;
    pause_enabled = on;
    return Py_NewRef(prev ? Py_True : Py_False);
}

static PyObject *
sp_init_core(PyObject *self, PyObject *args)
{
    PyObject *ctx_cls, *nd, *helpers;
    if (!PyArg_ParseTuple(args, "OOOOOO:init_core", &ctx_cls, &nd, &grad_state, &lazy_state,
                          &lazy_global, &helpers))
        return NULL;
    if (!ready())
        return NULL;
    if (!PyType_Check(ctx_cls) || !PyType_Check(nd) || !PyDict_Check(lazy_global) ||
        !PyDict_Check(helpers)) {
        PyErr_SetString(PyExc_TypeError, "init_core: unexpected arguments");
        return NULL;
    }
    Py_INCREF(ctx_cls);
    Py_INCREF(nd);
    Py_INCREF(grad_state);
    Py_INCREF(lazy_state);
    Py_INCREF(lazy_global);
    context_type = (PyTypeObject *)ctx_cls;
    ndarray_type = (PyTypeObject *)nd;
    const char *names[] = {"wrap_eager", "as_array", "unbroadcast", "multi_grads",
                           "as_cotangent", "tape", "numpy"};
    PyObject **slots[] = {&py_wrap_eager, &py_as_array, &py_unbroadcast, &py_multi_grads,
                          &py_as_cotangent, &tape_module, &np_module};
    for (int i = 0; i < 7; i++) {
        PyObject *v = PyDict_GetItemString(helpers, names[i]);
        if (v == NULL) {
            PyErr_Format(PyExc_KeyError, "init_core: helper %s missing", names[i]);
            return NULL;
        }
        Py_INCREF(v);
        Py_XSETREF(*slots[i], v);
    }
    for (int i = 0; i <= MAX_ARGS; i++) {
        PyObject *t = PyTuple_New(i);
        if (t == NULL)
            return NULL;
        for (int j = 0; j < i; j++)
            PyTuple_SET_ITEM(t, j, Py_NewRef(Py_False));
        Py_XSETREF(falses[i], t);
    }
    core_ready = 1;
    Py_RETURN_NONE;
}

static int
intern_strings(void)
{
    struct { PyObject **p; const char *s; } tab[] = {
        {&s_forward, "forward"}, {&s_backward, "backward"},
        {&s_needs_input_grad, "needs_input_grad"}, {&s_saved_tensors, "saved_tensors"},
        {&s_to_save, "_to_save"}, {&s_non_diff, "_non_diff"},
        {&s_differentiable, "differentiable"}, {&s_nondiff_argnums, "nondiff_argnums"},
        {&s_disabled, "disabled"}, {&s_depth, "depth"}, {&s_lazy, "lazy"}, {&s_done, "done"},
        {&s_n_nodes, "n_nodes"}, {&s_avals, "avals"}, {&s_records, "records"},
        {&s_append, "append"}, {&s_apply_py, "_apply_py"}, {&s_explain, "_explain"},
        {&s_finish_multi, "_finish_multi"}, {&s_shape, "shape"}, {&s_dtype, "dtype"},
        {&s_kind, "kind"}, {&s_astype, "astype"}, {&s_base, "base"}, {&s_flags, "flags"},
        {&s_writeable, "writeable"}, {&s_out, "out"}, {&s_name, "__name__"},
        {&s_np_add, "_np_add"}, {&s_record, "_record"}, {&s_level, "level"},
        {&s_labels, "labels"},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
        *tab[i].p = PyUnicode_InternFromString(tab[i].s);
        if (*tab[i].p == NULL)
            return -1;
    }
    empty_tuple = PyTuple_New(0);
    long_one = PyLong_FromLong(1);
    return (empty_tuple == NULL || long_one == NULL) ? -1 : 0;
}

static PyMethodDef methods[] = {
    {"init", (PyCFunction)sp_init, METH_O,
     "init(Tensor): read the slot offsets of the Tensor class (once, at import)."},
    {"const", (PyCFunction)(void (*)(void))sp_const, METH_FASTCALL,
     "const(array, label=None) -> a level-0 constant Tensor holding array."},
    {"make", (PyCFunction)(void (*)(void))sp_make, METH_FASTCALL,
     "make(array, primal, level, trace, node, label) -> Tensor with these slot values."},
    {"init_trace", (PyCFunction)sp_init_trace, METH_O,
     "init_trace(Trace): read the slot offsets of tape.Trace (once, at import)."},
    {"init_core", (PyCFunction)sp_init_core, METH_VARARGS,
     "init_core(Context, ndarray, grad_state, lazy_state, lazy_global, helpers)."},
    {"apply", (PyCFunction)(void (*)(void))sp_apply, METH_FASTCALL | METH_KEYWORDS,
     "apply(cls, *args, **params): Function.apply (install as a classmethod)."},
    {"backward_pass", (PyCFunction)(void (*)(void))sp_backward_pass, METH_FASTCALL,
     "backward_pass(records, ct, consume): the backward replay; returns ct."},
    {"trace_inputs", (PyCFunction)(void (*)(void))sp_trace_inputs, METH_FASTCALL,
     "trace_inputs(leaves, trace) -> traced list, or None for the Python loop."},
    {"add_scaled", (PyCFunction)(void (*)(void))sp_add_scaled, METH_FASTCALL,
     "add_scaled(params, updates, factor) -> new parameter Tensors, or None."},
    {"all_concrete", (PyCFunction)(void (*)(void))sp_all_concrete, METH_FASTCALL,
     "all_concrete(*tensors): function._all_concrete (after init_core)."},
    {"set_gc_pause", (PyCFunction)sp_set_gc_pause, METH_O,
     "set_gc_pause(enabled) -> previous: whether GCPause entries pause the collector."},
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
    if (level_zero == NULL || node_none == NULL || intern_strings() < 0)
        return NULL;
    if (PyType_Ready(&pause_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObjectRef(m, "GCPause", (PyObject *)&pause_type) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#ifndef TAPEGRAD_SOURCE_SHA256
#define TAPEGRAD_SOURCE_SHA256 "unknown"
#endif
    /* setup.py compiles in the SHA-256 of this file: tests compare it with the source */
    if (m != NULL && PyModule_AddStringConstant(m, "SOURCE_SHA256", TAPEGRAD_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
