/*
 * What every kernel's infer callback shares, and parallel ranges.
 *
 * infer answers the planner's question "what will compute allocate for inputs of
 * this geometry?" without running. Each op computes its output geometry in one
 * function that compute calls too, so here there is only the plumbing: turning
 * infer's input array into compute's pointer array, filling outputs, and the
 * values buffer through which a kernel that knows an output's values (Shape) hands
 * them to the planner.
 */
#include <string.h>

#include "cpu_impl.h"

bool onyx__cpu_infer_inputs(const onyx_tensor *inputs, size_t count, const onyx_tensor **out,
                            size_t cap) {
  if (count > cap) return false;
  for (size_t i = 0; i < count; ++i)
    out[i] = inputs[i].dtype == ONYX_DTYPE_UNDEFINED ? NULL : &inputs[i];
  return true;
}

void *onyx__cpu_infer_out(onyx_tensor *outputs, size_t count, size_t k, uint32_t dtype,
                          uint32_t rank, const int64_t *dims) {
  if (k >= count) return NULL;
  onyx_tensor *t = &outputs[k];
  void *offered = t->data;
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->device = ONYX_DEVICE_HOST;
  t->rank = rank;
  for (uint32_t d = 0; d < rank && d < ONYX_MAX_RANK; ++d) t->dims[d] = dims[d];
  if (offered == NULL || (dtype != ONYX_DTYPE_INT64 && dtype != ONYX_DTYPE_INT32)) return NULL;
  int64_t n = onyx_tensor_numel(t);
  if (n < 0 || (uint64_t)n * onyx_dtype_size(dtype) > ONYX__CPU_INFER_VALUE_BYTES) return NULL;
  return offered;
}

onyx_status onyx__cpu_reason(const void *state, onyx_status status, const char *why) {
  const onyx__cpu_node *node = state;
  const onyx_host_table *host = node && node->provider ? node->provider->host : NULL;
  return why && why[0] ? onyx__pc_reason(host, status, "%s", why) : status;
}

onyx_status onyx__cpu_infer_same(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 1 || inputs[0].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, inputs[0].rank, inputs[0].dims);
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ parallel ranges */

typedef struct cpu_range_job {
  void (*fn)(void *arg, int64_t begin, int64_t end);
  void *arg;
  int64_t total;
  size_t tasks;
} cpu_range_job;

static void cpu_range_task(void *arg, size_t i) {
  const cpu_range_job *j = arg;
  /* Even pieces; the first total % tasks ones take one item more. */
  const int64_t t = (int64_t)j->tasks, k = (int64_t)i, q = j->total / t, r = j->total % t;
  const int64_t begin = k * q + (k < r ? k : r), end = begin + q + (k < r ? 1 : 0);
  if (end > begin) j->fn(j->arg, begin, end);
}

void onyx__cpu_parallel_range(const onyx__cpu_provider *p, int64_t total, int64_t grain,
                              void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
  if (total <= 0) return;
  if (grain < 1) grain = 1;
  int64_t tasks = p != NULL && p->parallel ? (int64_t)p->num_threads : 1;
  if (tasks > total / grain) tasks = total / grain;
  if (tasks <= 1) {
    fn(arg, 0, total);
    return;
  }
  cpu_range_job j = {fn, arg, total, (size_t)tasks};
  onyx__cpu_parallel_for(p, (size_t)tasks, cpu_range_task, &j);
}
