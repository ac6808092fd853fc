/*
 * Plans by input geometry: for now each run builds its plan and drops it.
 */
#include "plan_impl.h"

onyx_status onyx__plan_acquire(onyx_session *s, const onyx_tensor *inputs, size_t input_count,
                               onyx_plan **out_plan, char *err, size_t err_cap) {
  return onyx__plan_build(s, inputs, input_count, out_plan, err, err_cap);
}

void onyx__plan_release(onyx_session *s, onyx_plan *plan) {
  (void)s;
  onyx_plan_destroy(plan);
}

void onyx__plan_cache_free(onyx_session *s) { (void)s; }
