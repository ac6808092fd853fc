/*
 * Inlining of model-local functions at session creation (see model_functions.h for
 * the semantics). The new node list is built beside the old one: a node that stays is
 * borrowed, a body node is made here, and new values are appended to the graph's
 * value table. Only when everything succeeded does the graph take the new list, so a
 * failure (a cycle, a missing opset, an attribute of the wrong type, out of memory)
 * leaves the graph as it was (short of memory for its name index, lookups scan).
 *
 * Recursion follows nested calls, bounded by ONYX_FUNCTION_MAX_DEPTH; the total size
 * is bounded by ONYX_FUNCTION_MAX_NODES, because calls that each call the next twice
 * grow exponentially and the file is untrusted.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_edit.h"
#include "model_functions_impl.h"
#include "model_load_impl.h"

typedef struct inliner {
  onyx__graph *g;
  const struct onyx__functions *lib;
  onyx__claim_fn claims;
  void *claims_ctx;
  onyx__node *nodes; /* the new node list */
  size_t node_count, node_cap;
  bool *owned; /* per new node: made here, else borrowed from the old list */
  size_t owned_cap;
  bool *inlined;    /* per old node: replaced by a body */
  size_t value_cap; /* capacity of g->values */
  size_t old_values;
  onyx__name_map names; /* every value name of the graph → its index */
  onyx__function_notes *notes;
  size_t note_cap, omission_cap;
  const onyx__function *stack[ONYX_FUNCTION_MAX_DEPTH]; /* the calls being expanded */
  size_t depth;
  char *err;
  size_t err_cap;
} inliner;

/* One call being expanded: where its body's names start and what it binds. */
typedef struct call_site {
  const char *name;   /* the call node's name in the graph */
  const char *prefix; /* "<call>/<function>" */
  const int32_t *inputs;
  size_t input_count;
  const int32_t *outputs;
  size_t output_count;
  const onyx_attr *attrs;
  size_t attr_count;
  size_t note;
} call_site;

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static onyx_status
fail(inliner *in, onyx_status st, const char *fmt, ...) {
  if (in->err != NULL && in->err_cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->err, in->err_cap, fmt, ap);
    va_end(ap);
  }
  return st;
}

static onyx_status oom(inliner *in) {
  return fail(in, ONYX_STATUS_OUT_OF_MEMORY, "out of memory while inlining model-local functions");
}

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *s = malloc(n);
  if (s != NULL) snprintf(s, n, "%s/%s", a, b);
  return s;
}

/* "<op_type>_<index>": the name of a node the file left unnamed. */
static char *unnamed(const char *op_type, size_t index) {
  size_t n = strlen(op_type) + 24;
  char *s = malloc(n);
  if (s != NULL) snprintf(s, n, "%s_%zu", op_type, index);
  return s;
}

/* Makes room for `need` elements of `size` bytes in *p (capacity *cap). */
static bool grow(void **p, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap > 0 ? *cap : 8;
  while (n < need) n *= 2;
  void *q = realloc(*p, n * size);
  if (q == NULL) return false;
  *p = q;
  *cap = n;
  return true;
}

static void free_node_fields(onyx__node *n) {
  free(n->name);
  free(n->op_type);
  free(n->domain);
  free(n->inputs);
  free(n->outputs);
  onyx__attrs_free(n->attrs, n->attr_count);
  memset(n, 0, sizeof *n);
}

static const char *attr_type_str(uint32_t type) {
  switch (type) {
  case ONYX_ATTR_FLOAT:
    return "FLOAT";
  case ONYX_ATTR_INT:
    return "INT";
  case ONYX_ATTR_STRING:
    return "STRING";
  case ONYX_ATTR_TENSOR:
    return "TENSOR";
  case ONYX_ATTR_FLOATS:
    return "FLOATS";
  case ONYX_ATTR_INTS:
    return "INTS";
  case ONYX_ATTR_STRINGS:
    return "STRINGS";
  default:
    return "UNDEFINED";
  }
}

/* ------------------------------------------------------------------ notes */

static onyx_status add_note(inliner *in, const char *call, const onyx__function *fn,
                            const char *provider, size_t *out_index) {
  onyx__function_notes *nt = in->notes;
  if (!grow((void **)&nt->calls, &in->note_cap, nt->call_count + 1, sizeof *nt->calls))
    return oom(in);
  onyx__function_call_note *c = &nt->calls[nt->call_count];
  memset(c, 0, sizeof *c);
  c->call = onyx__strdup(call);
  c->function = onyx__strdup(fn->label);
  c->provider = provider != NULL ? onyx__strdup(provider) : NULL;
  c->depth = (uint32_t)in->depth;
  *out_index = nt->call_count++; /* counted first, so that freeing the notes frees it */
  if (c->call == NULL || c->function == NULL || (provider != NULL && c->provider == NULL))
    return oom(in);
  nt->inlined_count += provider == NULL;
  return ONYX_STATUS_OK;
}

/* Adds `attr` to the call's list of attributes its body lost, once. */
static onyx_status note_omitted(inliner *in, size_t call, const char *attr) {
  onyx__function_call_note *c = &in->notes->calls[call];
  size_t len = strlen(attr);
  char *quoted = malloc(len + 3);
  if (quoted == NULL) return oom(in);
  snprintf(quoted, len + 3, "'%s'", attr);
  /* The list is "'a', 'b'"; a quoted name cannot match across an entry boundary. */
  bool listed = c->omitted != NULL && strstr(c->omitted, quoted) != NULL;
  size_t old = c->omitted != NULL ? strlen(c->omitted) : 0;
  char *s = listed ? c->omitted : realloc(c->omitted, old + len + 5);
  if (s != NULL && !listed) snprintf(s + old, len + 5, "%s%s", old > 0 ? ", " : "", quoted);
  free(quoted);
  if (s == NULL) return oom(in);
  c->omitted = s;
  return ONYX_STATUS_OK;
}

static onyx_status add_omission(inliner *in, const char *node, size_t call) {
  onyx__function_notes *nt = in->notes;
  if (!grow((void **)&nt->omissions, &in->omission_cap, nt->omission_count + 1,
            sizeof *nt->omissions))
    return oom(in);
  char *copy = onyx__strdup(node);
  if (copy == NULL) return oom(in);
  nt->omissions[nt->omission_count++] = (onyx__function_omission){copy, call};
  return ONYX_STATUS_OK;
}

void onyx__function_notes_print(const onyx__graph *g, FILE *out) {
  const onyx__function_notes *nt = g != NULL ? g->function_notes : NULL;
  if (nt == NULL || nt->call_count == 0) return;
  fprintf(out, "model-local function calls: %zu (%zu inlined, %zu kept)\n", nt->call_count,
          nt->inlined_count, nt->call_count - nt->inlined_count);
  for (size_t i = 0; i < nt->call_count; ++i) {
    const onyx__function_call_note *c = &nt->calls[i];
    fprintf(out, "  %*s'%s' %s: ", (int)(2 * c->depth), "", c->call, c->function);
    if (c->provider != NULL) {
      fprintf(out, "kept: provider %s claims it\n", c->provider);
      continue;
    }
    fprintf(out, "inlined (no provider claims it) as %zu node%s", c->nodes,
            c->nodes == 1 ? "" : "s");
    if (c->omitted != NULL) fprintf(out, "; the call leaves %s unset (no default)", c->omitted);
    fputc('\n', out);
  }
}

void onyx__function_notes_explain(const onyx__graph *g, char *err, size_t err_cap) {
  const onyx__function_notes *nt = g != NULL ? g->function_notes : NULL;
  if (nt == NULL || err == NULL || err_cap == 0) return;
  for (size_t i = 0; i < nt->omission_count; ++i) {
    const onyx__function_omission *o = &nt->omissions[i];
    char *needle = malloc(strlen(o->node) + 8);
    if (needle == NULL) return;
    snprintf(needle, strlen(o->node) + 8, "node '%s'", o->node);
    bool named = strstr(err, needle) != NULL;
    free(needle);
    if (!named) continue;
    const onyx__function_call_note *c = &nt->calls[o->call];
    size_t len = strlen(err);
    onyx__qname qn, qc;
    snprintf(err + len, err_cap - len,
             " (the node comes from model-local function '%s' inlined at '%s': the call does "
             "not set %s, which the function gives no default)",
             c->function, onyx__qn(&qc, c->call), onyx__qn(&qn, c->omitted));
    return;
  }
}

/* ------------------------------------------------------------------ building */

static onyx_status append_node(inliner *in, const onyx__node *n, bool owned) {
  if (in->node_count >= ONYX_FUNCTION_MAX_NODES) {
    return fail(in, ONYX_STATUS_UNSUPPORTED,
                "inlining model-local functions makes more than %" PRIu32
                " nodes; the limit guards against calls that multiply",
                ONYX_FUNCTION_MAX_NODES);
  }
  if (!grow((void **)&in->nodes, &in->node_cap, in->node_count + 1, sizeof *in->nodes) ||
      !grow((void **)&in->owned, &in->owned_cap, in->node_count + 1, sizeof *in->owned))
    return oom(in);
  in->nodes[in->node_count] = *n;
  in->owned[in->node_count] = owned;
  in->node_count++;
  return ONYX_STATUS_OK;
}

/* Appends a value for body name `name` of `fn` under the call's prefix, made unique in
 * the graph by a numeric suffix, typed from the function's value_info. */
static onyx_status new_value(inliner *in, const call_site *call, const onyx__function *fn,
                             const char *name, int32_t *out) {
  onyx__graph *g = in->g;
  if (g->value_count >= (size_t)INT32_MAX) {
    return fail(in, ONYX_STATUS_UNSUPPORTED,
                "inlining model-local functions makes more than %d values", INT32_MAX);
  }
  char *full = join(call->prefix, name);
  if (full == NULL) return oom(in);
  for (size_t k = 1; onyx__name_map_get(&in->names, full, NULL); ++k) {
    size_t n = strlen(call->prefix) + strlen(name) + 24;
    char *other = malloc(n);
    if (other != NULL) snprintf(other, n, "%s/%s_%zu", call->prefix, name, k);
    free(full);
    if ((full = other) == NULL) return oom(in);
  }
  if (!grow((void **)&g->values, &in->value_cap, g->value_count + 1, sizeof *g->values) ||
      !onyx__name_map_put(&in->names, full, (int32_t)g->value_count)) {
    free(full);
    return oom(in);
  }
  onyx__value *v = &g->values[g->value_count];
  memset(v, 0, sizeof *v);
  v->name = full;
  v->dtype = ONYX_DTYPE_UNDEFINED;
  v->rank = -1;
  v->producer = -1;
  const onyx__fn_type *t = onyx__function_type(fn, name);
  if (t != NULL) {
    v->dtype = t->dtype;
    v->rank = t->rank;
    memcpy(v->dims, t->dims, sizeof v->dims);
  }
  *out = (int32_t)g->value_count++;
  return ONYX_STATUS_OK;
}

static const onyx_attr *find_attr(const onyx_attr *attrs, size_t count, const char *name) {
  for (size_t i = 0; i < count; ++i)
    if (strcmp(attrs[i].name, name) == 0) return &attrs[i];
  return NULL;
}

/* The value of a reference: the call's attribute, else the function's default; NULL
 * when neither has it (IR.md: the attribute "is omitted otherwise"). */
static onyx_status resolve_ref(inliner *in, const onyx__function *fn, const call_site *call,
                               const onyx__node *n, const onyx__fn_ref *r, const onyx_attr **out) {
  const onyx_attr *src = find_attr(call->attrs, call->attr_count, r->ref);
  const char *from = "the call sets it";
  if (src == NULL) {
    src = find_attr(fn->defaults, fn->default_count, r->ref);
    from = "the function's default is";
  }
  *out = src;
  if (src == NULL || r->type == ONYX_ATTR_UNDEFINED || src->type == r->type) return ONYX_STATUS_OK;
  onyx__qname qc, qn, qa, qr;
  return fail(in, ONYX_STATUS_INVALID_MODEL,
              "model-local function '%s' inlined at '%s': body node '%s' takes attribute '%s' "
              "from '%s' as %s, but %s %s",
              fn->label, onyx__qn(&qc, call->name), onyx__qn(&qn, n->name), onyx__qn(&qa, r->name),
              onyx__qn(&qr, r->ref), attr_type_str(r->type), from, attr_type_str(src->type));
}

/* The body node's attributes: its own values, and its references resolved. Sets
 * *out_lost when a reference found no value. */
static onyx_status resolve_attrs(inliner *in, const onyx__function *fn, const call_site *call,
                                 const onyx__fn_node *bn, onyx__node *n, bool *out_lost) {
  size_t cap = bn->attr_count + bn->ref_count;
  if (cap == 0) return ONYX_STATUS_OK;
  onyx_attr *attrs = calloc(cap, sizeof *attrs);
  if (attrs == NULL) return oom(in);
  n->attrs = attrs;
  for (size_t i = 0; i < bn->attr_count; ++i)
    if (!onyx__attr_copy(&bn->attrs[i], bn->attrs[i].name, &attrs[n->attr_count++])) return oom(in);
  for (size_t i = 0; i < bn->ref_count; ++i) {
    const onyx__fn_ref *r = &bn->refs[i];
    const onyx_attr *src = NULL;
    onyx_status st = resolve_ref(in, fn, call, n, r, &src);
    if (st != ONYX_STATUS_OK) return st;
    if (src == NULL) {
      *out_lost = true;
      st = note_omitted(in, call->note, r->ref);
      if (st != ONYX_STATUS_OK) return st;
      continue;
    }
    if (!onyx__attr_copy(src, r->name, &attrs[n->attr_count++])) return oom(in);
  }
  return ONYX_STATUS_OK;
}

/* The opset a body node binds to: the function's import for its domain, else the
 * model's (0 when neither imports it). */
static int64_t body_opset(const inliner *in, const onyx__function *fn, const char *domain) {
  for (size_t i = 0; i < fn->opset_count; ++i)
    if (strcmp(fn->opsets[i].domain, domain) == 0) return fn->opsets[i].version;
  return onyx__graph_opset(in->g, domain);
}

/* Maps the body node's value names to graph values: inputs through the scope,
 * outputs to the bound formal output or a new value. */
static onyx_status bind_values(inliner *in, const onyx__function *fn, const call_site *call,
                               onyx__name_map *scope, const onyx__fn_node *bn, onyx__node *n) {
  n->inputs = bn->input_count > 0 ? malloc(bn->input_count * sizeof *n->inputs) : NULL;
  n->outputs = bn->output_count > 0 ? malloc(bn->output_count * sizeof *n->outputs) : NULL;
  if ((bn->input_count > 0 && n->inputs == NULL) || (bn->output_count > 0 && n->outputs == NULL))
    return oom(in);
  n->input_count = bn->input_count;
  n->output_count = bn->output_count;
  for (size_t j = 0; j < bn->input_count; ++j) {
    n->inputs[j] = -1; /* an empty name, or a formal input the call left out */
    if (bn->inputs[j][0] != '\0') (void)onyx__name_map_get(scope, bn->inputs[j], &n->inputs[j]);
  }
  for (size_t j = 0; j < bn->output_count; ++j) {
    n->outputs[j] = -1;
    const char *name = bn->outputs[j];
    if (name[0] == '\0' || onyx__name_map_get(scope, name, &n->outputs[j])) continue;
    onyx_status st = new_value(in, call, fn, name, &n->outputs[j]);
    if (st != ONYX_STATUS_OK) return st;
    if (!onyx__name_map_put(scope, name, n->outputs[j])) return oom(in);
  }
  return ONYX_STATUS_OK;
}

static onyx_status inline_call(inliner *in, const onyx__function *fn, const call_site *site);

/* Node `n`, named `name` in the graph, as the call it is (`note` records it). */
static call_site site_of(const char *name, const onyx__node *n, size_t note) {
  return (call_site){.name = name,
                     .inputs = n->inputs,
                     .input_count = n->input_count,
                     .outputs = n->outputs,
                     .output_count = n->output_count,
                     .attrs = n->attrs,
                     .attr_count = n->attr_count,
                     .note = note};
}

/* A body node that calls a function: inlined in turn unless a provider claims it. */
static onyx_status nested_call(inliner *in, const onyx__function *sub, onyx__node *n,
                               bool *out_kept) {
  const char *provider = in->claims != NULL ? in->claims(in->claims_ctx, in->g, n) : NULL;
  size_t note = 0;
  onyx_status st = add_note(in, n->name, sub, provider, &note);
  *out_kept = provider != NULL;
  if (st != ONYX_STATUS_OK || provider != NULL) return st;
  call_site site = site_of(n->name, n, note);
  return inline_call(in, sub, &site);
}

static onyx_status place_body_node(inliner *in, const onyx__function *fn, const call_site *call,
                                   onyx__name_map *scope, size_t k) {
  const onyx__fn_node *bn = &fn->nodes[k];
  onyx__node n = {0};
  n.name = bn->name[0] != '\0' ? join(call->prefix, bn->name) : NULL;
  if (bn->name[0] == '\0') {
    char *local = unnamed(bn->op_type, k);
    n.name = local != NULL ? join(call->prefix, local) : NULL;
    free(local);
  }
  n.op_type = onyx__strdup(bn->op_type);
  n.domain = onyx__strdup(bn->domain);
  n.opset = body_opset(in, fn, bn->domain);
  bool lost = false, kept = true;
  onyx_status st = n.name && n.op_type && n.domain ? ONYX_STATUS_OK : oom(in);
  if (st == ONYX_STATUS_OK) st = bind_values(in, fn, call, scope, bn, &n);
  if (st == ONYX_STATUS_OK) st = resolve_attrs(in, fn, call, bn, &n, &lost);
  const onyx__function *sub = onyx__functions_find(in->lib, bn->domain, bn->op_type, bn->overload);
  if (st == ONYX_STATUS_OK && sub != NULL) st = nested_call(in, sub, &n, &kept);
  if (st == ONYX_STATUS_OK && kept && n.opset == 0) {
    onyx__qname qc, qn, qd;
    st = fail(in, ONYX_STATUS_INVALID_MODEL,
              "model-local function '%s' inlined at '%s': body node '%s' is in domain '%s', "
              "which neither the function nor the model imports",
              fn->label, onyx__qn(&qc, call->name), onyx__qn(&qn, n.name),
              onyx__qn(&qd, bn->domain[0] != '\0' ? bn->domain : "ai.onnx"));
  }
  if (st == ONYX_STATUS_OK && kept && lost) st = add_omission(in, n.name, call->note);
  if (st == ONYX_STATUS_OK && kept) st = append_node(in, &n, true);
  if (st != ONYX_STATUS_OK || !kept) free_node_fields(&n);
  return st;
}

/* Refuses a call of a function already being expanded, naming the cycle. */
static onyx_status check_recursion(inliner *in, const onyx__function *fn, const call_site *site) {
  size_t first = 0;
  while (first < in->depth && in->stack[first] != fn) ++first;
  onyx__qname qc;
  if (first == in->depth && in->depth < ONYX_FUNCTION_MAX_DEPTH) return ONYX_STATUS_OK;
  if (first == in->depth) {
    return fail(in, ONYX_STATUS_UNSUPPORTED,
                "model-local function '%s' called at '%s' is nested more than %d calls deep",
                fn->label, onyx__qn(&qc, site->name), ONYX_FUNCTION_MAX_DEPTH);
  }
  char cycle[768] = "";
  size_t len = 0;
  for (size_t d = first; d <= in->depth && len + 1 < sizeof cycle; ++d) {
    const onyx__function *f = d < in->depth ? in->stack[d] : fn;
    int w = snprintf(cycle + len, sizeof cycle - len, "%s'%s'", d > first ? " -> " : "", f->label);
    len = w > 0 && (size_t)w < sizeof cycle - len ? len + (size_t)w : sizeof cycle - 1;
  }
  return fail(in, ONYX_STATUS_INVALID_MODEL,
              "model-local functions call themselves: %s (at node '%s'); recursion is not "
              "allowed",
              cycle, onyx__qn(&qc, site->name));
}

static onyx_status check_arity(inliner *in, const onyx__function *fn, const call_site *site) {
  onyx__qname qc;
  if (site->input_count > fn->input_count) {
    return fail(in, ONYX_STATUS_INVALID_MODEL,
                "node '%s' calls model-local function '%s' with %zu inputs; it has %zu",
                onyx__qn(&qc, site->name), fn->label, site->input_count, fn->input_count);
  }
  if (site->output_count > fn->output_count) {
    return fail(in, ONYX_STATUS_INVALID_MODEL,
                "node '%s' calls model-local function '%s' with %zu outputs; it has %zu",
                onyx__qn(&qc, site->name), fn->label, site->output_count, fn->output_count);
  }
  if (fn->unusable != NULL) {
    return fail(in, ONYX_STATUS_UNSUPPORTED,
                "node '%s' calls model-local function '%s', which no provider claims and which "
                "Onyx cannot inline: %s",
                onyx__qn(&qc, site->name), fn->label, fn->unusable);
  }
  return ONYX_STATUS_OK;
}

/* Binds the formal parameters: inputs to the call's values (-1 for one left out),
 * outputs to the call's values or, when the call does not take one, a new value. */
static onyx_status bind_formals(inliner *in, const onyx__function *fn, const call_site *site,
                                onyx__name_map *scope) {
  for (size_t j = 0; j < fn->input_count; ++j) {
    int32_t v = j < site->input_count ? site->inputs[j] : -1;
    if (!onyx__name_map_put(scope, fn->inputs[j], v)) return oom(in);
  }
  for (size_t j = 0; j < fn->output_count; ++j) {
    int32_t v = j < site->output_count ? site->outputs[j] : -1;
    if (v < 0) {
      onyx_status st = new_value(in, site, fn, fn->outputs[j], &v);
      if (st != ONYX_STATUS_OK) return st;
    }
    if (!onyx__name_map_put(scope, fn->outputs[j], v)) return oom(in);
  }
  return ONYX_STATUS_OK;
}

/* Places fn's body at the call site, in body order (which the loader checked is
 * topological), so the new list stays in topological order. */
static onyx_status inline_call(inliner *in, const onyx__function *fn, const call_site *given) {
  onyx_status st = check_recursion(in, fn, given);
  if (st == ONYX_STATUS_OK) st = check_arity(in, fn, given);
  if (st != ONYX_STATUS_OK) return st;
  call_site site = *given;
  char *prefix = join(given->name, fn->name);
  onyx__name_map scope = {0};
  if (prefix == NULL || !onyx__name_map_init(&scope, fn->input_count + fn->output_count)) {
    free(prefix);
    return oom(in);
  }
  site.prefix = prefix;
  size_t before = in->node_count;
  in->stack[in->depth++] = fn;
  st = bind_formals(in, fn, &site, &scope);
  for (size_t k = 0; st == ONYX_STATUS_OK && k < fn->node_count; ++k)
    st = place_body_node(in, fn, &site, &scope, k);
  in->depth--;
  in->notes->calls[site.note].nodes = in->node_count - before;
  onyx__name_map_free(&scope);
  free(prefix);
  return st;
}

/* A node of the model's graph: kept (borrowed) unless it calls a function that no
 * provider claims. */
static onyx_status visit_graph_node(inliner *in, size_t i) {
  onyx__node *n = &in->g->nodes[i];
  const struct onyx__functions *lib = in->lib;
  const char *overload = i < lib->node_count ? lib->node_overloads[i] : NULL;
  const onyx__function *fn = onyx__functions_find(lib, n->domain, n->op_type, overload);
  if (fn == NULL) return append_node(in, n, false);
  const char *provider = in->claims != NULL ? in->claims(in->claims_ctx, in->g, n) : NULL;
  char *name = n->name[0] != '\0' ? onyx__strdup(n->name) : unnamed(n->op_type, i);
  size_t note = 0;
  onyx_status st = name != NULL ? add_note(in, name, fn, provider, &note) : oom(in);
  if (st == ONYX_STATUS_OK && provider != NULL) st = append_node(in, n, false);
  if (st == ONYX_STATUS_OK && provider == NULL) {
    call_site site = site_of(name, n, note);
    st = inline_call(in, fn, &site);
    in->inlined[i] = st == ONYX_STATUS_OK;
  }
  free(name);
  return st;
}

/* Gives back everything made, leaving the graph as it was. */
static void roll_back(inliner *in) {
  for (size_t i = 0; i < in->node_count; ++i)
    if (in->owned[i]) free_node_fields(&in->nodes[i]);
  for (size_t v = in->old_values; v < in->g->value_count; ++v) free(in->g->values[v].name);
  in->g->value_count = in->old_values;
  onyx__function_notes_free(in->notes);
  in->notes = NULL;
}

/* Takes the new node list; its values' producers follow it. */
static onyx_status commit(inliner *in) {
  onyx__graph *g = in->g;
  /* Without memory for the index, the graph's lookups would scan: refuse instead. */
  if (onyx__graph_index_rebuild(g) != ONYX_STATUS_OK) return oom(in);
  for (size_t i = 0; i < g->node_count; ++i)
    if (in->inlined[i]) free_node_fields(&g->nodes[i]);
  free(g->nodes);
  g->nodes = in->nodes;
  g->node_count = in->node_count;
  in->nodes = NULL;
  for (size_t v = 0; v < g->value_count; ++v) g->values[v].producer = -1;
  for (size_t i = 0; i < g->node_count; ++i)
    for (size_t o = 0; o < g->nodes[i].output_count; ++o)
      if (g->nodes[i].outputs[o] >= 0) g->values[g->nodes[i].outputs[o]].producer = (int32_t)i;
  g->function_notes = in->notes;
  in->notes = NULL;
  return ONYX_STATUS_OK;
}

static onyx_status start(inliner *in) {
  onyx__graph *g = in->g;
  in->old_values = g->value_count;
  in->value_cap = g->value_count;
  in->notes = calloc(1, sizeof *in->notes);
  in->inlined = calloc(g->node_count + 1, sizeof *in->inlined);
  if (in->notes == NULL || in->inlined == NULL ||
      !onyx__name_map_init(&in->names, 2 * g->value_count))
    return oom(in);
  for (size_t v = 0; v < g->value_count; ++v)
    if (!onyx__name_map_put(&in->names, g->values[v].name, (int32_t)v)) return oom(in);
  return ONYX_STATUS_OK;
}

onyx_status onyx__graph_inline_functions(onyx__graph *g, onyx__claim_fn claims, void *claims_ctx,
                                         char *err, size_t err_cap) {
  if (err != NULL && err_cap > 0) err[0] = '\0';
  if (g == NULL || g->functions == NULL) return ONYX_STATUS_OK;
  inliner in = {.g = g,
                .lib = g->functions,
                .claims = claims,
                .claims_ctx = claims_ctx,
                .err = err,
                .err_cap = err_cap};
  onyx_status st = start(&in);
  for (size_t i = 0; st == ONYX_STATUS_OK && i < g->node_count; ++i) st = visit_graph_node(&in, i);
  if (st == ONYX_STATUS_OK && in.notes->call_count > 0) st = commit(&in);
  if (in.notes != NULL) roll_back(&in); /* failed, or nothing called a function */
  free(in.nodes);
  free(in.owned);
  free(in.inlined);
  onyx__name_map_free(&in.names);
  if (st == ONYX_STATUS_OK) {
    onyx__functions_free(g->functions);
    g->functions = NULL;
  }
  return st;
}
