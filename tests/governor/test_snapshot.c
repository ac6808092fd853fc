/*
 * The JSON snapshot: it parses (a small strict validator here; Python's json.tool in
 * a second ctest on the file this test writes), and it carries the fields the core
 * and operators read: tiers, requesters with peaks, grants with owner labels, zones,
 * holders, counters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gov_test.h"

/* ------------------------------------------------------------------ tiny JSON */

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') ++p;
  return p;
}

static const char *skip_value(const char *p);

static const char *skip_string(const char *p) {
  if (*p != '"') return NULL;
  for (++p; *p != '"'; ++p) {
    if ((unsigned char)*p < 0x20) return NULL;
    if (*p == '\\') {
      ++p;
      if (*p == 'u') {
        for (int i = 1; i <= 4; ++i)
          if (!strchr("0123456789abcdefABCDEF", p[i]) || p[i] == '\0') return NULL;
        p += 4;
      } else if (!strchr("\"\\/bfnrt", *p) || *p == '\0') {
        return NULL;
      }
    }
  }
  return p + 1;
}

static const char *skip_number(const char *p) {
  const char *start = p;
  if (*p == '-') ++p;
  if (*p == '0')
    ++p;
  else if (*p >= '1' && *p <= '9')
    while (*p >= '0' && *p <= '9') ++p;
  else
    return NULL;
  if (*p == '.') {
    ++p;
    if (!(*p >= '0' && *p <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') ++p;
  }
  if (*p == 'e' || *p == 'E') {
    ++p;
    if (*p == '+' || *p == '-') ++p;
    if (!(*p >= '0' && *p <= '9')) return NULL;
    while (*p >= '0' && *p <= '9') ++p;
  }
  return p > start ? p : NULL;
}

static const char *skip_container(const char *p, char close, bool members) {
  p = ws(p + 1);
  if (*p == close) return p + 1;
  for (;;) {
    if (members) {
      p = skip_string(ws(p));
      if (p == NULL) return NULL;
      p = ws(p);
      if (*p != ':') return NULL;
      ++p;
    }
    p = skip_value(p);
    if (p == NULL) return NULL;
    p = ws(p);
    if (*p == close) return p + 1;
    if (*p != ',') return NULL;
    ++p;
  }
}

static const char *skip_value(const char *p) {
  p = ws(p);
  switch (*p) {
  case '{':
    return skip_container(p, '}', true);
  case '[':
    return skip_container(p, ']', false);
  case '"':
    return skip_string(p);
  case 't':
    return strncmp(p, "true", 4) ? NULL : p + 4;
  case 'f':
    return strncmp(p, "false", 5) ? NULL : p + 5;
  case 'n':
    return strncmp(p, "null", 4) ? NULL : p + 4;
  default:
    return skip_number(p);
  }
}

static bool json_valid(const char *text) {
  const char *end = skip_value(text);
  return end != NULL && *ws(end) == '\0';
}

/* The value of member `key` of the object at p, or NULL. */
static const char *member(const char *p, const char *key) {
  p = ws(p);
  if (p == NULL || *p != '{') return NULL;
  p = ws(p + 1);
  size_t klen = strlen(key);
  while (*p == '"') {
    const char *kend = skip_string(p);
    bool match = (size_t)(kend - p) == klen + 2 && strncmp(p + 1, key, klen) == 0;
    p = ws(ws(kend) + 1);
    if (match) return p;
    p = ws(skip_value(p));
    if (*p != ',') return NULL;
    p = ws(p + 1);
  }
  return NULL;
}

/* Element i of the array at p, or NULL. */
static const char *element(const char *p, int i) {
  if (p == NULL || *(p = ws(p)) != '[') return NULL;
  p = ws(p + 1);
  for (int k = 0; *p != ']'; ++k) {
    if (k == i) return p;
    p = ws(skip_value(p));
    if (*p == ',') p = ws(p + 1);
  }
  return NULL;
}

static unsigned long long number_at(const char *p) {
  assert_non_null(p);
  return strtoull(p, NULL, 10);
}

static bool string_is(const char *p, const char *want) {
  if (p == NULL || *p != '"') return false;
  size_t n = strlen(want);
  return strncmp(p + 1, want, n) == 0 && p[1 + n] == '"';
}

/* ------------------------------------------------------------------ tests */

static void validator_rejects_broken_json(void **state) {
  (void)state;
  assert_true(json_valid("{\"a\":[1,2.5e3,-0,\"x\\n\\u00e9\",true,false,null,{}]}"));
  assert_false(json_valid("{\"a\":1,}"));
  assert_false(json_valid("{\"a\" 1}"));
  assert_false(json_valid("[1 2]"));
  assert_false(json_valid("\"tab\there\""));
  assert_false(json_valid("{\"a\":01}"));
  assert_false(json_valid("{} x"));
}

static uint64_t snapshot_reclaim(void *user, onyx_gov *gov, onyx_gov_tier tier, uint64_t want) {
  (void)user;
  (void)gov;
  (void)tier;
  (void)want;
  return 0;
}

static void snapshot_parses_and_carries_the_fields(void **state) {
  (void)state;
  onyx_gov *gov = NULL;
  onyx_gov_fake *fake = NULL;
  assert_ok(onyx_gov_create(&gov));
  assert_ok(onyx_gov_fake_create(2 * MiB, &fake));
  onyx_gov_tier host, dev;
  assert_ok(onyx_gov_tier_add(gov, "host", 1 * GiB, &host));
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 8 * GiB, &dev));
  assert_ok(onyx_gov_requester_set_limit(gov, dev, ONYX_REQUESTER_KV_CACHE, 2 * GiB));

  onyx_gov_grant_id scores, weights, kv, gone;
  assert_ok(onyx_gov_grant(gov, dev, ONYX_REQUESTER_WORKSPACE_STEP, 3 * MiB,
                           "node 12 GroupQueryAttention region scores", &scores, NULL));
  assert_ok(onyx_gov_grant(gov, dev, ONYX_REQUESTER_WEIGHTS, 100 * MiB, "weights \"q\\proj\"\n",
                           &weights, NULL));
  assert_ok(onyx_gov_grant(gov, dev, ONYX_REQUESTER_KV_CACHE, 5 * MiB, "kv layer 0", &kv, NULL));
  assert_ok(onyx_gov_grant(gov, dev, ONYX_REQUESTER_WORKSPACE_STEP, 7 * MiB, "gone", &gone, NULL));
  assert_ok(onyx_gov_release(gov, gone));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(gov, gone));
  void *act = NULL;
  assert_ok(
      onyx_gov_alloc(gov, host, ONYX_REQUESTER_ACTIVATIONS, 4096, 64, "node 3 output", &act, NULL));
  onyx_gov_holder_id h;
  onyx_gov_zone_desc d = zone_desc(dev, ONYX_REQUESTER_WORKSPACE_SESSION,
                                   onyx_gov_fake_backend(fake), 256 * MiB, 0, "session arena");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(gov, &d, &zone, NULL));
  assert_ok(onyx_gov_zone_grow(zone, 4 * MiB, "node 12 GroupQueryAttention q_bnsh", NULL));
  onyx_gov_grant_id plan;
  assert_ok(onyx_gov_zone_prepare(zone, 8 * MiB, "node 40 Attention staging", &plan, NULL));
  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_grant(gov, host, ONYX_REQUESTER_WEIGHTS, 2 * GiB, NULL, &gone, &r));
  onyx_gov_note_bytes_moved(gov, 12345);
  assert_ok(onyx_gov_holder_register(gov, dev, 3, "kv offload", snapshot_reclaim, NULL, &h));
  assert_ok(onyx_gov_holder_adopt(gov, h, kv));

  size_t len = 0;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_snapshot_json(gov, NULL, 0, &len));
  assert_true(len > 100);
  char tiny[8] = "unchang";
  size_t len2 = 0;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT,
                onyx_gov_snapshot_json(gov, tiny, sizeof tiny, &len2));
  assert_int_equal(len, len2);
  assert_string_equal("unchang", tiny); /* untouched */
  char *json = test_malloc(len + 1);
  assert_ok(onyx_gov_snapshot_json(gov, json, len + 1, &len2));
  assert_int_equal(len, strlen(json));
  if (!json_valid(json)) fail_msg("snapshot is not valid JSON: %s", json);

  /* Tiers and requesters. */
  const char *tiers = member(json, "tiers");
  const char *t1 = element(tiers, 1);
  assert_true(string_is(member(t1, "name"), "cuda:0"));
  assert_int_equal(8 * GiB, number_at(member(t1, "limit")));
  assert_int_equal(3 * MiB + 100 * MiB + 5 * MiB + 4 * MiB, number_at(member(t1, "used")));
  assert_int_equal(4 * MiB, number_at(member(t1, "pending")));
  assert_int_equal(5 * MiB, number_at(member(t1, "reclaimable")));
  const char *reqs = member(t1, "requesters");
  const char *step = element(reqs, ONYX_REQUESTER_WORKSPACE_STEP);
  assert_true(string_is(member(step, "name"), "workspace_step"));
  assert_int_equal(3 * MiB, number_at(member(step, "used")));
  assert_int_equal(10 * MiB, number_at(member(step, "peak")));
  assert_int_equal(0, strncmp(member(step, "limit"), "null", 4));
  assert_int_equal(2 * GiB, number_at(member(element(reqs, ONYX_REQUESTER_KV_CACHE), "limit")));
  assert_int_equal(4 * MiB,
                   number_at(member(element(reqs, ONYX_REQUESTER_WORKSPACE_SESSION), "pending")));

  /* Grants with owners, the escaped one intact, the growth plan with its pool share. */
  assert_non_null(strstr(json, "\"owner\":\"node 12 GroupQueryAttention region scores\""));
  assert_non_null(strstr(json, "\"owner\":\"weights \\\"q\\\\proj\\\"\\u000a\""));
  assert_non_null(strstr(json, "\"owner\":\"node 3 output\""));
  assert_null(strstr(json, "\"owner\":\"gone\""));
  const char *grants = member(json, "grants");
  int growth = 0, holder_tagged = 0, count = 0;
  for (const char *g; (g = element(grants, count)) != NULL; ++count) {
    if (string_is(member(g, "kind"), "growth")) {
      ++growth;
      assert_true(string_is(member(g, "owner"), "node 40 Attention staging"));
      assert_int_equal(4 * MiB, number_at(member(g, "bytes")));
      assert_int_equal(4 * MiB, number_at(member(g, "unassigned")));
    }
    if (member(g, "holder") != NULL) {
      ++holder_tagged;
      assert_true(string_is(member(g, "holder"), "kv offload"));
    }
  }
  assert_int_equal(5, count);
  assert_int_equal(1, growth);
  assert_int_equal(1, holder_tagged);

  /* Zones, holders, counters. */
  const char *z = element(member(json, "zones"), 0);
  assert_true(string_is(member(z, "owner"), "session arena"));
  assert_true(string_is(member(z, "backend"), "fake"));
  assert_int_equal(4 * MiB, number_at(member(z, "mapped")));
  assert_int_equal(256 * MiB, number_at(member(z, "reserved")));
  assert_int_equal('"', *member(z, "base"));
  const char *hh = element(member(json, "holders"), 0);
  assert_true(string_is(member(hh, "owner"), "kv offload"));
  assert_int_equal(3, number_at(member(hh, "priority")));
  assert_int_equal(5 * MiB, number_at(member(hh, "reclaimable")));
  const char *k = member(json, "counters");
  assert_int_equal(7, number_at(member(k, "grants")));
  assert_int_equal(2, number_at(member(k, "releases")));
  assert_int_equal(1, number_at(member(k, "refusals")));
  assert_int_equal(1, number_at(member(k, "double_releases")));
  assert_int_equal(1, number_at(member(k, "growth_events")));
  assert_int_equal(0, number_at(member(k, "reclaims")));
  assert_int_equal(12345, number_at(member(k, "bytes_moved")));
  assert_int_equal(4 * MiB, number_at(member(k, "bytes_mapped")));

  /* The stream form is byte for byte the same. */
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_ok(onyx_gov_snapshot_write(gov, f));
  assert_int_equal(len, (size_t)ftell(f));
  rewind(f);
  char *again = test_malloc(len + 1);
  assert_int_equal(len, fread(again, 1, len, f));
  again[len] = '\0';
  assert_string_equal(json, again);
  fclose(f);

  /* For governor.snapshot_json_tool. */
  const char *out = getenv("ONYX_GOV_SNAPSHOT_OUT");
  if (out != NULL) {
    FILE *o = fopen(out, "w");
    assert_non_null(o);
    assert_ok(onyx_gov_snapshot_write(gov, o));
    assert_int_equal(0, fclose(o));
  }

  test_free(again);
  test_free(json);
  assert_ok(onyx_gov_holder_unregister(gov, h));
  assert_ok(onyx_gov_release(gov, plan));
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_ok(onyx_gov_free(gov, act));
  assert_ok(onyx_gov_release(gov, scores));
  assert_ok(onyx_gov_release(gov, weights));
  assert_ok(onyx_gov_release(gov, kv));
  assert_books_balanced(gov);
  onyx_gov_destroy(gov);
  onyx_gov_fake_destroy(fake);
}

static void empty_governor_snapshot_is_valid(void **state) {
  (void)state;
  onyx_gov *gov = NULL;
  assert_ok(onyx_gov_create(&gov));
  char buf[1024];
  assert_ok(onyx_gov_snapshot_json(gov, buf, sizeof buf, NULL));
  assert_true(json_valid(buf));
  assert_non_null(strstr(buf, "\"tiers\":[]"));
  assert_non_null(strstr(buf, "\"grants\":[]"));
  onyx_gov_destroy(gov);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(validator_rejects_broken_json),
      cmocka_unit_test(snapshot_parses_and_carries_the_fields),
      cmocka_unit_test(empty_governor_snapshot_is_valid),
  };
  return cmocka_run_group_tests_name("governor snapshot", tests, NULL, NULL);
}
