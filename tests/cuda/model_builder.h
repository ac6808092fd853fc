/*
 * A small ONNX model writer for tests: enough of the protobuf wire format to build
 * single-op (or few-op) graphs in memory, for onyx_session_create_from_bytes.
 *
 * Usage: mb_new, then inputs/initializers/outputs and nodes with attributes in any
 * order, then mb_finish for the bytes (caller frees) and mb_free.
 */
#ifndef ONYX_TESTS_CUDA_MODEL_BUILDER_H
#define ONYX_TESTS_CUDA_MODEL_BUILDER_H

#include <stddef.h>
#include <stdint.h>

typedef struct mb_model mb_model;
typedef struct mb_node mb_node;

/* A model importing the ONNX domain at `opset` and com.microsoft at 1. */
mb_model *mb_new(int64_t opset);
void mb_free(mb_model *m);

/* Graph input with a concrete shape. */
void mb_input(mb_model *m, const char *name, uint32_t dtype, uint32_t rank, const int64_t *dims);
/* Graph output: only its element type is declared. */
void mb_output(mb_model *m, const char *name, uint32_t dtype);
/* Initializer from raw little-endian bytes (copied). */
void mb_initializer(mb_model *m, const char *name, uint32_t dtype, uint32_t rank,
                    const int64_t *dims, const void *data, size_t bytes);
/* A 1-D int64 initializer. */
void mb_init_ints(mb_model *m, const char *name, const int64_t *values, size_t count);

/* A node; "" entries are absent optional inputs/outputs. Valid until mb_finish. */
mb_node *mb_add_node(mb_model *m, const char *op_type, const char *domain,
                     const char *const *inputs, size_t n_in, const char *const *outputs,
                     size_t n_out);
void mb_attr_int(mb_node *n, const char *name, int64_t v);
void mb_attr_float(mb_node *n, const char *name, float v);
void mb_attr_ints(mb_node *n, const char *name, const int64_t *v, size_t count);

/* The serialized ModelProto (malloc'ed); NULL when memory ran out. */
uint8_t *mb_finish(mb_model *m, size_t *out_size);

#endif /* ONYX_TESTS_CUDA_MODEL_BUILDER_H */
