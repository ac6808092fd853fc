/*
 * Onyx memory governor — public interface of the `onyx_governor` static library.
 *
 * Published to the core and to tools/tests; not part of the provider ABI (abi/).
 * The governor books bytes: it decides whether a request fits a tier (a device such
 * as "host" or "cuda:0") and records who holds what. It allocates nothing itself
 * except through the convenience onyx_gov_alloc (aligned host memory) and through a
 * mapped zone's physical backend.
 *
 * Model, in one paragraph (docs/governor.md says more):
 * - A tier has a byte limit. Every booked byte is in exactly one of three states:
 *   `used` (granted, or mapped in a zone), `reserved` (assigned to a zone as
 *   allowance but not yet mapped) or `pending` (claimed from the unassigned pool by
 *   a prepared zone growth that is not yet committed). What is left,
 *   limit - used - reserved - pending, belongs to no one: the unassigned pool.
 * - Requesters (onyx_requester) may carry a per-tier cap. No cap is the default;
 *   a cap is never implied by the absence of provisioning.
 * - When the pool cannot cover a request, holders (registered weakly, by priority)
 *   are asked to give bytes back, lowest priority first, and only when what they
 *   can give covers the shortfall. Otherwise the request is refused with
 *   ONYX_STATUS_TIER_EXHAUSTED and an onyx_gov_refusal carrying the numbers.
 *
 * Thread-safety: every function may be called from any thread on a live governor,
 * except onyx_gov_destroy, which must be the last call. Reclaim callbacks run on the
 * thread whose request needs the room, with no governor lock held.
 */
#ifndef ONYX_GOVERNOR_H
#define ONYX_GOVERNOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "onyx_provider.h" /* onyx_requester */
#include "onyx_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ limits */

#define ONYX_GOV_NO_LIMIT UINT64_MAX /* a requester cap that is not set */
#define ONYX_GOV_MAX_TIERS 16u       /* tiers one governor can hold */
#define ONYX_GOV_MAX_HOLDERS 64u     /* holders registered at once, all tiers */
#define ONYX_GOV_NAME_MAX 32u        /* tier name, including the NUL */
#define ONYX_GOV_LABEL_MAX                                                                         \
  96u /* owner label kept per grant/zone/holder, incl. NUL;                                        \
         longer labels are truncated */

/* ------------------------------------------------------------------ handles */

/* The governor. Opaque; create with onyx_gov_create. */
typedef struct onyx_gov onyx_gov;

/* A tier: an index returned by onyx_gov_tier_add, valid for the governor's life. */
typedef uint32_t onyx_gov_tier;

/* A grant id (plain booking, or a prepared zone growth). A value type: id 0 is "none".
 * Released exactly once; a second release, or a release of a stale id, is detected
 * and answered with ONYX_STATUS_INVALID_ARGUMENT (and counted), never a crash. */
typedef struct onyx_gov_grant_id {
  uint64_t id;
} onyx_gov_grant_id;

/* A registered holder. A value type like onyx_gov_grant_id; id 0 is "none". */
typedef struct onyx_gov_holder_id {
  uint64_t id;
} onyx_gov_holder_id;

/* A mapped zone: one reserved address range that grows in granules in place. */
typedef struct onyx_gov_zone onyx_gov_zone;

/* ------------------------------------------------------------------ refusal */

/* Which limit refused a request. */
typedef enum onyx_gov_scope {
  ONYX_GOV_SCOPE_TIER = 0,      /* the tier's limit (numbers are the tier's) */
  ONYX_GOV_SCOPE_REQUESTER = 1, /* the requester's cap on that tier (its numbers) */
  ONYX_GOV_SCOPE_ZONE = 2       /* the zone's reserved address space (max_bytes) */
} onyx_gov_scope;

/* The numbers behind ONYX_STATUS_TIER_EXHAUSTED. A plain descriptor owned by the
 * caller. For scope TIER: free = limit - used - reserved; the request did not fit
 * because requested - allowance > free + reclaimable, or reclaim fell short. */
typedef struct onyx_gov_refusal {
  uint32_t struct_size;         /* sizeof(onyx_gov_refusal), set by the governor */
  uint32_t version;             /* 1 */
  uint32_t scope;               /* onyx_gov_scope */
  uint32_t requester;           /* onyx_requester the request was for */
  char tier[ONYX_GOV_NAME_MAX]; /* tier name, NUL-terminated */
  const char *requester_name;   /* static string: "kv_cache", ... */
  uint64_t requested;           /* bytes asked for (a zone growth: granule-rounded delta) */
  uint64_t allowance;           /* part of `requested` the zone's own allowance covered */
  uint64_t limit;               /* the limit that refused */
  uint64_t used;                /* bytes granted or mapped under that limit */
  uint64_t reserved;            /* assigned but unmapped, plus pending growth, under that limit */
  uint64_t reclaimable;         /* bytes registered holders could give back */
  /* fields above: v1 */
} onyx_gov_refusal;

/* Writes "tier host: requested 2097152 bytes for kv_cache, limit …, used …,
 * reserved …, reclaimable …" (plus the scope when it is not the tier) into buf.
 * snprintf semantics: returns the length the full message needs; buf may be NULL
 * when cap is 0. */
size_t onyx_gov_refusal_format(const onyx_gov_refusal *refusal, char *buf, size_t cap);

/* ------------------------------------------------------------------ governor */

/* Creates an empty governor (no tiers). On failure *out_gov is untouched. */
onyx_status onyx_gov_create(onyx_gov **out_gov);

/* Destroys the governor: destroys live zones (unmapping their memory), frees memory
 * from onyx_gov_alloc, and drops grants and holders. NULL-safe. Not thread-safe:
 * no other call may be in flight. */
void onyx_gov_destroy(onyx_gov *gov);

/* The requester's short name ("weights", "kv_cache", "workspace_session",
 * "workspace_step", "activations"), "unknown" out of range. Static storage. */
const char *onyx_gov_requester_name(uint32_t requester);

/* ------------------------------------------------------------------ tiers */

/* Adds a tier `name` (copied; at most ONYX_GOV_NAME_MAX - 1 bytes) with a byte
 * limit. A duplicate name or a full table is INVALID_ARGUMENT. */
onyx_status onyx_gov_tier_add(onyx_gov *gov, const char *name, uint64_t limit_bytes,
                              onyx_gov_tier *out_tier);

/* Finds a tier by name; NOT_FOUND when absent. */
onyx_status onyx_gov_tier_find(onyx_gov *gov, const char *name, onyx_gov_tier *out_tier);

/* Changes a tier's limit. Lowering it below what is booked refuses new requests
 * until enough is released; nothing booked is taken away. */
onyx_status onyx_gov_tier_set_limit(onyx_gov *gov, onyx_gov_tier tier, uint64_t limit_bytes);

/* Caps what `requester` may hold on `tier` (used + reserved + pending).
 * ONYX_GOV_NO_LIMIT (the default) removes the cap. */
onyx_status onyx_gov_requester_set_limit(onyx_gov *gov, onyx_gov_tier tier,
                                         onyx_requester requester, uint64_t limit_bytes);

/* A tier's books. */
typedef struct onyx_gov_tier_usage {
  uint64_t limit;       /* the tier's byte limit */
  uint64_t used;        /* granted + mapped */
  uint64_t reserved;    /* zone allowance not yet mapped */
  uint64_t pending;     /* claimed by prepared, uncommitted zone growth */
  uint64_t unassigned;  /* limit - used - reserved - pending, 0 when negative */
  uint64_t reclaimable; /* bytes of grants adopted by registered holders */
  uint64_t peak;        /* highest `used` seen */
} onyx_gov_tier_usage;

/* Copies a tier's books into *out_usage; INVALID_ARGUMENT for an unknown tier. */
onyx_status onyx_gov_tier_usage_get(onyx_gov *gov, onyx_gov_tier tier,
                                    onyx_gov_tier_usage *out_usage);

/* One requester's books on one tier. */
typedef struct onyx_gov_requester_usage {
  uint64_t limit;       /* ONYX_GOV_NO_LIMIT when uncapped */
  uint64_t used;        /* granted + mapped */
  uint64_t peak;        /* highest `used` since creation or onyx_gov_reset_peaks */
  uint64_t reserved;    /* its zones' unmapped allowance */
  uint64_t pending;     /* its prepared, uncommitted zone growth claimed from the pool */
  uint64_t reclaimable; /* its grants adopted by registered holders */
} onyx_gov_requester_usage;

/* Copies one requester's books on one tier ("peak bytes per requester"). */
onyx_status onyx_gov_requester_usage_get(onyx_gov *gov, onyx_gov_tier tier,
                                         onyx_requester requester,
                                         onyx_gov_requester_usage *out_usage);

/* Sets every peak (tier and requester) to the current `used`. */
void onyx_gov_reset_peaks(onyx_gov *gov);

/* ------------------------------------------------------------------ grants */

/*
 * Books `bytes` on `tier` for `requester`; the caller allocates the memory itself.
 * `label` names the owner in the snapshot ("node 12 GroupQueryAttention region
 * scores"); copied, may be NULL. Free capacity is used first; holders are asked to
 * reclaim only when it cannot cover the request and they can. On
 * ONYX_STATUS_TIER_EXHAUSTED, *out_refusal (may be NULL) receives the numbers and
 * *out_grant is untouched.
 */
onyx_status onyx_gov_grant(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                           uint64_t bytes, const char *label, onyx_gov_grant_id *out_grant,
                           onyx_gov_refusal *out_refusal);

/* Releases a grant: a plain grant's bytes return to the pool; a prepared zone
 * growth is rolled back (its claimed unassigned capacity returns in full). Exactly
 * once: a repeated or stale id returns INVALID_ARGUMENT and is counted. */
onyx_status onyx_gov_release(onyx_gov *gov, onyx_gov_grant_id grant);

/* Bytes a live grant books (a growth: bytes planned). NOT_FOUND when stale. */
onyx_status onyx_gov_grant_bytes(onyx_gov *gov, onyx_gov_grant_id grant, uint64_t *out_bytes);

/* Prepare-only: would a grant of `bytes` fit now (free capacity, or holders able to
 * cover the shortfall)? Reserves nothing and calls no holder. Returns OK or
 * TIER_EXHAUSTED; *out_refusal (may be NULL) is filled with the current numbers in
 * both cases. */
onyx_status onyx_gov_check(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                           uint64_t bytes, onyx_gov_refusal *out_refusal);

/* Convenience: books `bytes` like onyx_gov_grant and allocates that much host
 * memory aligned to `alignment` (a power of two; 0 means 64). Free with
 * onyx_gov_free. On failure *out_ptr is untouched. */
onyx_status onyx_gov_alloc(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                           uint64_t bytes, uint32_t alignment, const char *label, void **out_ptr,
                           onyx_gov_refusal *out_refusal);

/* Frees memory from onyx_gov_alloc and releases its booking. NULL is a no-op (OK).
 * A pointer the governor does not know (double free) is INVALID_ARGUMENT, counted,
 * and not passed to free(). */
onyx_status onyx_gov_free(onyx_gov *gov, void *ptr);

/* Records bytes the caller copied to grow or move memory (the legacy allocate+copy
 * path); in-place zone growth moves none. Shown in the snapshot counters. */
void onyx_gov_note_bytes_moved(onyx_gov *gov, uint64_t bytes);

/* ------------------------------------------------------------------ holders */

/*
 * Asked to give back up to `bytes_wanted` on `tier`. Returns the bytes it freed,
 * which it must release through the governor (onyx_gov_release / onyx_gov_free)
 * before returning. Runs on the requesting thread with no governor or zone lock
 * held, so it may call any governor function (a nested request does not ask this
 * holder again). It is never called for two requests at once.
 */
typedef uint64_t (*onyx_gov_reclaim_fn)(void *user, onyx_gov *gov, onyx_gov_tier tier,
                                        uint64_t bytes_wanted);

/* Registers a holder on `tier`. Weak: the governor keeps no reference to `user`
 * beyond calling `fn`; registration is explicit and ends with unregister. Lower
 * `priority` is reclaimed first (ties: earlier registration first). A holder's
 * reclaimable bytes are the grants it adopted (onyx_gov_holder_adopt). `label` is
 * copied. */
onyx_status onyx_gov_holder_register(onyx_gov *gov, onyx_gov_tier tier, int32_t priority,
                                     const char *label, onyx_gov_reclaim_fn fn, void *user,
                                     onyx_gov_holder_id *out_holder);

/* Unregisters: waits for an in-flight callback of this holder on another thread;
 * after it returns `fn` is never called again. Adopted grants stay live (no longer
 * reclaimable). May be called from the holder's own callback. */
onyx_status onyx_gov_holder_unregister(onyx_gov *gov, onyx_gov_holder_id holder);

/* Marks a live plain grant on the holder's tier as reclaimable by this holder (a grant
 * has one holder at a time: adopting moves it). Its bytes count as reclaimable until
 * it is released or the holder unregisters. */
onyx_status onyx_gov_holder_adopt(onyx_gov *gov, onyx_gov_holder_id holder,
                                  onyx_gov_grant_id grant);

/* ------------------------------------------------------------------ backends */

/*
 * A physical memory backend for mapped zones (CUDA VMM, host mmap, test fake).
 * Transparent vtable; the zone copies it, `state` must outlive every zone using it.
 * Calls for one zone are serialized by the governor; calls for different zones may
 * run concurrently. Offsets and sizes are multiples of the granularity.
 */
typedef struct onyx_gov_backend {
  uint32_t struct_size; /* sizeof(onyx_gov_backend) */
  uint32_t version;     /* 1 */
  const char *name;     /* "host", "fake", "cuda-vmm"; static storage */
  void *state;          /* passed back as the first argument */
  /* Allocation granularity in bytes (a power of two), e.g. 2 MiB. */
  onyx_status (*granularity)(void *state, uint64_t *out_bytes);
  /* Reserves `bytes` of address space, no memory behind it. */
  onyx_status (*reserve)(void *state, uint64_t bytes, void **out_base);
  /* Gives a reserved range back (everything in it already unmapped). */
  void (*unreserve)(void *state, void *base, uint64_t bytes);
  /* Creates one physical granule of `bytes`; *out_handle may be anything non-NULL. */
  onyx_status (*create)(void *state, uint64_t bytes, void **out_handle);
  /* Releases a physical granule (already unmapped). */
  void (*release)(void *state, void *handle, uint64_t bytes);
  /* Maps `handle` at base + offset. */
  onyx_status (*map)(void *state, void *base, uint64_t offset, uint64_t bytes, void *handle);
  /* Makes base + offset .. + bytes readable and writable by the device. */
  onyx_status (*set_access)(void *state, void *base, uint64_t offset, uint64_t bytes);
  /* Unmaps base + offset .. + bytes. */
  void (*unmap)(void *state, void *base, uint64_t offset, uint64_t bytes);
  /* Optional (may be NULL): waits until no queued work can touch mapped memory.
   * Called before every unmap. */
  onyx_status (*sync)(void *state);
  /* fields above: v1 */
} onyx_gov_backend;

/* Host backend: mmap(PROT_NONE) reserve, mprotect to commit on growth,
 * madvise(DONTNEED)+mprotect(PROT_NONE) on unmap, munmap on unreserve.
 * `granularity` 0 means 2 MiB; otherwise a power of two >= the page size. The
 * returned table is heap-owned; free with onyx_gov_host_backend_destroy after every
 * zone using it is gone. */
onyx_status onyx_gov_host_backend_create(uint64_t granularity, onyx_gov_backend **out_backend);
void onyx_gov_host_backend_destroy(onyx_gov_backend *backend); /* NULL-safe */

/* Fake backend for tests: hands out fake addresses (never dereference them), counts
 * calls and live objects, and fails the Nth call of an operation on request. */
typedef struct onyx_gov_fake onyx_gov_fake;

/* The backend operations the fake can fail. */
typedef enum onyx_gov_fake_op {
  ONYX_GOV_FAKE_RESERVE = 0,
  ONYX_GOV_FAKE_CREATE = 1,
  ONYX_GOV_FAKE_MAP = 2,
  ONYX_GOV_FAKE_SET_ACCESS = 3,
  ONYX_GOV_FAKE_SYNC = 4,
  ONYX_GOV_FAKE_OP_COUNT_ = 5
} onyx_gov_fake_op;

/* What the fake has seen. */
typedef struct onyx_gov_fake_stats {
  uint64_t calls[ONYX_GOV_FAKE_OP_COUNT_]; /* calls made, failed ones included */
  uint64_t live_reservations;              /* reserve - unreserve */
  uint64_t live_handles;                   /* create - release */
  uint64_t mapped_bytes;                   /* map - unmap */
  uint64_t accessible_bytes;               /* set_access - unmap */
  uint64_t unmaps;                         /* unmap calls */
  uint64_t unsynced_unmaps;                /* unmaps of accessible memory with no sync since */
  uint64_t protocol_errors;                /* unmap/set_access of unmapped memory, bad handles */
} onyx_gov_fake_stats;

/* Creates a fake with the given granularity (a power of two). Thread-safe. */
onyx_status onyx_gov_fake_create(uint64_t granularity, onyx_gov_fake **out_fake);
/* Destroys it after every zone using it is gone. NULL-safe. */
void onyx_gov_fake_destroy(onyx_gov_fake *fake);
/* The fake's vtable; valid until onyx_gov_fake_destroy. */
const onyx_gov_backend *onyx_gov_fake_backend(onyx_gov_fake *fake);
/* Makes the nth call of `op` from now fail (n >= 1; 0 cancels). One pending
 * failure per op. */
void onyx_gov_fake_fail_nth(onyx_gov_fake *fake, onyx_gov_fake_op op, uint32_t n);
/* Copies the counters and live-object totals. */
void onyx_gov_fake_stats_get(onyx_gov_fake *fake, onyx_gov_fake_stats *out_stats);

/* ------------------------------------------------------------------ zones */

/* What a zone is for and how big it may get. A plain descriptor, read during the call. */
typedef struct onyx_gov_zone_desc {
  uint32_t struct_size; /* sizeof(onyx_gov_zone_desc) */
  uint32_t version;     /* 1 */
  onyx_gov_tier tier;
  uint32_t requester;              /* onyx_requester charged for mapped bytes */
  const onyx_gov_backend *backend; /* copied */
  uint64_t max_bytes;              /* address space reserved (granule-rounded): the cap */
  uint64_t allowance_bytes;        /* capacity assigned up front; 0 is fine: growth then
                                      claims unassigned capacity of the tier */
  const char *label;               /* owner, copied; may be NULL */
  /* fields above: v1 */
} onyx_gov_zone_desc;

/* Reserves the address range and books the allowance. TIER_EXHAUSTED (with
 * *out_refusal) when the allowance does not fit. On failure nothing is reserved. */
onyx_status onyx_gov_zone_create(onyx_gov *gov, const onyx_gov_zone_desc *desc,
                                 onyx_gov_zone **out_zone, onyx_gov_refusal *out_refusal);

/* Rolls back the zone's prepared growths (their grants become stale), synchronizes,
 * unmaps everything, gives back the address range and the allowance. Returns the
 * backend's sync status (the zone is destroyed regardless). NULL-safe. */
onyx_status onyx_gov_zone_destroy(onyx_gov_zone *zone);

/* A zone's state. `base` never changes for the zone's life. */
typedef struct onyx_gov_zone_info {
  void *base;
  uint64_t mapped;    /* bytes mapped from base */
  uint64_t max_bytes; /* reserved address space */
  uint64_t allowance; /* capacity assigned to the zone (>= mapped) */
  uint64_t granularity;
} onyx_gov_zone_info;

/* Copies the zone's state (consistent with the governor's books at that moment). */
void onyx_gov_zone_info_get(onyx_gov_zone *zone, onyx_gov_zone_info *out_info);

/*
 * Plans growth so that `target_bytes` from base are mapped, without mapping:
 * books the granule-rounded delta from (1) the zone's own unused allowance,
 * (2) the tier's unassigned capacity, (3) holder reclaim, else (4) TIER_EXHAUSTED.
 * The returned grant records how much came from the unassigned pool. Commit it with
 * onyx_gov_zone_commit or roll it back with onyx_gov_release. `label` is copied.
 */
onyx_status onyx_gov_zone_prepare(onyx_gov_zone *zone, uint64_t target_bytes, const char *label,
                                  onyx_gov_grant_id *out_grant, onyx_gov_refusal *out_refusal);

/*
 * Maps granules so that `target_bytes` (may differ from the prepared target) are
 * mapped, consuming the prepared grant. Whatever the plan booked beyond the bytes
 * actually mapped (over-estimate, or granules another growth already mapped)
 * returns to the unassigned pool. A shortfall is booked from the allowance and the
 * pool without reclaim. All or nothing: on failure nothing new is mapped and the
 * grant stays prepared (release it to roll back).
 */
onyx_status onyx_gov_zone_commit(onyx_gov_zone *zone, onyx_gov_grant_id grant,
                                 uint64_t target_bytes, onyx_gov_refusal *out_refusal);

/* prepare + commit, rolled back on failure. */
onyx_status onyx_gov_zone_grow(onyx_gov_zone *zone, uint64_t target_bytes, const char *label,
                               onyx_gov_refusal *out_refusal);

/* Prepare-only query for a growth to `target_bytes`; reserves nothing, calls no
 * holder. *out_refusal (may be NULL) is filled in both outcomes. */
onyx_status onyx_gov_zone_check(onyx_gov_zone *zone, uint64_t target_bytes,
                                onyx_gov_refusal *out_refusal);

/* Synchronizes and unmaps granules beyond `keep_bytes`; capacity above the zone's
 * initial allowance returns to the pool. On a sync failure nothing is unmapped. */
onyx_status onyx_gov_zone_trim(onyx_gov_zone *zone, uint64_t keep_bytes);

/* ------------------------------------------------------------------ observing */

/* Event counters, shown in the snapshot. */
typedef struct onyx_gov_counters {
  uint64_t grants;          /* successful grants, allocs and growth plans */
  uint64_t releases;        /* releases, frees, rollbacks, commits */
  uint64_t refusals;        /* TIER_EXHAUSTED answers (checks not counted) */
  uint64_t double_releases; /* stale/repeated releases and unknown frees */
  uint64_t reclaims;        /* reclaim callbacks invoked */
  uint64_t reclaimed_bytes; /* bytes the callbacks reported freed */
  uint64_t growth_events;   /* commits that mapped at least one granule */
  uint64_t bytes_mapped;
  uint64_t bytes_unmapped;
  uint64_t unassigned_claimed;  /* bytes growth plans took from the pool */
  uint64_t unassigned_returned; /* of those, given back (rollback, reuse, estimate) */
  uint64_t bytes_moved;         /* onyx_gov_note_bytes_moved */
} onyx_gov_counters;

/* Copies the counters (monotonic since creation). */
void onyx_gov_counters_get(onyx_gov *gov, onyx_gov_counters *out_counters);

/* Recomputes every tier's and requester's books from the live grants and zones
 * and compares them with the running totals. OK when they balance, INTERNAL (with
 * the first difference in `msg`, may be NULL) otherwise. For tests and debugging. */
onyx_status onyx_gov_audit(onyx_gov *gov, char *msg, size_t msg_cap);

/*
 * The snapshot as one JSON object:
 *   {"tiers":[{"name","limit","used","reserved","pending","unassigned","reclaimable",
 *              "peak","requesters":[{"name","used","peak","limit"|null,"reserved",
 *              "pending"}]}],
 *    "grants":[{"id","tier","requester","kind":"grant"|"alloc"|"growth","bytes",
 *               "owner", ("unassigned" for growth), ("holder")}],
 *    "zones":[{"owner","tier","requester","backend","base","mapped","reserved",
 *              "allowance","granularity"}],
 *    "holders":[{"id","owner","tier","priority","reclaimable"}],
 *    "counters":{...onyx_gov_counters fields...}}
 * The state is copied under the lock and formatted outside it.
 */
/* To a caller buffer. *out_len (may be NULL) receives the JSON length without the
 * NUL. When cap is too small, returns INVALID_ARGUMENT and leaves buf untouched
 * (buf may be NULL with cap 0 to ask for the length). */
onyx_status onyx_gov_snapshot_json(onyx_gov *gov, char *buf, size_t cap, size_t *out_len);

/* To a stream. IO_ERROR when the write fails. */
onyx_status onyx_gov_snapshot_write(onyx_gov *gov, FILE *stream);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_GOVERNOR_H */
