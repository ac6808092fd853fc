/* Helpers for the loader tests; see loader_test_util.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader_test_util.h"

void *lt_alloc(lt_arena *a, size_t size) {
  if (a->count == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 64;
    void **ptrs = realloc(a->ptrs, cap * sizeof *ptrs);
    assert_non_null(ptrs);
    a->ptrs = ptrs;
    a->cap = cap;
  }
  void *p = calloc(1, size ? size : 1);
  assert_non_null(p);
  a->ptrs[a->count++] = p;
  return p;
}

char *lt_str(lt_arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = lt_alloc(a, n);
  memcpy(copy, s, n);
  return copy;
}

void lt_arena_free(lt_arena *a) {
  for (size_t i = 0; i < a->count; ++i) free(a->ptrs[i]);
  free(a->ptrs);
  memset(a, 0, sizeof *a);
}

void lt_push(lt_arena *a, void *items_field, size_t *count, void *item) {
  void ***items = items_field;
  void **grown = lt_alloc(a, (*count + 1) * sizeof *grown);
  if (*count > 0) memcpy(grown, *items, *count * sizeof *grown);
  grown[*count] = item;
  *items = grown;
  ++*count;
}

void lt_opset(lt_arena *a, Onnx__ModelProto *m, const char *domain, int64_t version) {
  Onnx__OperatorSetIdProto *op = lt_alloc(a, sizeof *op);
  onnx__operator_set_id_proto__init(op);
  op->domain = lt_str(a, domain);
  op->has_version = 1;
  op->version = version;
  lt_push(a, &m->opset_import, &m->n_opset_import, op);
}

Onnx__ModelProto *lt_model(lt_arena *a, int64_t onnx_opset) {
  Onnx__ModelProto *m = lt_alloc(a, sizeof *m);
  onnx__model_proto__init(m);
  m->has_ir_version = 1;
  m->ir_version = 8;
  if (onnx_opset > 0) lt_opset(a, m, "", onnx_opset);
  m->graph = lt_alloc(a, sizeof *m->graph);
  onnx__graph_proto__init(m->graph);
  m->graph->name = lt_str(a, "test_graph");
  return m;
}

Onnx__ValueInfoProto *lt_value_info(lt_arena *a, const char *name, int32_t dtype, int rank,
                                    const int64_t *dims) {
  Onnx__ValueInfoProto *vi = lt_alloc(a, sizeof *vi);
  onnx__value_info_proto__init(vi);
  vi->name = lt_str(a, name);
  vi->type = lt_alloc(a, sizeof *vi->type);
  onnx__type_proto__init(vi->type);
  Onnx__TypeProto__Tensor *tt = lt_alloc(a, sizeof *tt);
  onnx__type_proto__tensor__init(tt);
  vi->type->tensor_type = tt;
  if (dtype != 0) {
    tt->has_elem_type = 1;
    tt->elem_type = dtype;
  }
  if (rank >= 0) {
    tt->shape = lt_alloc(a, sizeof *tt->shape);
    onnx__tensor_shape_proto__init(tt->shape);
    for (int i = 0; i < rank; ++i) {
      Onnx__TensorShapeProto__Dimension *d = lt_alloc(a, sizeof *d);
      onnx__tensor_shape_proto__dimension__init(d);
      if (dims[i] >= 0) {
        d->has_dim_value = 1;
        d->dim_value = dims[i];
      } else {
        char sym[16];
        snprintf(sym, sizeof sym, "d%d", i);
        d->dim_param = lt_str(a, sym);
      }
      lt_push(a, &tt->shape->dim, &tt->shape->n_dim, d);
    }
  }
  return vi;
}

void lt_input(lt_arena *a, Onnx__GraphProto *g, const char *name, int32_t dtype, int rank,
              const int64_t *dims) {
  lt_push(a, &g->input, &g->n_input, lt_value_info(a, name, dtype, rank, dims));
}

void lt_output(lt_arena *a, Onnx__GraphProto *g, const char *name, int32_t dtype, int rank,
               const int64_t *dims) {
  lt_push(a, &g->output, &g->n_output, lt_value_info(a, name, dtype, rank, dims));
}

Onnx__TensorProto *lt_tensor(lt_arena *a, const char *name, int32_t dtype, size_t rank,
                             const int64_t *dims) {
  Onnx__TensorProto *t = lt_alloc(a, sizeof *t);
  onnx__tensor_proto__init(t);
  if (name != NULL) t->name = lt_str(a, name);
  t->has_data_type = 1;
  t->data_type = dtype;
  t->n_dims = rank;
  t->dims = lt_alloc(a, (rank ? rank : 1) * sizeof *t->dims);
  if (rank > 0) memcpy(t->dims, dims, rank * sizeof *dims);
  return t;
}

void lt_raw(lt_arena *a, Onnx__TensorProto *t, const void *bytes, size_t size) {
  t->has_raw_data = 1;
  t->raw_data.len = size;
  t->raw_data.data = lt_alloc(a, size);
  if (size > 0) memcpy(t->raw_data.data, bytes, size);
}

void lt_floats(lt_arena *a, Onnx__TensorProto *t, const float *v, size_t n) {
  t->float_data = lt_alloc(a, n * sizeof *v);
  if (n > 0) memcpy(t->float_data, v, n * sizeof *v);
  t->n_float_data = n;
}

void lt_int64s(lt_arena *a, Onnx__TensorProto *t, const int64_t *v, size_t n) {
  t->int64_data = lt_alloc(a, n * sizeof *v);
  if (n > 0) memcpy(t->int64_data, v, n * sizeof *v);
  t->n_int64_data = n;
}

void lt_int32s(lt_arena *a, Onnx__TensorProto *t, const int32_t *v, size_t n) {
  t->int32_data = lt_alloc(a, n * sizeof *v);
  if (n > 0) memcpy(t->int32_data, v, n * sizeof *v);
  t->n_int32_data = n;
}

static void add_entry(lt_arena *a, Onnx__TensorProto *t, const char *key, const char *value) {
  Onnx__StringStringEntryProto *e = lt_alloc(a, sizeof *e);
  onnx__string_string_entry_proto__init(e);
  e->key = lt_str(a, key);
  e->value = lt_str(a, value);
  lt_push(a, &t->external_data, &t->n_external_data, e);
}

void lt_external(lt_arena *a, Onnx__TensorProto *t, const char *location, const char *offset,
                 const char *length) {
  t->has_data_location = 1;
  t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  add_entry(a, t, "location", location);
  if (offset != NULL) add_entry(a, t, "offset", offset);
  if (length != NULL) add_entry(a, t, "length", length);
}

void lt_initializer(lt_arena *a, Onnx__GraphProto *g, Onnx__TensorProto *t) {
  lt_push(a, &g->initializer, &g->n_initializer, t);
}

Onnx__NodeProto *lt_node(lt_arena *a, Onnx__GraphProto *g, const char *op_type, const char *name,
                         const char *const *inputs, const char *const *outputs) {
  Onnx__NodeProto *n = lt_alloc(a, sizeof *n);
  onnx__node_proto__init(n);
  n->op_type = lt_str(a, op_type);
  if (name != NULL) n->name = lt_str(a, name);
  for (size_t i = 0; inputs != NULL && inputs[i] != NULL; ++i) {
    lt_push(a, &n->input, &n->n_input, lt_str(a, inputs[i]));
  }
  for (size_t i = 0; outputs != NULL && outputs[i] != NULL; ++i) {
    lt_push(a, &n->output, &n->n_output, lt_str(a, outputs[i]));
  }
  lt_push(a, &g->node, &g->n_node, n);
  return n;
}

Onnx__AttributeProto *lt_attr(lt_arena *a, Onnx__NodeProto *n, const char *name, int type) {
  Onnx__AttributeProto *at = lt_alloc(a, sizeof *at);
  onnx__attribute_proto__init(at);
  at->name = lt_str(a, name);
  if (type != 0) {
    at->has_type = 1;
    at->type = (Onnx__AttributeProto__AttributeType)type;
  }
  lt_push(a, &n->attribute, &n->n_attribute, at);
  return at;
}

uint8_t *lt_pack(lt_arena *a, const Onnx__ModelProto *m, size_t *out_size) {
  size_t size = onnx__model_proto__get_packed_size(m);
  uint8_t *bytes = lt_alloc(a, size);
  assert_int_equal(onnx__model_proto__pack(m, bytes), size);
  *out_size = size;
  return bytes;
}

uint8_t *lt_pack_tensor(lt_arena *a, const Onnx__TensorProto *t, size_t *out_size) {
  size_t size = onnx__tensor_proto__get_packed_size(t);
  uint8_t *bytes = lt_alloc(a, size);
  assert_int_equal(onnx__tensor_proto__pack(t, bytes), size);
  *out_size = size;
  return bytes;
}

Onnx__ModelProto *lt_rich_model(lt_arena *a) {
  Onnx__ModelProto *m = lt_model(a, 17);
  lt_opset(a, m, "com.test", 1);
  Onnx__GraphProto *g = m->graph;
  const int64_t d23[] = {2, 3}, d3[] = {3}, d2[] = {2}, dsym[] = {2, -1}, dbatch[] = {-1, 3};
  const int64_t d0[] = {0};

  lt_input(a, g, "x", ONYX_DTYPE_FLOAT32, 2, d23);
  lt_input(a, g, "bias", ONYX_DTYPE_FLOAT32, 1, d3); /* also an initializer below */

  const float w[] = {1, 2, 3, 4, 5, 6};
  Onnx__TensorProto *t = lt_tensor(a, "W", ONYX_DTYPE_FLOAT32, 2, d23);
  lt_raw(a, t, w, sizeof w);
  lt_initializer(a, g, t);
  const float bias[] = {0.5f, 1.5f, 2.5f};
  t = lt_tensor(a, "bias", ONYX_DTYPE_FLOAT32, 1, d3);
  lt_floats(a, t, bias, 3);
  lt_initializer(a, g, t);
  const int64_t idx[] = {0, 1};
  t = lt_tensor(a, "idx", ONYX_DTYPE_INT64, 1, d2);
  lt_int64s(a, t, idx, 2);
  lt_initializer(a, g, t);
  const int32_t half[] = {0x3c00, (int32_t)0xffffc000}; /* 1.0 and -2.0, sign-extended */
  t = lt_tensor(a, "h", ONYX_DTYPE_FLOAT16, 1, d2);
  lt_int32s(a, t, half, 2);
  lt_initializer(a, g, t);
  const int32_t flags[] = {1, 0, 5};
  t = lt_tensor(a, "flag", ONYX_DTYPE_BOOL, 1, d3);
  lt_int32s(a, t, flags, 3);
  lt_initializer(a, g, t);
  t = lt_tensor(a, "u32", ONYX_DTYPE_UINT32, 1, d2);
  t->uint64_data = lt_alloc(a, 2 * sizeof(uint64_t));
  t->uint64_data[0] = 7;
  t->uint64_data[1] = UINT64_C(0x100000005);
  t->n_uint64_data = 2;
  lt_initializer(a, g, t);
  t = lt_tensor(a, "empty", ONYX_DTYPE_FLOAT32, 1, d0);
  lt_initializer(a, g, t);
  t = lt_tensor(a, "scalar", ONYX_DTYPE_FLOAT64, 0, NULL);
  t->double_data = lt_alloc(a, sizeof(double));
  t->double_data[0] = 2.5;
  t->n_double_data = 1;
  lt_initializer(a, g, t);

  lt_node(a, g, "Add", "n0", (const char *[]){"x", "W", NULL}, (const char *[]){"t", NULL});
  lt_node(a, g, "Add", "n1", (const char *[]){"t", "bias", NULL}, (const char *[]){"u", NULL});
  Onnx__NodeProto *n = lt_node(a, g, "Custom", NULL, (const char *[]){"u", "", "idx", NULL},
                               (const char *[]){"y", "", NULL});
  n->domain = lt_str(a, "com.test");
  Onnx__AttributeProto *at = lt_attr(a, n, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  at->has_f = 1;
  at->f = 0.25f;
  at = lt_attr(a, n, "k", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  at->has_i = 1;
  at->i = -3;
  at = lt_attr(a, n, "mode", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
  at->has_s = 1;
  at->s.len = 3;
  at->s.data = (uint8_t *)lt_str(a, "abc");
  at = lt_attr(a, n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  const int64_t tv[] = {4, 5};
  at->t = lt_tensor(a, NULL, ONYX_DTYPE_INT64, 1, d2);
  lt_int64s(a, at->t, tv, 2);
  at = lt_attr(a, n, "scales", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
  at->floats = lt_alloc(a, 2 * sizeof(float));
  at->floats[0] = 1.0f;
  at->floats[1] = 2.0f;
  at->n_floats = 2;
  at = lt_attr(a, n, "axes", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  at->ints = lt_alloc(a, 3 * sizeof(int64_t));
  at->ints[0] = 0;
  at->ints[1] = -1;
  at->ints[2] = 2;
  at->n_ints = 3;
  at = lt_attr(a, n, "names", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
  at->strings = lt_alloc(a, 2 * sizeof(ProtobufCBinaryData));
  at->strings[0] = (ProtobufCBinaryData){1, (uint8_t *)lt_str(a, "p")};
  at->strings[1] = (ProtobufCBinaryData){2, (uint8_t *)lt_str(a, "qq")};
  at->n_strings = 2;
  lt_attr(a, n, "empty_ints", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  at = lt_attr(a, n, "untyped", 0); /* type left out: inferred from the field set */
  at->has_i = 1;
  at->i = 42;

  lt_output(a, g, "y", ONYX_DTYPE_FLOAT32, 2, dsym);
  lt_push(a, &g->value_info, &g->n_value_info, lt_value_info(a, "t", ONYX_DTYPE_FLOAT32, 2, d23));
  lt_push(a, &g->value_info, &g->n_value_info,
          lt_value_info(a, "u", ONYX_DTYPE_FLOAT32, 2, dbatch));
  lt_push(a, &g->value_info, &g->n_value_info, lt_value_info(a, "ghost", ONYX_DTYPE_INT8, 0, NULL));
  return m;
}

char *lt_mkdtemp(void) {
  const char *tmp = getenv("TMPDIR");
  if (tmp == NULL || tmp[0] == '\0') tmp = "/tmp";
  size_t n = strlen(tmp) + 32;
  char *path = malloc(n);
  assert_non_null(path);
  snprintf(path, n, "%s/onyx_loader_XXXXXX", tmp);
  assert_non_null(mkdtemp(path));
  return path;
}

void lt_rmtree(const char *path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR *d = opendir(path);
    if (d != NULL) {
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        lt_rmtree(child);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

void lt_write_file(const char *path, const void *bytes, size_t size) {
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  if (size > 0) assert_int_equal(fwrite(bytes, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
}

void lt_check_graph(const onyx__graph *g) {
  assert_non_null(g);
  assert_non_null(g->name);
  for (size_t i = 0; i < g->value_count; ++i) {
    const onyx__value *v = &g->values[i];
    assert_non_null(v->name);
    assert_true(v->name[0] != '\0');
    assert_int_equal(onyx__graph_find_value(g, v->name), (int32_t)i);
    assert_true(v->rank >= -1 && v->rank <= ONYX_MAX_RANK);
    for (int32_t d = 0; d < v->rank; ++d) assert_true(v->dims[d] >= -1);
    assert_true(v->producer >= -1 && v->producer < (int32_t)g->node_count);
    if (v->is_initializer) {
      assert_false(v->is_input);
      assert_int_equal(v->producer, -1);
      assert_int_equal(v->dtype, v->init.dtype);
      assert_int_equal(v->rank, (int32_t)v->init.rank);
      assert_int_equal(v->init.device, ONYX_DEVICE_HOST);
      int64_t numel = onyx_tensor_numel(&v->init);
      assert_true(numel >= 0);
      assert_true((numel > 0) == (v->init.data != NULL));
    } else {
      assert_null(v->init.data);
    }
    if (v->is_input) assert_int_equal(v->producer, -1);
    if (!v->is_input && !v->is_initializer) assert_true(v->producer >= 0);
  }
  for (size_t k = 0; k < g->node_count; ++k) {
    const onyx__node *n = &g->nodes[k];
    assert_non_null(n->name);
    assert_non_null(n->op_type);
    assert_non_null(n->domain);
    assert_int_equal(n->opset, onyx__graph_opset(g, n->domain));
    assert_true(n->opset > 0);
    for (size_t j = 0; j < n->input_count; ++j) {
      int32_t v = n->inputs[j];
      assert_true(v >= -1 && v < (int32_t)g->value_count);
      if (v >= 0) assert_true(g->values[v].producer < (int32_t)k); /* topological */
    }
    for (size_t j = 0; j < n->output_count; ++j) {
      int32_t v = n->outputs[j];
      assert_true(v >= -1 && v < (int32_t)g->value_count);
      if (v >= 0) assert_int_equal(g->values[v].producer, (int32_t)k);
    }
    for (size_t j = 0; j < n->attr_count; ++j) {
      assert_non_null(n->attrs[j].name);
      if (n->attrs[j].type == ONYX_ATTR_TENSOR) assert_non_null(n->attrs[j].tensor);
      if (n->attrs[j].type == ONYX_ATTR_STRING) assert_non_null(n->attrs[j].s);
    }
  }
  for (size_t i = 0; i < g->input_count; ++i) {
    assert_true(g->inputs[i] >= 0 && g->inputs[i] < (int32_t)g->value_count);
    assert_true(g->values[g->inputs[i]].is_input);
  }
  for (size_t i = 0; i < g->output_count; ++i) {
    assert_true(g->outputs[i] >= 0 && g->outputs[i] < (int32_t)g->value_count);
    assert_true(g->values[g->outputs[i]].is_output);
  }
}

void lt_check_error(onyx_status got, onyx_status want, const char *err, const char *prefix,
                    const char *const *needles) {
  if (got == ONYX_STATUS_OK) fail_msg("%s", "expected a failure, got OK");
  if (want != ONYX_STATUS_OK && got != want) {
    fail_msg("status: want %d (%s), got %d (%s); message: %s", want, onyx_status_str(want), got,
             onyx_status_str(got), err);
  }
  if (err[0] == '\0') fail_msg("%s", "empty error message");
  if (prefix != NULL && strncmp(err, prefix, strlen(prefix)) != 0) {
    fail_msg("message does not start with '%s': %s", prefix, err);
  }
  for (size_t i = 0; needles != NULL && needles[i] != NULL; ++i) {
    if (strstr(err, needles[i]) == NULL) fail_msg("message lacks '%s': %s", needles[i], err);
  }
}
