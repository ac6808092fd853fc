/* Loading a tokenizer: the files, the JSON document's sections in the order they
 * depend on each other (the model, then the normalizer, then the added tokens whose
 * ids and normalized forms need both), and lookups of single tokens. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer_impl.h"

#define CONFIG_MAX_BYTES (4u << 20)

bool onyx__tok_run_init(onyx__tok_run *r) {
  *r = (onyx__tok_run){0};
  r->match = pcre2_match_data_create(1, NULL);
  r->mctx = pcre2_match_context_create(NULL);
  /* Long runs of whitespace recurse deeply in the JIT's backtracking. */
  r->jit_stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, NULL);
  if (r->match == NULL || r->mctx == NULL || r->jit_stack == NULL) {
    onyx__tok_run_free(r);
    return false;
  }
  pcre2_jit_stack_assign(r->mctx, NULL, r->jit_stack);
  return true;
}

void onyx__tok_run_free(onyx__tok_run *r) {
  pcre2_match_data_free(r->match);
  pcre2_match_context_free(r->mctx);
  pcre2_jit_stack_free(r->jit_stack);
  onyx__tok_buf_free(&r->tmp[0]);
  onyx__tok_buf_free(&r->tmp[1]);
  *r = (onyx__tok_run){0};
}

void onyx_tokenizer_destroy(onyx_tokenizer *t) {
  if (t == NULL) return;
  onyx__tok_normalizer_free(t->normalizer);
  onyx__tok_pretok_free(t->pretok);
  onyx__tok_bpe_free(&t->bpe);
  onyx__tok_added_free(&t->added);
  onyx__tok_decoder_free(t->decoder);
  onyx__tok_template_free(&t->post);
  onyx__tok_run_free(&t->run);
  onyx__tok_pieces_free(&t->work[0]);
  onyx__tok_pieces_free(&t->work[1]);
  free(t);
}

void onyx_tokenizer_free(void *memory) { free(memory); }

/* A section that may be null: parsed by `parse` with its path pushed. */
#define SECTION(c, root, key, call)                                                                \
  do {                                                                                             \
    size_t mark_;                                                                                  \
    json_t *j_ = onyx__tok_member(c, root, key, false, &mark_);                                    \
    bool ok_ = j_ == NULL || (call);                                                               \
    onyx__tok_pop(c, mark_);                                                                       \
    if (!ok_) return false;                                                                        \
  } while (0)

static bool check_version(onyx__tok_ctx *c, json_t *root) {
  const char *v = NULL;
  size_t n = 0;
  if (!onyx__tok_get_string(c, root, "version", false, &v, &n)) return false;
  if (v && strcmp(v, "1.0") != 0) {
    size_t mark = onyx__tok_push(c, ".version");
    onyx__tok_bad(c, ONYX_STATUS_UNSUPPORTED, "format version '%s' (Onyx reads 1.0)", v);
    onyx__tok_pop(c, mark);
    return false;
  }
  return true;
}

static bool build(onyx__tok_ctx *c, json_t *root, onyx_tokenizer *t) {
  if (!json_is_object(root))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an object, got %s",
                         onyx__tok_json_kind(root));
  if (!check_version(c, root)) return false;
  size_t mark;
  json_t *model = onyx__tok_member(c, root, "model", true, &mark);
  bool ok = model && onyx__tok_bpe_parse(c, model, &t->bpe);
  onyx__tok_pop(c, mark);
  if (!ok) return false;
  SECTION(c, root, "normalizer", onyx__tok_normalizer_parse(c, j_, 0, &t->normalizer));
  SECTION(c, root, "pre_tokenizer", onyx__tok_pretok_parse(c, j_, 0, &t->pretok));
  SECTION(c, root, "decoder", onyx__tok_decoder_parse(c, j_, 0, &t->decoder));
  SECTION(c, root, "post_processor", onyx__tok_post_parse(c, j_, 0, &t->post));
  json_t *added = onyx__tok_member(c, root, "added_tokens", false, &mark);
  ok = onyx__tok_added_parse(c, added, &t->bpe, t->normalizer, &t->run, &t->added);
  onyx__tok_pop(c, mark);
  return ok;
}

static onyx_status parse(const char *json, size_t size, const char *config, size_t config_size,
                         const char *origin, const char *config_origin,
                         onyx_tokenizer **out_tokenizer, onyx_error **out_error) {
  if (out_tokenizer == NULL || (json == NULL && size))
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "onyx_tokenizer_parse: NULL text or out_tokenizer");
  onyx__tok_ctx c = {.origin = origin ? origin : "tokenizer.json", .out_error = out_error};
  json_error_t jerr;
  json_t *root = json_loadb(json ? json : "", size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
  if (root == NULL)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_MODEL, "%s: line %d column %d: %s",
                          c.origin, jerr.line, jerr.column, jerr.text);
  onyx_tokenizer *t = calloc(1, sizeof *t);
  bool ok = t != NULL && onyx__tok_run_init(&t->run);
  if (!ok) onyx__tok_bad(&c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  if (t)
    t->bos_id = t->eos_id = t->pad_id = t->unk_id = -1, t->add_bos_token = t->add_eos_token = -1;
  ok = ok && build(&c, root, t);
  json_decref(root);
  onyx_status st = ok ? ONYX_STATUS_OK : c.status;
  if (ok && config) st = onyx__tok_config_parse(t, config, config_size, config_origin, out_error);
  if (st != ONYX_STATUS_OK) {
    onyx_tokenizer_destroy(t);
    return st;
  }
  *out_tokenizer = t;
  return ONYX_STATUS_OK;
}

onyx_status onyx_tokenizer_parse(const char *json, size_t size, const char *config,
                                 size_t config_size, const char *origin,
                                 onyx_tokenizer **out_tokenizer, onyx_error **out_error) {
  return parse(json, size, config, config_size, origin, "tokenizer_config.json", out_tokenizer,
               out_error);
}

/* path/name, or an error when it does not fit. */
static bool join(char *out, size_t cap, const char *dir, const char *name) {
  int n = snprintf(out, cap, "%s/%s", dir, name);
  return n > 0 && (size_t)n < cap;
}

onyx_status onyx_tokenizer_load(const char *path, onyx_tokenizer **out_tokenizer,
                                onyx_error **out_error) {
  if (path == NULL || out_tokenizer == NULL)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "onyx_tokenizer_load: NULL path or out_tokenizer");
  char json_path[4096], config_path[4096], dir[4096];
  struct stat st;
  bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
  snprintf(dir, sizeof dir, "%s", path);
  if (!is_dir) {
    char *slash = strrchr(dir, '/');
    if (slash)
      *slash = '\0';
    else
      snprintf(dir, sizeof dir, ".");
  }
  if (!join(json_path, sizeof json_path, dir, "tokenizer.json") ||
      !join(config_path, sizeof config_path, dir, "tokenizer_config.json") ||
      strlen(path) >= sizeof dir)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT, "path too long: '%s'", path);
  if (!is_dir) snprintf(json_path, sizeof json_path, "%s", path);
  char *json = NULL, *config = NULL;
  size_t size = 0, config_size = 0;
  onyx_status s =
      onyx__tok_read_file(json_path, ONYX_TOKENIZER_MAX_FILE_BYTES, &json, &size, out_error);
  if (s != ONYX_STATUS_OK) return s;
  onyx_error *cfg_error = NULL;
  s = onyx__tok_read_file(config_path, CONFIG_MAX_BYTES, &config, &config_size, &cfg_error);
  if (s == ONYX_STATUS_NOT_FOUND) { /* a folder without tokenizer_config.json is fine */
    onyx_error_free(cfg_error);
    s = ONYX_STATUS_OK;
  } else if (s != ONYX_STATUS_OK) {
    if (out_error)
      *out_error = cfg_error;
    else
      onyx_error_free(cfg_error);
    free(json);
    return s;
  }
  onyx_tokenizer *t = NULL;
  s = parse(json, size, config, config_size, json_path, config_path, &t, out_error);
  free(json);
  free(config);
  if (s == ONYX_STATUS_OK) *out_tokenizer = t;
  return s;
}

void onyx_tokenizer_get_info(const onyx_tokenizer *t, onyx_tokenizer_info *out) {
  if (t == NULL || out == NULL || out->struct_size < sizeof *out) return;
  /* Distinct ids: the model's, and the added tokens' outside the model. */
  int64_t outside = 0;
  for (size_t i = 0; i < t->added.count; ++i) {
    size_t len;
    if (onyx__tok_bpe_token(&t->bpe, t->added.tokens[i].id, &len) == NULL) ++outside;
  }
  *out = (onyx_tokenizer_info){.struct_size = sizeof *out,
                               .vocab_size = (int64_t)t->bpe.vocab.count + outside,
                               .added_tokens = (int64_t)t->added.count,
                               .bos_id = t->bos_id,
                               .eos_id = t->eos_id,
                               .pad_id = t->pad_id,
                               .unk_id = t->unk_id,
                               .add_bos_token = t->add_bos_token,
                               .add_eos_token = t->add_eos_token,
                               .byte_level = onyx__tok_pretok_byte_level(t->pretok)};
}

int64_t onyx_tokenizer_token_to_id(const onyx_tokenizer *t, const char *token, size_t size) {
  if (t == NULL || (token == NULL && size)) return -1;
  uint32_t idx;
  if (onyx__tok_strmap_get(&t->added.by_content, token ? token : "", size, &idx))
    return t->added.tokens[idx].id;
  return onyx__tok_bpe_id(&t->bpe, token ? token : "", size);
}

const char *onyx_tokenizer_id_to_token(const onyx_tokenizer *t, int64_t id, size_t *out_size) {
  if (t == NULL) return NULL;
  size_t len = 0;
  const onyx__tok_added_token *a = onyx__tok_added_by_id(&t->added, id);
  const char *s = a ? a->content : onyx__tok_bpe_token(&t->bpe, id, &len);
  if (a) len = a->len;
  if (s && out_size) *out_size = len;
  return s;
}
