/*
 * Admission: the one order every booking follows. The unassigned pool first; then,
 * only when it falls short and the registered holders can cover the whole shortfall,
 * reclaim; otherwise a typed refusal. Zone growth books its own allowance before it
 * gets here (gov_zone.c), so what arrives is only the part the pool must supply.
 */
#include "gov_impl.h"

static uint32_t scope_of(uint64_t short_tier, uint64_t short_req) {
  return short_tier || !short_req ? ONYX_GOV_SCOPE_TIER : ONYX_GOV_SCOPE_REQUESTER;
}

onyx_status onyx__gov_admit(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t need,
                            onyx_gov_refusal *out_refusal) {
  uint64_t asked = 0;
  for (;;) {
    uint64_t short_tier, short_req;
    onyx__gov_shortfall(&gov->tiers[tier], r, need, &short_tier, &short_req);
    if (short_tier == 0 && short_req == 0) return ONYX_STATUS_OK;
    if (!onyx__gov_reclaim_step(gov, tier, r, short_tier, short_req, &asked)) {
      onyx__gov_fill_refusal(gov, tier, r, scope_of(short_tier, short_req), need, 0, out_refusal);
      gov->counters.refusals++;
      return ONYX_STATUS_TIER_EXHAUSTED;
    }
  }
}

bool onyx__gov_would_fit(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t need,
                         uint64_t requested, uint64_t allowance, onyx_gov_refusal *out_refusal) {
  uint64_t short_tier, short_req;
  onyx__gov_shortfall(&gov->tiers[tier], r, need, &short_tier, &short_req);
  bool fits = (short_tier == 0 && short_req == 0) ||
              onyx__gov_reclaim_can_cover(gov, tier, r, short_tier, short_req, 0);
  onyx__gov_fill_refusal(gov, tier, r, scope_of(short_tier, short_req), requested, allowance,
                         out_refusal);
  return fits;
}

onyx_status onyx__gov_refuse_growth(onyx_gov *gov, onyx_gov_tier tier, uint32_t r,
                                    uint64_t short_tier, uint64_t short_req, uint64_t requested,
                                    uint64_t allowance, onyx_gov_refusal *out_refusal) {
  onyx__gov_fill_refusal(gov, tier, r, scope_of(short_tier, short_req), requested, allowance,
                         out_refusal);
  gov->counters.refusals++;
  return ONYX_STATUS_TIER_EXHAUSTED;
}
