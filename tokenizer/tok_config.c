/* tokenizer_config.json, the transformers side of a folder: the names of the bos,
 * eos, pad and unk tokens (a string, or an AddedToken object with "content") turned
 * into ids, and add_bos_token / add_eos_token, kept for information. Every other
 * key (chat_template, model_max_length, ...) is not Onyx's concern and is ignored. */
#include <string.h>

#include "tokenizer_impl.h"

static bool special(onyx__tok_ctx *c, onyx_tokenizer *t, json_t *root, const char *key,
                    int64_t *out) {
  size_t mark;
  json_t *v = onyx__tok_member(c, root, key, false, &mark);
  bool ok = true;
  if (v && json_is_object(v)) {
    size_t m2;
    json_t *content = onyx__tok_member(c, v, "content", true, &m2);
    if (content && !json_is_string(content))
      ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected a string, got %s",
                         onyx__tok_json_kind(content));
    else if (content)
      *out = onyx_tokenizer_token_to_id(t, json_string_value(content), json_string_length(content));
    else
      ok = false;
    onyx__tok_pop(c, m2);
  } else if (v && json_is_string(v)) {
    *out = onyx_tokenizer_token_to_id(t, json_string_value(v), json_string_length(v));
  } else if (v) {
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected a string or an object, got %s",
                       onyx__tok_json_kind(v));
  }
  onyx__tok_pop(c, mark);
  return ok;
}

static bool flag(onyx__tok_ctx *c, json_t *root, const char *key, int32_t *out) {
  json_t *v = json_object_get(root, key);
  if (v == NULL || json_is_null(v)) return true;
  bool b = false;
  if (!onyx__tok_get_bool(c, root, key, &b)) return false;
  *out = b;
  return true;
}

onyx_status onyx__tok_config_parse(onyx_tokenizer *t, const char *text, size_t size,
                                   const char *origin, onyx_error **out_error) {
  onyx__tok_ctx c = {.origin = origin ? origin : "tokenizer_config.json", .out_error = out_error};
  json_error_t jerr;
  /* Numbers as reals: transformers writes model_max_length as 1e30 spelt out, beyond
   * any integer jansson holds, and no number here is read. */
  json_t *root = json_loadb(
      text, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, &jerr);
  if (root == NULL)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_MODEL, "%s: line %d column %d: %s",
                          c.origin, jerr.line, jerr.column, jerr.text);
  bool ok = json_is_object(root) ||
            onyx__tok_bad(&c, ONYX_STATUS_INVALID_MODEL, "expected an object, got %s",
                          onyx__tok_json_kind(root));
  ok = ok && special(&c, t, root, "bos_token", &t->bos_id) &&
       special(&c, t, root, "eos_token", &t->eos_id) &&
       special(&c, t, root, "pad_token", &t->pad_id) &&
       special(&c, t, root, "unk_token", &t->unk_id) &&
       flag(&c, root, "add_bos_token", &t->add_bos_token) &&
       flag(&c, root, "add_eos_token", &t->add_eos_token);
  json_decref(root);
  return ok ? ONYX_STATUS_OK : c.status;
}
