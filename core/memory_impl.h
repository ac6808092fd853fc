/*
 * The core's memory: every byte the core or a provider keeps is allocated here and
 * booked with the governor under a tier (the provider's device) and a requester.
 */
#ifndef ONYX_CORE_MEMORY_IMPL_H
#define ONYX_CORE_MEMORY_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config_impl.h"
#include "onyx_abi.h"
#include "onyx_governor.h"

struct onyx__provider;
typedef struct onyx__memory onyx__memory;

onyx_status onyx__memory_create(const onyx__config *config, onyx__memory **out_memory, char *err,
                                size_t err_cap);
void onyx__memory_destroy(onyx__memory *memory); /* NULL-safe */

/*
 * Allocates `bytes` on the provider's device (the host when provider is NULL or a
 * host provider) for `requester`, labelled `label` in the snapshot. A refusal is
 * ONYX_STATUS_TIER_EXHAUSTED with the governor's numbers in `err`.
 */
onyx_status onyx__memory_alloc(onyx__memory *memory, struct onyx__provider *provider,
                               uint32_t requester, uint64_t bytes, uint32_t alignment,
                               const char *label, void **out_ptr, char *err, size_t err_cap);
void onyx__memory_free(onyx__memory *memory, void *ptr); /* NULL-safe */

/* One booked part of a block: its bytes and its owner in the snapshot. */
typedef struct onyx__memory_part {
  uint64_t bytes;    /* 0: the part is skipped */
  const char *label; /* copied by the governor (ONYX_GOV_LABEL_MAX) */
} onyx__memory_part;

/*
 * Allocates one block of exactly the parts' total bytes, aligned to `alignment` (a
 * power of two), and books it as one grant per part, so that the snapshot shows who
 * the bytes are for (a workspace block: one grant per region) while the memory is
 * one allocation. Nothing is booked twice: the grants sum to the block. All or
 * nothing: the total is checked first, so a refusal carries the whole block's
 * numbers; on any failure no grant stays and *out_ptr is untouched. A total of 0
 * is INVALID_ARGUMENT. Freed with onyx__memory_free, which releases every part.
 */
onyx_status onyx__memory_alloc_parts(onyx__memory *memory, struct onyx__provider *provider,
                                     uint32_t requester, uint32_t alignment,
                                     const onyx__memory_part *parts, size_t part_count,
                                     void **out_ptr, char *err, size_t err_cap);

/* Gives the plain host block at `ptr` a new owner: its grant is released and one of
 * the same bytes taken for `requester` under `label` (reused memory is booked to
 * whoever uses it now). A refusal frees the block (TIER_EXHAUSTED, the numbers in
 * err); NOT_FOUND for a pointer that is not such a block. */
onyx_status onyx__memory_rebook(onyx__memory *memory, void *ptr, uint32_t requester,
                                const char *label, char *err, size_t err_cap);

/* Hands the plain host block at `ptr` to a caller that frees it with free(): it
 * leaves the table and the books (as memory the caller owns, like a copy it would
 * get). Returns ptr, or NULL when it is not such a block (nothing changes). */
void *onyx__memory_detach(onyx__memory *memory, void *ptr);

/* Lets `holder` reclaim the block at `ptr` (every grant booking it): the governor
 * may then ask the holder to free it under pressure. NOT_FOUND for a pointer the core
 * did not allocate. */
onyx_status onyx__memory_adopt(onyx__memory *memory, void *ptr, onyx_gov_holder_id holder);

/* Bytes in use and the peak, per requester, summed over tiers. */
void onyx__memory_usage(const onyx__memory *memory, uint64_t used[ONYX_REQUESTER_COUNT_],
                        uint64_t peak[ONYX_REQUESTER_COUNT_]);
const char *onyx__requester_name(uint32_t requester);

/* The governor tier named `name`, added with `default_limit` (or plugins.ini's
 * limit for it) on first use. */
onyx_status onyx__memory_tier(onyx__memory *memory, const char *name, uint64_t default_limit,
                              uint32_t *out_tier);
/* Lowers a tier's limit to `bytes` when it is higher (a provider's memory_limit). */
onyx_status onyx__memory_cap_tier(onyx__memory *memory, uint32_t tier, uint64_t bytes);
/* The tier a provider's memory is booked under (host for host providers). */
uint32_t onyx__memory_tier_of(const onyx__memory *memory, const struct onyx__provider *provider);
/* Prepare-only: would `bytes` for `requester` fit on `tier` now? The refusal's
 * numbers go to err. */
onyx_status onyx__memory_check(onyx__memory *memory, uint32_t tier, uint32_t requester,
                               uint64_t bytes, char *err, size_t err_cap);
struct onyx_gov *onyx__memory_governor(onyx__memory *memory);

/* The governor's snapshot as JSON. */
void onyx__memory_write_json(const onyx__memory *memory, FILE *stream);

#endif /* ONYX_CORE_MEMORY_IMPL_H */
