/* Per-node timing of a profiled session (profile.c). All calls are NULL-safe on the
 * profile: a session created without `profile` has none and pays nothing. */
#ifndef ONYX_CORE_PROFILE_IMPL_H
#define ONYX_CORE_PROFILE_IMPL_H

#include <stddef.h>

typedef struct onyx__profile onyx__profile;

double onyx__now_ms(void); /* a monotonic clock */
onyx__profile *onyx__profile_new(size_t nodes);
void onyx__profile_free(onyx__profile *profile);
void onyx__profile_node(onyx__profile *profile, size_t node, double ms);
void onyx__profile_plan(onyx__profile *profile, double ms);
void onyx__profile_replay(onyx__profile *profile, double ms);

#endif /* ONYX_CORE_PROFILE_IMPL_H */
