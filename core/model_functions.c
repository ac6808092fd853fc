/*
 * FunctionProto → onyx__function, at load. The file is untrusted, so a function is
 * checked here as the loader checks the graph: its identity is unique, its inputs,
 * outputs and attribute parameters are named once each, every value its body reads is
 * a formal input or an output of an earlier body node, every formal output is
 * produced, and every attribute reference names a declared parameter. Inlining
 * (function_inline.c) then relies on all of that.
 *
 * Exporters attach fallback bodies for ops a runtime may implement natively (mobius
 * adds them to every model, used or not). A body that holds something Onyx cannot
 * represent (a subgraph attribute, an unsupported dtype) therefore must not refuse the
 * model: the function is kept by identity with the reason, and only a call that has
 * to be inlined fails.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "model_functions_impl.h"
#include "model_load_impl.h"

/* ------------------------------------------------------------------ name map */

static uint64_t hash_str(const char *s) {
  uint64_t h = UINT64_C(0xcbf29ce484222325); /* FNV-1a */
  for (; *s != '\0'; ++s) {
    h ^= (unsigned char)*s;
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

static bool map_alloc(onyx__name_map *m, size_t cap) {
  m->keys = calloc(cap, sizeof *m->keys);
  m->vals = malloc(cap * sizeof *m->vals);
  m->cap = cap;
  m->count = 0;
  return m->keys != NULL && m->vals != NULL;
}

static void map_insert_new(onyx__name_map *m, const char *key, int32_t val) {
  size_t mask = m->cap - 1;
  size_t slot = (size_t)hash_str(key) & mask;
  while (m->keys[slot] != NULL) slot = (slot + 1) & mask;
  m->keys[slot] = key;
  m->vals[slot] = val;
  ++m->count;
}

bool onyx__name_map_init(onyx__name_map *m, size_t expected) {
  size_t cap = 16;
  while (cap < 2 * expected + 2) cap *= 2;
  if (map_alloc(m, cap)) return true;
  onyx__name_map_free(m);
  return false;
}

/* Doubles the table, keeping every entry. */
static bool map_grow(onyx__name_map *m) {
  onyx__name_map bigger;
  if (!map_alloc(&bigger, m->cap * 2)) {
    onyx__name_map_free(&bigger);
    return false;
  }
  for (size_t i = 0; i < m->cap; ++i)
    if (m->keys[i] != NULL) map_insert_new(&bigger, m->keys[i], m->vals[i]);
  onyx__name_map_free(m);
  *m = bigger;
  return true;
}

bool onyx__name_map_put(onyx__name_map *m, const char *key, int32_t val) {
  size_t mask = m->cap - 1;
  for (size_t slot = (size_t)hash_str(key) & mask; m->keys[slot] != NULL;
       slot = (slot + 1) & mask) {
    if (strcmp(m->keys[slot], key) == 0) {
      m->vals[slot] = val;
      return true;
    }
  }
  if (2 * (m->count + 1) > m->cap && !map_grow(m)) return false;
  map_insert_new(m, key, val);
  return true;
}

bool onyx__name_map_get(const onyx__name_map *m, const char *key, int32_t *out_val) {
  if (m->cap == 0) return false;
  size_t mask = m->cap - 1;
  for (size_t slot = (size_t)hash_str(key) & mask; m->keys[slot] != NULL;
       slot = (slot + 1) & mask) {
    if (strcmp(m->keys[slot], key) == 0) {
      if (out_val != NULL) *out_val = m->vals[slot];
      return true;
    }
  }
  return false;
}

void onyx__name_map_free(onyx__name_map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------ attributes */

static char *dup_bytes(const char *s, size_t len) {
  char *d = malloc(len + 1);
  if (d == NULL) return NULL;
  if (len > 0) memcpy(d, s, len);
  d[len] = '\0';
  return d;
}

static bool copy_tensor(const onyx_tensor *src, onyx_attr *dst) {
  onyx_tensor *t = malloc(sizeof *t);
  if (t == NULL) return false;
  *t = *src;
  t->data = NULL;
  dst->tensor = t;
  uint64_t bytes = 0;
  if (onyx__ckd_tensor_bytes(&bytes, src)) return false;
  if (src->data == NULL || bytes == 0) return true;
  t->data = malloc(bytes);
  if (t->data == NULL) return false;
  memcpy(t->data, src->data, bytes);
  return true;
}

bool onyx__attr_copy(const onyx_attr *src, const char *name, onyx_attr *dst) {
  dst->type = src->type;
  dst->f = src->f;
  dst->i = src->i;
  if ((dst->name = onyx__strdup(name)) == NULL) return false;
  if (src->s != NULL) {
    if ((dst->s = dup_bytes(src->s, src->s_len)) == NULL) return false;
    dst->s_len = src->s_len;
  }
  if (src->floats != NULL && src->count > 0) {
    float *v = malloc(src->count * sizeof *v);
    if ((dst->floats = v) == NULL) return false;
    memcpy(v, src->floats, src->count * sizeof *v);
  }
  if (src->ints != NULL && src->count > 0) {
    int64_t *v = malloc(src->count * sizeof *v);
    if ((dst->ints = v) == NULL) return false;
    memcpy(v, src->ints, src->count * sizeof *v);
  }
  dst->count = src->count;
  if (src->strings != NULL && src->count > 0) {
    char **v = calloc(src->count, sizeof *v);
    if ((dst->strings = (const char *const *)v) == NULL) return false;
    for (size_t j = 0; j < src->count; ++j)
      if ((v[j] = onyx__strdup(src->strings[j])) == NULL) return false;
  }
  return src->tensor == NULL || copy_tensor(src->tensor, dst);
}

/* ------------------------------------------------------------------ look-ups */

static const char *normalise_domain(const char *domain) {
  if (domain == NULL || strcmp(domain, "ai.onnx") == 0) return "";
  return domain;
}

/* Orders by (domain, name, overload); `with_overload` false compares the first two. */
static int compare_id(const onyx__function *f, const char *domain, const char *name,
                      const char *overload, bool with_overload) {
  int c = strcmp(f->domain, domain);
  if (c == 0) c = strcmp(f->name, name);
  if (c == 0 && with_overload) c = strcmp(f->overload, overload);
  return c;
}

/* The first function in sorted order not below the key, as an index into order. */
static size_t lower_bound(const struct onyx__functions *lib, const char *domain, const char *name,
                          const char *overload, bool with_overload) {
  size_t lo = 0, hi = lib->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (compare_id(&lib->fns[lib->order[mid]], domain, name, overload, with_overload) < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

const onyx__function *onyx__functions_find(const struct onyx__functions *lib, const char *domain,
                                           const char *name, const char *overload) {
  if (lib == NULL) return NULL;
  domain = normalise_domain(domain);
  overload = overload != NULL ? overload : "";
  size_t at = lower_bound(lib, domain, name, overload, true);
  if (at < lib->count && compare_id(&lib->fns[lib->order[at]], domain, name, overload, true) == 0)
    return &lib->fns[lib->order[at]];
  return NULL;
}

/* Any function named (domain, name), whatever its overload, or NULL. */
static const onyx__function *find_any(const struct onyx__functions *lib, const char *domain,
                                      const char *name) {
  size_t at = lower_bound(lib, domain, name, "", false);
  if (at < lib->count && compare_id(&lib->fns[lib->order[at]], domain, name, "", false) == 0)
    return &lib->fns[lib->order[at]];
  return NULL;
}

const onyx__fn_type *onyx__function_type(const onyx__function *fn, const char *name) {
  size_t lo = 0, hi = fn->type_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(fn->types[mid].name, name);
    if (c == 0) return &fn->types[mid];
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return NULL;
}

/* ------------------------------------------------------------------ freeing */

static void free_names(char **names, size_t count) {
  if (names == NULL) return;
  for (size_t i = 0; i < count; ++i) free(names[i]);
  free(names);
}

static void free_node(onyx__fn_node *n) {
  free(n->name);
  free(n->op_type);
  free(n->domain);
  free(n->overload);
  free_names(n->inputs, n->input_count);
  free_names(n->outputs, n->output_count);
  onyx__attrs_free(n->attrs, n->attr_count);
  for (size_t i = 0; i < n->ref_count; ++i) {
    free(n->refs[i].name);
    free(n->refs[i].ref);
  }
  free(n->refs);
}

/* Frees the body and what describes it, keeping identity and signature. */
static void free_body(onyx__function *fn) {
  for (size_t k = 0; k < fn->node_count; ++k) free_node(&fn->nodes[k]);
  free(fn->nodes);
  fn->nodes = NULL;
  fn->node_count = 0;
  onyx__attrs_free(fn->defaults, fn->default_count);
  fn->defaults = NULL;
  fn->default_count = 0;
  for (size_t i = 0; i < fn->type_count; ++i) free(fn->types[i].name);
  free(fn->types);
  fn->types = NULL;
  fn->type_count = 0;
}

static void free_function(onyx__function *fn) {
  free_body(fn);
  free(fn->name);
  free(fn->domain);
  free(fn->overload);
  free(fn->label);
  free_names(fn->inputs, fn->input_count);
  free_names(fn->outputs, fn->output_count);
  free_names(fn->params, fn->param_count);
  for (size_t i = 0; i < fn->opset_count; ++i) free(fn->opsets[i].domain);
  free(fn->opsets);
  free(fn->unusable);
}

void onyx__function_notes_free(onyx__function_notes *nt) {
  if (nt == NULL) return;
  for (size_t i = 0; i < nt->call_count; ++i) {
    free(nt->calls[i].call);
    free(nt->calls[i].function);
    free(nt->calls[i].provider);
    free(nt->calls[i].omitted);
  }
  free(nt->calls);
  for (size_t i = 0; i < nt->omission_count; ++i) free(nt->omissions[i].node);
  free(nt->omissions);
  free(nt);
}

void onyx__functions_free(struct onyx__functions *lib) {
  if (lib == NULL) return;
  for (size_t i = 0; i < lib->count; ++i) free_function(&lib->fns[i]);
  free(lib->fns);
  free(lib->order);
  free_names(lib->node_overloads, lib->node_count);
  free(lib);
}

/* ------------------------------------------------------------------ reading */

static onyx_status oom(onyx__load_ctx *ctx, const char *desc) {
  return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
}

/* Copies `count` names; empty ones are refused unless `allow_empty`, and duplicates
 * (of non-empty names) are refused when `unique`. `what` names the list in messages. */
static onyx_status copy_names(onyx__load_ctx *ctx, const char *desc, const char *what,
                              char *const *src, size_t count, bool allow_empty, bool unique,
                              char ***out, size_t *out_count) {
  if (count == 0) return ONYX_STATUS_OK;
  char **names = calloc(count, sizeof *names);
  if (names == NULL) return oom(ctx, desc);
  *out = names;
  *out_count = count; /* set first: the caller frees the filled prefix */
  for (size_t i = 0; i < count; ++i) {
    if (src[i] == NULL || (!allow_empty && src[i][0] == '\0')) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "%s: %s %zu has no name", desc, what,
                             i);
    }
    if ((names[i] = onyx__strdup(src[i])) == NULL) return oom(ctx, desc);
  }
  if (!unique || count < 2) return ONYX_STATUS_OK;
  onyx__name_map seen;
  if (!onyx__name_map_init(&seen, count)) return oom(ctx, desc);
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < count && st == ONYX_STATUS_OK; ++i) {
    int32_t first = -1;
    if (names[i][0] == '\0') continue;
    if (onyx__name_map_get(&seen, names[i], &first)) {
      onyx__qname qn;
      st = onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: %s '%s' is listed twice (%ss %" PRId32 " and %zu)", desc, what,
                           onyx__qn(&qn, names[i]), what, first, i);
    } else if (!onyx__name_map_put(&seen, names[i], (int32_t)i)) {
      st = oom(ctx, desc);
    }
  }
  onyx__name_map_free(&seen);
  return st;
}

static onyx_status read_opsets(onyx__load_ctx *ctx, const char *desc, const Onnx__FunctionProto *fp,
                               onyx__function *fn) {
  if (fp->n_opset_import == 0) return ONYX_STATUS_OK;
  onyx__name_map seen = {0};
  fn->opsets = calloc(fp->n_opset_import, sizeof *fn->opsets);
  if (fn->opsets == NULL || !onyx__name_map_init(&seen, fp->n_opset_import)) return oom(ctx, desc);
  onyx_status st = ONYX_STATUS_OK;
  onyx__qname qd;
  for (size_t i = 0; i < fp->n_opset_import && st == ONYX_STATUS_OK; ++i) {
    const Onnx__OperatorSetIdProto *op = fp->opset_import[i];
    const char *domain = normalise_domain(op->domain);
    const char *shown = onyx__qn(&qd, domain[0] != '\0' ? domain : "ai.onnx");
    int32_t first = -1;
    if (!op->has_version || op->version < 1) {
      st = onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: opset import %zu (domain '%s') has %s version", desc, i, shown,
                           op->has_version ? "an invalid" : "no");
    } else if (onyx__name_map_get(&seen, domain, &first)) {
      st = onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: domain '%s' is imported twice (opset imports %" PRId32 " and %zu)",
                           desc, shown, first, i);
    } else if ((fn->opsets[i].domain = onyx__strdup(domain)) == NULL) {
      st = oom(ctx, desc);
    } else {
      fn->opsets[i].version = op->version;
      fn->opset_count = i + 1;
      if (!onyx__name_map_put(&seen, fn->opsets[i].domain, (int32_t)i)) st = oom(ctx, desc);
    }
  }
  onyx__name_map_free(&seen);
  return st;
}

/* Reads the attribute parameters, without a default and with one, into `declared`;
 * one name may not be both (IR.md: "The names in these two lists must be distinct"). */
static onyx_status read_params(onyx__load_ctx *ctx, const char *desc, const Onnx__FunctionProto *fp,
                               onyx__function *fn, onyx__name_map *declared) {
  onyx_status st = copy_names(ctx, desc, "attribute", fp->attribute, fp->n_attribute, false, true,
                              &fn->params, &fn->param_count);
  if (st != ONYX_STATUS_OK) return st;
  char what[400];
  snprintf(what, sizeof what, "%s: default", desc);
  st = onyx__attrs_from_proto(ctx, what, fp->attribute_proto, fp->n_attribute_proto, &fn->defaults);
  if (st != ONYX_STATUS_OK) return st;
  fn->default_count = fp->n_attribute_proto;
  if (!onyx__name_map_init(declared, fn->param_count + fn->default_count)) return oom(ctx, desc);
  for (size_t j = 0; j < fn->param_count; ++j)
    if (!onyx__name_map_put(declared, fn->params[j], 0)) return oom(ctx, desc);
  for (size_t i = 0; i < fn->default_count; ++i) {
    if (onyx__name_map_get(declared, fn->defaults[i].name, NULL)) {
      onyx__qname qn;
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: attribute '%s' is declared both without and with a default", desc,
                             onyx__qn(&qn, fn->defaults[i].name));
    }
    if (!onyx__name_map_put(declared, fn->defaults[i].name, 1)) return oom(ctx, desc);
  }
  return ONYX_STATUS_OK;
}

static onyx_status read_ref(onyx__load_ctx *ctx, const char *desc, const onyx__name_map *declared,
                            const Onnx__AttributeProto *a, onyx__fn_ref *out) {
  onyx__qname qn, qr;
  if (a->name == NULL || a->name[0] == '\0') {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: an attribute referring to '%s' has no name", desc,
                           onyx__qn(&qr, a->ref_attr_name));
  }
  if (!onyx__name_map_get(declared, a->ref_attr_name, NULL)) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: attribute '%s' refers to '%s', which the function does not "
                           "declare as an attribute",
                           desc, onyx__qn(&qn, a->name), onyx__qn(&qr, a->ref_attr_name));
  }
  out->type = a->has_type ? (uint32_t)a->type : ONYX_ATTR_UNDEFINED;
  out->name = onyx__strdup(a->name);
  out->ref = onyx__strdup(a->ref_attr_name);
  return out->name != NULL && out->ref != NULL ? ONYX_STATUS_OK : oom(ctx, desc);
}

static onyx_status check_attr_names(onyx__load_ctx *ctx, const char *desc, const onyx__fn_node *n) {
  onyx__name_map seen;
  if (!onyx__name_map_init(&seen, n->attr_count + n->ref_count)) return oom(ctx, desc);
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < n->attr_count + n->ref_count && st == ONYX_STATUS_OK; ++i) {
    const char *name = i < n->attr_count ? n->attrs[i].name : n->refs[i - n->attr_count].name;
    if (onyx__name_map_get(&seen, name, NULL)) {
      onyx__qname qn;
      st = onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "%s: attribute '%s' appears twice", desc,
                           onyx__qn(&qn, name));
    } else if (!onyx__name_map_put(&seen, name, 0)) {
      st = oom(ctx, desc);
    }
  }
  onyx__name_map_free(&seen);
  return st;
}

static bool is_ref(const Onnx__AttributeProto *a) {
  return a->ref_attr_name != NULL && a->ref_attr_name[0] != '\0';
}

/* Splits a body node's attributes into values (converted as the graph's are) and
 * references. A reference carries no value of its own (the checker refuses one that
 * does), so whatever value fields it sets are ignored. */
static onyx_status read_node_attrs(onyx__load_ctx *ctx, const char *desc,
                                   const onyx__name_map *declared, const Onnx__NodeProto *np,
                                   onyx__fn_node *n) {
  size_t refs = 0;
  for (size_t i = 0; i < np->n_attribute; ++i) refs += is_ref(np->attribute[i]);
  size_t values = np->n_attribute - refs;
  Onnx__AttributeProto **literal = values > 0 ? malloc(values * sizeof *literal) : NULL;
  n->refs = refs > 0 ? calloc(refs, sizeof *n->refs) : NULL;
  if ((values > 0 && literal == NULL) || (refs > 0 && n->refs == NULL)) {
    free(literal);
    return oom(ctx, desc);
  }
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0, v = 0; i < np->n_attribute && st == ONYX_STATUS_OK; ++i) {
    Onnx__AttributeProto *a = np->attribute[i];
    if (is_ref(a)) {
      st = read_ref(ctx, desc, declared, a, &n->refs[n->ref_count++]);
    } else {
      literal[v++] = a;
    }
  }
  if (st == ONYX_STATUS_OK) st = onyx__attrs_from_proto(ctx, desc, literal, values, &n->attrs);
  if (st == ONYX_STATUS_OK) n->attr_count = values;
  free(literal);
  return st == ONYX_STATUS_OK ? check_attr_names(ctx, desc, n) : st;
}

static void describe_body_node(char *buf, size_t cap, const char *fdesc, size_t k, const char *name,
                               const char *domain, const char *op_type) {
  onyx__qname qn, qd, qo;
  bool named = name != NULL && name[0] != '\0';
  domain = normalise_domain(domain);
  snprintf(buf, cap, "%s: node %zu%s%s%s (%s%s%s)", fdesc, k, named ? " '" : "",
           named ? onyx__qn(&qn, name) : "", named ? "'" : "", onyx__qn(&qd, domain),
           domain[0] != '\0' ? ":" : "", onyx__qn(&qo, op_type));
}

static onyx_status read_node(onyx__load_ctx *ctx, const char *fdesc, const onyx__name_map *declared,
                             size_t k, const Onnx__NodeProto *np, onyx__fn_node *n) {
  char desc[480];
  describe_body_node(desc, sizeof desc, fdesc, k, np->name, np->domain, np->op_type);
  if (np->op_type == NULL || np->op_type[0] == '\0')
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "%s: has no op_type", desc);
  n->name = onyx__strdup(np->name);
  n->op_type = onyx__strdup(np->op_type);
  n->domain = onyx__strdup(normalise_domain(np->domain));
  n->overload = onyx__strdup(np->overload);
  if (!n->name || !n->op_type || !n->domain || !n->overload) return oom(ctx, desc);
  onyx_status st = copy_names(ctx, desc, "input", np->input, np->n_input, true, false, &n->inputs,
                              &n->input_count);
  if (st == ONYX_STATUS_OK)
    st = copy_names(ctx, desc, "output", np->output, np->n_output, true, true, &n->outputs,
                    &n->output_count);
  return st == ONYX_STATUS_OK ? read_node_attrs(ctx, desc, declared, np, n) : st;
}

static onyx_status read_body(onyx__load_ctx *ctx, const char *desc, const Onnx__FunctionProto *fp,
                             const onyx__name_map *declared, onyx__function *fn) {
  if (fp->n_node == 0) return ONYX_STATUS_OK;
  fn->nodes = calloc(fp->n_node, sizeof *fn->nodes);
  if (fn->nodes == NULL) return oom(ctx, desc);
  for (size_t k = 0; k < fp->n_node; ++k) {
    fn->node_count = k + 1; /* zeroed, so freeing a partial node is safe */
    onyx_status st = read_node(ctx, desc, declared, k, fp->node[k], &fn->nodes[k]);
    if (st != ONYX_STATUS_OK) return st;
  }
  return ONYX_STATUS_OK;
}

/* Checks the body's dataflow by name: every read defined before, every value defined
 * once, every formal output produced by a node. In `defined`, a formal input maps to
 * -1 and a node output to its node. */
static onyx_status check_dataflow(onyx__load_ctx *ctx, const char *desc, const onyx__function *fn,
                                  onyx__name_map *defined) {
  onyx__qname qn;
  char node[480];
  for (size_t i = 0; i < fn->input_count; ++i)
    if (!onyx__name_map_put(defined, fn->inputs[i], -1)) return oom(ctx, desc);
  for (size_t k = 0; k < fn->node_count; ++k) {
    const onyx__fn_node *n = &fn->nodes[k];
    describe_body_node(node, sizeof node, desc, k, n->name, n->domain, n->op_type);
    for (size_t j = 0; j < n->input_count; ++j) {
      if (n->inputs[j][0] != '\0' && !onyx__name_map_get(defined, n->inputs[j], NULL)) {
        return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                               "%s: input %zu '%s' is not an input of the function or an output "
                               "of an earlier node of its body",
                               node, j, onyx__qn(&qn, n->inputs[j]));
      }
    }
    for (size_t j = 0; j < n->output_count; ++j) {
      if (n->outputs[j][0] == '\0') continue;
      if (onyx__name_map_get(defined, n->outputs[j], NULL)) {
        return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                               "%s: output %zu '%s' is already defined in the function", node, j,
                               onyx__qn(&qn, n->outputs[j]));
      }
      if (!onyx__name_map_put(defined, n->outputs[j], (int32_t)k)) return oom(ctx, desc);
    }
  }
  for (size_t j = 0; j < fn->output_count; ++j) {
    int32_t producer = -2;
    if (onyx__name_map_get(defined, fn->outputs[j], &producer) && producer >= 0) continue;
    if (producer == -1) {
      /* Valid ONNX, but the call's output would have to alias its input. */
      return onyx__load_fail(ctx, ONYX_STATUS_UNSUPPORTED,
                             "%s: output %zu '%s' is also an input of the function; Onyx inlines "
                             "only outputs that a body node produces",
                             desc, j, onyx__qn(&qn, fn->outputs[j]));
    }
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: output %zu '%s' is not produced by any node of its body", desc, j,
                           onyx__qn(&qn, fn->outputs[j]));
  }
  return ONYX_STATUS_OK;
}

static int compare_type(const void *a, const void *b) {
  return strcmp(((const onyx__fn_type *)a)->name, ((const onyx__fn_type *)b)->name);
}

/* value_info is a hint: types Onyx cannot hold are left unknown, never refused. */
static void read_type(const Onnx__ValueInfoProto *vi, onyx__fn_type *t) {
  t->dtype = ONYX_DTYPE_UNDEFINED;
  t->rank = -1;
  const Onnx__TypeProto__Tensor *tt = vi->type != NULL ? vi->type->tensor_type : NULL;
  if (tt == NULL) return;
  if (tt->has_elem_type && tt->elem_type > 0 && onyx_dtype_size((uint32_t)tt->elem_type) > 0)
    t->dtype = (uint32_t)tt->elem_type;
  if (tt->shape == NULL || tt->shape->n_dim > ONYX_MAX_RANK) return;
  for (size_t i = 0; i < tt->shape->n_dim; ++i) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    t->dims[i] = d->has_dim_value && d->dim_value >= 0 ? d->dim_value : -1;
  }
  t->rank = (int32_t)tt->shape->n_dim;
}

/* Reads value_info; of two entries for one name the first wins, as in the graph. */
static onyx_status read_types(onyx__load_ctx *ctx, const char *desc, const Onnx__FunctionProto *fp,
                              onyx__function *fn) {
  if (fp->n_value_info == 0) return ONYX_STATUS_OK;
  onyx__name_map seen = {0};
  fn->types = calloc(fp->n_value_info, sizeof *fn->types);
  if (fn->types == NULL || !onyx__name_map_init(&seen, fp->n_value_info)) return oom(ctx, desc);
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < fp->n_value_info && st == ONYX_STATUS_OK; ++i) {
    const Onnx__ValueInfoProto *vi = fp->value_info[i];
    if (vi->name == NULL || vi->name[0] == '\0' || onyx__name_map_get(&seen, vi->name, NULL))
      continue;
    onyx__fn_type *t = &fn->types[fn->type_count];
    if ((t->name = onyx__strdup(vi->name)) == NULL) {
      st = oom(ctx, desc);
      break;
    }
    fn->type_count++;
    read_type(vi, t);
    if (!onyx__name_map_put(&seen, t->name, 0)) st = oom(ctx, desc);
  }
  onyx__name_map_free(&seen);
  if (st == ONYX_STATUS_OK) qsort(fn->types, fn->type_count, sizeof *fn->types, compare_type);
  return st;
}

/* Keeps `fn` by identity without a body: the reason (the message just written) is
 * given again by a call that has to be inlined. */
static onyx_status defer(onyx__load_ctx *ctx, onyx__function *fn) {
  free_body(fn);
  const char *why = ctx->err != NULL && ctx->err[0] != '\0'
                        ? ctx->err
                        : "its body holds what Onyx cannot represent";
  size_t what = strlen(ctx->what); /* the message is given again under another prefix */
  if (strncmp(why, ctx->what, what) == 0 && strncmp(why + what, ": ", 2) == 0) why += what + 2;
  if ((fn->unusable = onyx__strdup(why)) == NULL)
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (local functions)");
  if (ctx->err != NULL && ctx->err_cap > 0) ctx->err[0] = '\0';
  return ONYX_STATUS_OK;
}

static onyx_status read_identity(onyx__load_ctx *ctx, size_t index, const Onnx__FunctionProto *fp,
                                 onyx__function *fn, char *desc, size_t desc_cap) {
  if (fp->name == NULL || fp->name[0] == '\0') {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "model-local function %zu has no name",
                           index);
  }
  fn->name = onyx__strdup(fp->name);
  fn->domain = onyx__strdup(normalise_domain(fp->domain));
  fn->overload = onyx__strdup(fp->overload);
  if (!fn->name || !fn->domain || !fn->overload)
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (local functions)");
  onyx__qname qd, qn, qo;
  char label[320];
  snprintf(label, sizeof label, "%s::%s%s%s%s",
           onyx__qn(&qd, fn->domain[0] != '\0' ? fn->domain : "ai.onnx"), onyx__qn(&qn, fn->name),
           fn->overload[0] != '\0' ? " overload '" : "", onyx__qn(&qo, fn->overload),
           fn->overload[0] != '\0' ? "'" : "");
  if ((fn->label = onyx__strdup(label)) == NULL)
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (local functions)");
  snprintf(desc, desc_cap, "model-local function %zu '%s'", index, label);
  return ONYX_STATUS_OK;
}

static onyx_status read_function(onyx__load_ctx *ctx, size_t index, Onnx__FunctionProto *fp,
                                 onyx__function *fn) {
  char desc[384];
  onyx__name_map declared = {0}, defined = {0};
  onyx_status st = read_identity(ctx, index, fp, fn, desc, sizeof desc);
  if (st == ONYX_STATUS_OK)
    st = copy_names(ctx, desc, "input", fp->input, fp->n_input, false, true, &fn->inputs,
                    &fn->input_count);
  if (st == ONYX_STATUS_OK)
    st = copy_names(ctx, desc, "output", fp->output, fp->n_output, false, true, &fn->outputs,
                    &fn->output_count);
  if (st == ONYX_STATUS_OK) st = read_opsets(ctx, desc, fp, fn);
  if (st == ONYX_STATUS_OK) st = read_params(ctx, desc, fp, fn, &declared);
  if (st == ONYX_STATUS_OK) st = read_body(ctx, desc, fp, &declared, fn);
  if (st == ONYX_STATUS_OK && !onyx__name_map_init(&defined, fn->input_count + fn->node_count))
    st = oom(ctx, desc);
  if (st == ONYX_STATUS_OK) st = check_dataflow(ctx, desc, fn, &defined);
  if (st == ONYX_STATUS_OK) st = read_types(ctx, desc, fp, fn);
  onyx__name_map_free(&declared);
  onyx__name_map_free(&defined);
  return st == ONYX_STATUS_UNSUPPORTED ? defer(ctx, fn) : st;
}

/* ------------------------------------------------------------------ the library */

/* A function's identity with its position, sorted to find duplicates and calls. */
typedef struct fn_key {
  const onyx__function *fn;
  size_t index;
} fn_key;

static int compare_key(const void *a, const void *b) {
  const fn_key *x = a;
  const fn_key *y = b;
  int c = compare_id(x->fn, y->fn->domain, y->fn->name, y->fn->overload, true);
  if (c == 0) c = x->index < y->index ? -1 : x->index > y->index;
  return c;
}

static onyx_status sort_library(onyx__load_ctx *ctx, struct onyx__functions *lib) {
  fn_key *keys = malloc(lib->count * sizeof *keys);
  lib->order = malloc(lib->count * sizeof *lib->order);
  if (keys == NULL || lib->order == NULL) {
    free(keys);
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (local functions)");
  }
  for (size_t i = 0; i < lib->count; ++i) keys[i] = (fn_key){&lib->fns[i], i};
  qsort(keys, lib->count, sizeof *keys, compare_key);
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < lib->count; ++i) {
    lib->order[i] = keys[i].index;
    const onyx__function *f = keys[i].fn;
    if (i > 0 && compare_id(keys[i - 1].fn, f->domain, f->name, f->overload, true) == 0) {
      st = onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "model-local function '%s' is defined twice (functions %zu and %zu)",
                           f->label, keys[i - 1].index, keys[i].index);
      break;
    }
  }
  free(keys);
  return st;
}

/* Records the overload each graph node names. A node naming an overload that its
 * (domain, op_type) function lacks calls nothing that exists: refused by name. */
static onyx_status read_node_overloads(onyx__load_ctx *ctx, struct onyx__functions *lib,
                                       const Onnx__GraphProto *gp) {
  if (gp == NULL || gp->n_node == 0) return ONYX_STATUS_OK;
  lib->node_overloads = calloc(gp->n_node, sizeof *lib->node_overloads);
  if (lib->node_overloads == NULL)
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (local functions)");
  lib->node_count = gp->n_node;
  for (size_t k = 0; k < gp->n_node; ++k) {
    const Onnx__NodeProto *np = gp->node[k];
    if (np->overload == NULL || np->overload[0] == '\0' || np->op_type == NULL) continue;
    const char *domain = normalise_domain(np->domain);
    if (onyx__functions_find(lib, domain, np->op_type, np->overload) == NULL) {
      const onyx__function *any = find_any(lib, domain, np->op_type);
      if (any == NULL) continue; /* not a function call: the overload means nothing */
      onyx__qname qn, qo, qd, qf;
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "node %zu '%s': calls overload '%s' of '%s::%s', which the model "
                             "does not define",
                             k, onyx__qn(&qn, np->name), onyx__qn(&qo, np->overload),
                             onyx__qn(&qd, domain[0] != '\0' ? domain : "ai.onnx"),
                             onyx__qn(&qf, any->name));
    }
    if ((lib->node_overloads[k] = onyx__strdup(np->overload)) == NULL)
      return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (local functions)");
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__functions_load(onyx__load_ctx *ctx, Onnx__ModelProto *m,
                                 struct onyx__functions **out) {
  *out = NULL;
  if (m->n_functions == 0) return ONYX_STATUS_OK;
  struct onyx__functions *lib = calloc(1, sizeof *lib);
  if (lib == NULL || (lib->fns = calloc(m->n_functions, sizeof *lib->fns)) == NULL) {
    free(lib);
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (local functions)");
  }
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < m->n_functions && st == ONYX_STATUS_OK; ++i) {
    lib->count = i + 1; /* zeroed, so freeing a partial function is safe */
    st = read_function(ctx, i, m->functions[i], &lib->fns[i]);
  }
  if (st == ONYX_STATUS_OK) st = sort_library(ctx, lib);
  if (st == ONYX_STATUS_OK) st = read_node_overloads(ctx, lib, m->graph);
  if (st != ONYX_STATUS_OK) {
    onyx__functions_free(lib);
    return st;
  }
  *out = lib;
  return ONYX_STATUS_OK;
}
