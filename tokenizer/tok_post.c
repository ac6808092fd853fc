/* The post-processor: TemplateProcessing's single-sequence template (a BOS before the
 * text, an EOS after), ByteLevel (offsets only: no ids change) and Sequence of them,
 * folded at load into the ids to put before and after the encoded text. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

void onyx__tok_template_free(onyx__tok_template *t) {
  free(t->before.items);
  free(t->after.items);
  *t = (onyx__tok_template){0};
}

/* special_tokens[name].ids appended to *out. */
static bool special_ids(onyx__tok_ctx *c, json_t *specials, const char *name, onyx__tok_ids *out) {
  json_t *s = specials ? json_object_get(specials, name) : NULL;
  if (s == NULL)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%s' is not in special_tokens", name);
  size_t mark;
  json_t *ids = onyx__tok_member(c, s, "ids", true, &mark);
  bool ok = ids != NULL;
  if (ids && !json_is_array(ids))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                       "special_tokens['%s'].ids: expected an "
                       "array, got %s",
                       name, onyx__tok_json_kind(ids));
  for (size_t i = 0; ok && i < json_array_size(ids); ++i) {
    json_t *v = json_array_get(ids, i);
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        json_integer_value(v) > ONYX_TOKENIZER_MAX_ID)
      ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                         "special_tokens['%s'].ids[%zu]: expected an id in [0, %d]", name, i,
                         ONYX_TOKENIZER_MAX_ID);
    else if (!onyx__tok_ids_add(out, json_integer_value(v)))
      ok = onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  onyx__tok_pop(c, mark);
  return ok;
}

/* One entry of "single": {"Sequence": {"id": "A"}} or {"SpecialToken": {"id": name}}. */
static bool template_piece(onyx__tok_ctx *c, json_t *e, json_t *specials, bool *seen_a,
                           onyx__tok_template *t) {
  json_t *seq = json_is_object(e) ? json_object_get(e, "Sequence") : NULL;
  json_t *sp = json_is_object(e) ? json_object_get(e, "SpecialToken") : NULL;
  json_t *body = seq ? seq : sp;
  const char *id = NULL;
  size_t n = 0;
  if (body == NULL || (seq && sp))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                         "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
  if (!json_is_object(body))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an object, got %s",
                         onyx__tok_json_kind(body));
  if (!onyx__tok_get_string(c, body, "id", true, &id, &n)) return false;
  if (sp) return special_ids(c, specials, id, *seen_a ? &t->after : &t->before);
  if (strcmp(id, "A") != 0)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                         "sequence '%s' in the single-sequence template (only A)", id);
  if (*seen_a)
    return onyx__tok_bad(c, ONYX_STATUS_UNSUPPORTED, "the single-sequence template repeats $A");
  *seen_a = true;
  return true;
}

static bool parse_template(onyx__tok_ctx *c, json_t *j, onyx__tok_template *t) {
  size_t mark, smark;
  json_t *specials = onyx__tok_member(c, j, "special_tokens", false, &smark);
  bool ok = !specials || json_is_object(specials) ||
            onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an object, got %s",
                          onyx__tok_json_kind(specials));
  onyx__tok_pop(c, smark);
  json_t *single = ok ? onyx__tok_member(c, j, "single", true, &mark) : NULL;
  if (!ok) return false;
  ok = single != NULL;
  if (single && !json_is_array(single))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an array, got %s",
                       onyx__tok_json_kind(single));
  bool seen_a = false;
  for (size_t i = 0; ok && i < json_array_size(single); ++i) {
    size_t m = onyx__tok_push(c, "[%zu]", i);
    ok = template_piece(c, json_array_get(single, i), specials, &seen_a, t);
    onyx__tok_pop(c, m);
  }
  if (ok && !seen_a) ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "no $A in the template");
  onyx__tok_pop(c, mark);
  return ok;
}

/* Wraps *outer's ids around *inner's: a later processor sees the earlier's output. */
static bool compose(onyx__tok_template *acc, const onyx__tok_template *next) {
  onyx__tok_ids before = {0};
  bool ok = true;
  for (size_t i = 0; ok && i < next->before.count; ++i)
    ok = onyx__tok_ids_add(&before, next->before.items[i]);
  for (size_t i = 0; ok && i < acc->before.count; ++i)
    ok = onyx__tok_ids_add(&before, acc->before.items[i]);
  for (size_t i = 0; ok && i < next->after.count; ++i)
    ok = onyx__tok_ids_add(&acc->after, next->after.items[i]);
  if (!ok) {
    free(before.items);
    return false;
  }
  free(acc->before.items);
  acc->before = before;
  return true;
}

bool onyx__tok_post_parse(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_template *out) {
  if (depth > ONYX__TOK_MAX_DEPTH)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "Sequence nested deeper than %d",
                         ONYX__TOK_MAX_DEPTH);
  const char *type = NULL;
  if (!onyx__tok_get_type(c, j, &type)) return false;
  if (!strcmp(type, "ByteLevel")) return true;
  if (!strcmp(type, "TemplateProcessing")) {
    onyx__tok_template t = {0};
    bool ok = parse_template(c, j, &t) &&
              (compose(out, &t) || onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory"));
    onyx__tok_template_free(&t);
    return ok;
  }
  if (strcmp(type, "Sequence") != 0)
    return onyx__tok_unsupported(c, "post_processor", type,
                                 "TemplateProcessing, ByteLevel, Sequence");
  size_t mark;
  json_t *arr = onyx__tok_member(c, j, "processors", true, &mark);
  bool ok = arr != NULL;
  if (arr && !json_is_array(arr))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an array, got %s",
                       onyx__tok_json_kind(arr));
  for (size_t i = 0; ok && i < json_array_size(arr); ++i) {
    size_t m = onyx__tok_push(c, "[%zu]", i);
    ok = onyx__tok_post_parse(c, json_array_get(arr, i), depth + 1, out);
    onyx__tok_pop(c, m);
  }
  onyx__tok_pop(c, mark);
  return ok;
}
