/*
 * The device stream lock. A device provider has one stream that every session queues
 * on, and a capture records everything queued on the stream, from any thread: while
 * one session records a graph, another session's kernels, copies, allocations or
 * syncs on that stream would land in the graph (or invalidate it). So work queued on
 * a device provider takes its lock shared, and a recording takes it exclusive. The
 * recording thread's own work (the run it records, the memory it grants or drops)
 * passes through: it is the owner.
 *
 * Shared holds may nest on one thread (an executor run frees memory); the lock
 * prefers readers so that nesting never waits for a queued writer. A recording waits
 * for the stream to be free of other work; captures are rare (once per geometry).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>

#include "provider_impl.h"

/* The provider this thread is recording on, if any. */
static _Thread_local const onyx__provider *tls_recording;

static bool lockable(const onyx__provider *p) {
  return p != NULL && p->stream_lock != NULL && tls_recording != p;
}

bool onyx__stream_lock_init(onyx__provider *p) {
  if (onyx__dev_is_host(p)) return true;
  pthread_rwlock_t *l = malloc(sizeof *l);
  pthread_rwlockattr_t attr;
  if (l == NULL || pthread_rwlockattr_init(&attr) != 0) {
    free(l);
    return false;
  }
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_READER_NP);
  bool ok = pthread_rwlock_init(l, &attr) == 0;
  pthread_rwlockattr_destroy(&attr);
  if (!ok) {
    free(l);
    return false;
  }
  p->stream_lock = l;
  return true;
}

void onyx__stream_lock_free(onyx__provider *p) {
  if (p->stream_lock == NULL) return;
  pthread_rwlock_destroy(p->stream_lock);
  free(p->stream_lock);
  p->stream_lock = NULL;
}

void onyx__stream_enter(const onyx__provider *p) {
  if (lockable(p)) pthread_rwlock_rdlock(p->stream_lock);
}

void onyx__stream_leave(const onyx__provider *p) {
  if (lockable(p)) pthread_rwlock_unlock(p->stream_lock);
}

void onyx__stream_enter_all(const onyx_runtime *rt) {
  for (size_t i = 0; i < rt->provider_count; ++i) onyx__stream_enter(&rt->providers[i]);
}

void onyx__stream_leave_all(const onyx_runtime *rt) {
  for (size_t i = rt->provider_count; i-- > 0;) onyx__stream_leave(&rt->providers[i]);
}

onyx_status onyx__stream_sync(const onyx__provider *p) {
  if (p == NULL || onyx__dev_is_host(p) || !onyx__dev_has_sync(p)) return ONYX_STATUS_OK;
  onyx__stream_enter(p);
  onyx_status st = onyx__dev_sync_raw(p);
  onyx__stream_leave(p);
  return st;
}

void onyx__record_enter(const onyx__provider *p) {
  if (!lockable(p)) return;
  pthread_rwlock_wrlock(p->stream_lock);
  tls_recording = p;
}

void onyx__record_leave(const onyx__provider *p) {
  if (p == NULL || p->stream_lock == NULL || tls_recording != p) return;
  tls_recording = NULL;
  pthread_rwlock_unlock(p->stream_lock);
}
