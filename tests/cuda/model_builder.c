/*
 * Protobuf wire format, the few parts an ONNX ModelProto needs: varints, 32-bit
 * floats and length-delimited fields. Messages are built inside out into growable
 * byte buffers; a failed allocation makes the final mb_finish return NULL.
 */
#include "model_builder.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct buf {
  uint8_t *p;
  size_t n, cap;
  bool failed;
} buf;

static void buf_put(buf *b, const void *data, size_t n) {
  if (b->failed) return;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->n + n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (p == NULL) {
      b->failed = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  if (n) memcpy(b->p + b->n, data, n);
  b->n += n;
}

static void put_varint(buf *b, uint64_t v) {
  uint8_t tmp[10];
  size_t n = 0;
  do {
    tmp[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v) tmp[n] |= 0x80;
    ++n;
  } while (v);
  buf_put(b, tmp, n);
}

static void put_tag(buf *b, unsigned field, unsigned wire) {
  put_varint(b, (uint64_t)field << 3 | wire);
}

static void put_int(buf *b, unsigned field, int64_t v) {
  put_tag(b, field, 0);
  put_varint(b, (uint64_t)v);
}

static void put_bytes(buf *b, unsigned field, const void *data, size_t n) {
  put_tag(b, field, 2);
  put_varint(b, n);
  buf_put(b, data, n);
}

static void put_str(buf *b, unsigned field, const char *s) { put_bytes(b, field, s, strlen(s)); }

static void put_msg(buf *b, unsigned field, buf *msg) {
  if (msg->failed) b->failed = true;
  put_bytes(b, field, msg->p, msg->n);
  free(msg->p);
  memset(msg, 0, sizeof *msg);
}

static void put_float(buf *b, unsigned field, float f) {
  put_tag(b, field, 5);
  uint8_t bytes[4];
  memcpy(bytes, &f, 4);
  buf_put(b, bytes, 4);
}

struct mb_node {
  buf b;
  mb_node *next;
};

struct mb_model {
  int64_t opset;
  buf graph_inputs, graph_outputs, inits;
  mb_node *nodes, *last;
  bool failed;
};

mb_model *mb_new(int64_t opset) {
  mb_model *m = calloc(1, sizeof *m);
  if (m) m->opset = opset;
  return m;
}

void mb_free(mb_model *m) {
  if (m == NULL) return;
  for (mb_node *n = m->nodes, *next; n; n = next) {
    next = n->next;
    free(n->b.p);
    free(n);
  }
  free(m->graph_inputs.p);
  free(m->graph_outputs.p);
  free(m->inits.p);
  free(m);
}

/* ValueInfoProto { name, TypeProto { tensor_type { elem_type, shape } } }. */
static void value_info(buf *out, unsigned field, const char *name, uint32_t dtype, int rank,
                       const int64_t *dims) {
  buf shape = {0}, tensor = {0}, type = {0}, vi = {0};
  for (int i = 0; i < rank; ++i) {
    buf dim = {0};
    put_int(&dim, 1, dims[i]);
    put_msg(&shape, 1, &dim);
  }
  put_int(&tensor, 1, dtype);
  if (rank >= 0) put_msg(&tensor, 2, &shape);
  put_msg(&type, 1, &tensor);
  put_str(&vi, 1, name);
  put_msg(&vi, 2, &type);
  put_msg(out, field, &vi);
  free(shape.p);
}

void mb_input(mb_model *m, const char *name, uint32_t dtype, uint32_t rank, const int64_t *dims) {
  value_info(&m->graph_inputs, 11, name, dtype, (int)rank, dims);
}

void mb_output(mb_model *m, const char *name, uint32_t dtype) {
  value_info(&m->graph_outputs, 12, name, dtype, -1, NULL);
}

void mb_initializer(mb_model *m, const char *name, uint32_t dtype, uint32_t rank,
                    const int64_t *dims, const void *data, size_t bytes) {
  buf t = {0};
  for (uint32_t i = 0; i < rank; ++i) put_int(&t, 1, dims[i]);
  put_int(&t, 2, dtype);
  put_str(&t, 8, name);
  put_bytes(&t, 9, data, bytes);
  put_msg(&m->inits, 5, &t);
}

void mb_init_ints(mb_model *m, const char *name, const int64_t *values, size_t count) {
  int64_t dims[1] = {(int64_t)count};
  mb_initializer(m, name, 7 /* int64 */, 1, dims, values, count * sizeof(int64_t));
}

mb_node *mb_add_node(mb_model *m, const char *op_type, const char *domain,
                     const char *const *inputs, size_t n_in, const char *const *outputs,
                     size_t n_out) {
  mb_node *n = calloc(1, sizeof *n);
  if (n == NULL) {
    m->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < n_in; ++i) put_str(&n->b, 1, inputs[i]);
  for (size_t i = 0; i < n_out; ++i) put_str(&n->b, 2, outputs[i]);
  put_str(&n->b, 3, op_type);
  put_str(&n->b, 4, op_type);
  if (domain && *domain) put_str(&n->b, 7, domain);
  if (m->last)
    m->last->next = n;
  else
    m->nodes = n;
  m->last = n;
  return n;
}

void mb_attr_int(mb_node *n, const char *name, int64_t v) {
  if (n == NULL) return;
  buf a = {0};
  put_str(&a, 1, name);
  put_int(&a, 3, v);
  put_int(&a, 20, 2 /* INT */);
  put_msg(&n->b, 5, &a);
}

void mb_attr_float(mb_node *n, const char *name, float v) {
  if (n == NULL) return;
  buf a = {0};
  put_str(&a, 1, name);
  put_float(&a, 2, v);
  put_int(&a, 20, 1 /* FLOAT */);
  put_msg(&n->b, 5, &a);
}

void mb_attr_ints(mb_node *n, const char *name, const int64_t *v, size_t count) {
  if (n == NULL) return;
  buf a = {0};
  put_str(&a, 1, name);
  for (size_t i = 0; i < count; ++i) put_int(&a, 8, v[i]);
  put_int(&a, 20, 7 /* INTS */);
  put_msg(&n->b, 5, &a);
}

uint8_t *mb_finish(mb_model *m, size_t *out_size) {
  buf graph = {0}, model = {0};
  for (mb_node *n = m->nodes; n; n = n->next) {
    if (n->b.failed) m->failed = true;
    put_bytes(&graph, 1, n->b.p, n->b.n);
  }
  put_str(&graph, 2, "test");
  buf_put(&graph, m->inits.p, m->inits.n);
  buf_put(&graph, m->graph_inputs.p, m->graph_inputs.n);
  buf_put(&graph, m->graph_outputs.p, m->graph_outputs.n);
  if (m->inits.failed || m->graph_inputs.failed || m->graph_outputs.failed) m->failed = true;

  put_int(&model, 1, 10); /* ir_version */
  buf op = {0};
  put_str(&op, 1, "");
  put_int(&op, 2, m->opset);
  put_msg(&model, 8, &op);
  put_str(&op, 1, "com.microsoft");
  put_int(&op, 2, 1);
  put_msg(&model, 8, &op);
  put_msg(&model, 7, &graph);
  if (m->failed || model.failed) {
    free(model.p);
    return NULL;
  }
  *out_size = model.n;
  return model.p;
}
