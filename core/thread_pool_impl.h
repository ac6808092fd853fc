/* A small fixed pool of host threads behind the host table's parallel_for. */
#ifndef ONYX_CORE_THREAD_POOL_IMPL_H
#define ONYX_CORE_THREAD_POOL_IMPL_H

#include <stddef.h>
#include <stdint.h>

typedef struct onyx__thread_pool onyx__thread_pool;

/* threads = 0 picks one per online core. Returns NULL when out of memory. */
onyx__thread_pool *onyx__thread_pool_create(uint32_t threads);
void onyx__thread_pool_destroy(onyx__thread_pool *pool); /* NULL-safe */
uint32_t onyx__thread_pool_size(const onyx__thread_pool *pool);

/* Runs fn(arg, i) for every i in [0, n), the calling thread included, and returns
 * when all are done. Calls from several threads at once are serialised. */
void onyx__thread_pool_run(onyx__thread_pool *pool, size_t n, void (*fn)(void *arg, size_t i),
                           void *arg);

#endif /* ONYX_CORE_THREAD_POOL_IMPL_H */
