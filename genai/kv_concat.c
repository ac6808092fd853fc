/*
 * KV strategy: present = concat(past, new rows), as ONNX Attention-23/24 defines it
 * (mobius exports), fed back as the next step's past.
 *
 * Each step the model copies the whole past into present and the run copies present
 * out to memory the caller owns (onyx_session_run's outputs): both are counted as KV
 * bytes moved, so the figure says what this cache costs against a shared buffer,
 * where a step moves none. Between steps the KV is that output memory, held here.
 */
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "genai_impl.h"

typedef struct kv_concat {
  onyx__kv base;
  const onyx_genai_model *model;
  onyx_tensor *past; /* [2 × layers]: key, value of each layer; data owned once set */
  int64_t length;    /* tokens in past */
  uint64_t bytes_model, bytes_out;
} kv_concat;

/* Data for an empty past: a view of zero elements still needs an address. */
static unsigned char empty_past[64];

/* A present the model produced lies in memory, so its size fits; checked anyway,
 * as every size read from a tensor is. */
static uint64_t tensor_bytes(const onyx_tensor *t) {
  uint64_t bytes = 0;
  return onyx__ckd_tensor_bytes(&bytes, t) ? 0 : bytes;
}

static onyx_status concat_admit(onyx__kv *kv, int64_t length, onyx_error **out_error) {
  (void)kv, (void)length, (void)out_error;
  /* The KV is run output memory here, admitted with each run's activations. */
  return ONYX_STATUS_OK;
}

static onyx_status concat_bind(onyx__kv *kv, onyx__step *step, onyx_error **out_error) {
  kv_concat *k = (kv_concat *)kv;
  const onyx__decoder_io *io = &k->model->io;
  if (step->past != k->length)
    return onyx__genai_fail(out_error, ONYX_STATUS_INTERNAL,
                            "KV cache holds %lld tokens, the step continues after %lld",
                            (long long)k->length, (long long)step->past);
  for (uint32_t l = 0; l < io->layers; ++l) {
    step->inputs[io->past_key[l]] = k->past[2 * l];
    step->inputs[io->past_value[l]] = k->past[2 * l + 1];
    step->writable[io->past_key[l]] = step->writable[io->past_value[l]] = false;
  }
  return ONYX_STATUS_OK;
}

/* Present must be the past grown by the step's tokens: anything else is not a KV
 * cache this strategy can feed back. */
static onyx_status check_present(const kv_concat *k, const onyx_tensor *t, size_t output,
                                 int64_t total, onyx_error **out_error) {
  const onyx__decoder_io *io = &k->model->io;
  if (t->rank == 4 && t->dims[0] == 1 && t->dims[1] == io->kv_heads && t->dims[2] == total &&
      t->dims[3] == io->head_size && t->dtype == io->kv_dtype && t->device == ONYX_DEVICE_HOST)
    return ONYX_STATUS_OK;
  return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_MODEL,
                          "%s: output '%s' came back (%lld, %lld, %lld, %lld) %s; the KV cache "
                          "needs (1, %lld, %lld, %lld) %s: concat(past, new rows)",
                          k->model->path, onyx_session_output_info(k->model->session, output).name,
                          (long long)t->dims[0], (long long)t->dims[1], (long long)t->dims[2],
                          (long long)t->dims[3], onyx__genai_dtype_name(t->dtype),
                          (long long)io->kv_heads, (long long)total, (long long)io->head_size,
                          onyx__genai_dtype_name(io->kv_dtype));
}

static onyx_status concat_finish(onyx__kv *kv, onyx__step *step, onyx_error **out_error) {
  kv_concat *k = (kv_concat *)kv;
  const onyx__decoder_io *io = &k->model->io;
  int64_t total = step->past + step->count;
  for (uint32_t l = 0; l < io->layers; ++l) {
    onyx_status st;
    if ((st = check_present(k, &step->outputs[io->present_key[l]], io->present_key[l], total,
                            out_error)) ||
        (st = check_present(k, &step->outputs[io->present_value[l]], io->present_value[l], total,
                            out_error)))
      return st;
  }
  /* All checked: the presents become the past, the old past is freed. */
  for (uint32_t l = 0; l < io->layers; ++l) {
    size_t outs[2] = {io->present_key[l], io->present_value[l]};
    for (int i = 0; i < 2; ++i) {
      onyx_tensor *p = &k->past[2 * l + (uint32_t)i];
      k->bytes_model += tensor_bytes(p);
      k->bytes_out += tensor_bytes(&step->outputs[outs[i]]);
      if (p->data != empty_past) onyx_tensor_data_free(p->data);
      *p = step->outputs[outs[i]];
      if (p->data == NULL) p->data = empty_past; /* a present of no elements */
      step->kept[outs[i]] = true;
    }
  }
  k->length = total;
  return ONYX_STATUS_OK;
}

static int64_t concat_view_length(const onyx__kv *kv) {
  (void)kv;
  return 0;
}

static void concat_stats(const onyx__kv *kv, onyx_generator_stats *out) {
  const kv_concat *k = (const kv_concat *)kv;
  out->kv_bytes_model = k->bytes_model;
  out->kv_bytes_out = k->bytes_out;
  out->kv_bytes_moved = k->bytes_model + k->bytes_out;
  for (uint32_t t = 0; t < 2 * k->model->io.layers; ++t)
    out->kv_bytes_now += tensor_bytes(&k->past[t]);
}

static void concat_destroy(onyx__kv *kv) {
  kv_concat *k = (kv_concat *)kv;
  if (k == NULL) return;
  for (uint32_t t = 0; k->past && t < 2 * k->model->io.layers; ++t)
    if (k->past[t].data != empty_past) onyx_tensor_data_free(k->past[t].data);
  free(k->past);
  free(k);
}

static const onyx__kv_ops concat_ops = {.name = "concat",
                                        .admit = concat_admit,
                                        .bind = concat_bind,
                                        .finish = concat_finish,
                                        .view_length = concat_view_length,
                                        .stats = concat_stats,
                                        .destroy = concat_destroy};

onyx_status onyx__kv_concat_create(onyx_genai_model *m, onyx__kv **out, onyx_error **out_error) {
  kv_concat *k = calloc(1, sizeof *k);
  if (k) k->past = calloc(2 * (size_t)m->io.layers, sizeof *k->past);
  if (k == NULL || k->past == NULL) {
    free(k);
    return onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  k->base.ops = &concat_ops;
  k->model = m;
  for (uint32_t t = 0; t < 2 * m->io.layers; ++t)
    k->past[t] = (onyx_tensor){.dtype = m->io.kv_dtype,
                               .rank = 4,
                               .dims = {1, m->io.kv_heads, 0, m->io.head_size},
                               .data = empty_past};
  *out = &k->base;
  return ONYX_STATUS_OK;
}
