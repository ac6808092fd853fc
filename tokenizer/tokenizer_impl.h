/* Private to the tokenizer library: its building blocks. Nothing here is published. */
#ifndef ONYX_TOKENIZER_IMPL_H
#define ONYX_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_tokenizer.h"

#define ONYX__TOK_ERR_CAP 1024
/* Nesting of Sequence inside Sequence a file may use. */
#define ONYX__TOK_MAX_DEPTH 16

#if defined(__GNUC__)
#define ONYX__TOK_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ONYX__TOK_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------ errors */

/* Stores an onyx_error with the formatted message; returns `status`. */
onyx_status onyx__tok_fail(onyx_error **out_error, onyx_status status, const char *fmt, ...)
    ONYX__TOK_PRINTF(3, 4);

/* Reading a JSON document: where we are (a path such as "model.merges[3]") and the
 * first error met, as "origin: path: message". */
typedef struct onyx__tok_ctx {
  const char *origin;
  onyx_error **out_error;
  onyx_status status;
  char path[384];
  size_t path_len;
} onyx__tok_ctx;

/* Records the first error (later ones are dropped) and returns false. */
bool onyx__tok_bad(onyx__tok_ctx *c, onyx_status status, const char *fmt, ...)
    ONYX__TOK_PRINTF(3, 4);
/* Appends to the path ("." key, "[i]") and returns the length to pop back to. */
size_t onyx__tok_push(onyx__tok_ctx *c, const char *fmt, ...) ONYX__TOK_PRINTF(2, 3);
void onyx__tok_pop(onyx__tok_ctx *c, size_t mark);

/* "an object", "a string", ... for messages. */
const char *onyx__tok_json_kind(const json_t *v);
/* obj[key] with the path pushed; NULL when absent or null (an error when
 * `required`). The caller pops `*mark`. */
json_t *onyx__tok_member(onyx__tok_ctx *c, json_t *obj, const char *key, bool required,
                         size_t *mark);
/* Typed members: absent or null leaves *out as the caller set it (or is an error when
 * `required`); a value of another type is an error naming the path. */
bool onyx__tok_get_bool(onyx__tok_ctx *c, json_t *obj, const char *key, bool *out);
bool onyx__tok_get_string(onyx__tok_ctx *c, json_t *obj, const char *key, bool required,
                          const char **out, size_t *out_len);
bool onyx__tok_get_uint(onyx__tok_ctx *c, json_t *obj, const char *key, bool required, uint64_t max,
                        uint64_t *out);
/* A string that is exactly one character (Metaspace's replacement, Strip's content). */
bool onyx__tok_get_char(onyx__tok_ctx *c, json_t *obj, const char *key, bool required,
                        uint32_t *out_cp);
/* The object's "type" (required). */
bool onyx__tok_get_type(onyx__tok_ctx *c, json_t *obj, const char **out);
/* "'X' is not supported (supported: ...)" at key "type". */
bool onyx__tok_unsupported(onyx__tok_ctx *c, const char *what, const char *type,
                           const char *supported);
/* A copy of n bytes plus a NUL (NULL when out of memory, an error recorded). */
char *onyx__tok_dup(onyx__tok_ctx *c, const char *s, size_t n);

/* ------------------------------------------------------------------ bytes */

/* A growable byte buffer; `data` stays NUL-terminated once allocated. */
typedef struct onyx__tok_buf {
  char *data;
  size_t len, cap;
} onyx__tok_buf;

bool onyx__tok_buf_reserve(onyx__tok_buf *b, size_t extra);
bool onyx__tok_buf_add(onyx__tok_buf *b, const void *p, size_t n);
void onyx__tok_buf_free(onyx__tok_buf *b);

/* Ids produced by encode. */
typedef struct onyx__tok_ids {
  int64_t *items;
  size_t count, cap;
} onyx__tok_ids;

bool onyx__tok_ids_add(onyx__tok_ids *ids, int64_t id);

/* ------------------------------------------------------------------ UTF-8 */

/* Offset of the first byte that is not valid UTF-8, or n when all of it is. */
size_t onyx__tok_utf8_check(const char *s, size_t n);
/* Length of the character starting with `lead` in valid UTF-8. */
static inline size_t onyx__tok_utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
/* The code point at s (valid UTF-8); *out_len receives its byte length. */
uint32_t onyx__tok_utf8_decode(const char *s, size_t *out_len);
/* Writes cp as UTF-8 into out (room for 4); returns its length. */
size_t onyx__tok_utf8_encode(uint32_t cp, char *out);
/* Appends s as valid UTF-8, each maximal ill-formed subsequence replaced by one
 * U+FFFD (Rust's String::from_utf8_lossy). */
bool onyx__tok_utf8_lossy(const char *s, size_t n, onyx__tok_buf *out);
/* Unicode White_Space (Rust's char::is_whitespace). */
bool onyx__tok_is_whitespace(uint32_t cp);
/* Rust's char::is_numeric (general categories Nd, Nl, No). */
bool onyx__tok_is_numeric(uint32_t cp);
/* A \w character of Rust's regex crate (alphabetic, marks, Nd, Pc, joiners). */
bool onyx__tok_is_word(uint32_t cp);

/* GPT-2's byte-level alphabet: byte → character (UTF-8, 1 or 2 bytes), and back. */
typedef struct onyx__tok_bytemap {
  char utf8[256][2];
  uint8_t utf8_len[256];
  int16_t byte_of[0x144]; /* code point → byte, -1 outside the alphabet */
} onyx__tok_bytemap;

const onyx__tok_bytemap *onyx__tok_bytemap_get(void);

/* ------------------------------------------------------------------ hash maps */

uint64_t onyx__tok_hash(const void *p, size_t n, uint64_t seed);
/* A per-process random seed, so that no file can be made to collide on purpose. */
uint64_t onyx__tok_seed(void);

/* String → uint32, keys stored in the map's own arena. */
typedef struct onyx__tok_strmap {
  struct onyx__tok_strslot {
    uint32_t off, len; /* key bytes in `keys` */
    uint32_t value;
    uint32_t tag; /* high hash bits; 0: empty slot */
  } * slots;
  size_t cap, count; /* cap: a power of two */
  onyx__tok_buf keys;
  uint64_t seed;
} onyx__tok_strmap;

/* Inserts or replaces; false when out of memory. `*out_replaced` (may be NULL)
 * says whether the key was there, and receives nothing else. */
bool onyx__tok_strmap_put(onyx__tok_strmap *m, const char *key, size_t len, uint32_t value,
                          bool *out_replaced);
/* The value of `key`, or false. */
bool onyx__tok_strmap_get(const onyx__tok_strmap *m, const char *key, size_t len,
                          uint32_t *out_value);
/* The stored bytes of a slot's key (for id → text tables). */
static inline const char *onyx__tok_strmap_key(const onyx__tok_strmap *m, uint32_t off) {
  return m->keys.data + off;
}
void onyx__tok_strmap_free(onyx__tok_strmap *m);

/* (left id, right id) → (rank, merged id). */
typedef struct onyx__tok_pairmap {
  struct onyx__tok_pairslot {
    uint64_t key; /* UINT64_MAX: empty */
    uint32_t rank, merged;
  } * slots;
  size_t cap, count;
  uint64_t seed;
} onyx__tok_pairmap;

bool onyx__tok_pairmap_put(onyx__tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank,
                           uint32_t merged);
static inline uint64_t onyx__tok_pair_mix(uint64_t k, uint64_t seed) {
  k ^= seed;
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}
/* Inline: the merge loop asks this for every neighbouring pair. */
static inline const struct onyx__tok_pairslot *onyx__tok_pairmap_get(const onyx__tok_pairmap *m,
                                                                     uint32_t a, uint32_t b) {
  if (m->cap == 0) return NULL;
  uint64_t key = (uint64_t)a << 32 | b;
  size_t mask = m->cap - 1;
  for (size_t i = onyx__tok_pair_mix(key, m->seed) & mask;; i = (i + 1) & mask) {
    const struct onyx__tok_pairslot *s = &m->slots[i];
    if (s->key == key) return s;
    if (s->key == UINT64_MAX) return NULL;
  }
}
void onyx__tok_pairmap_free(onyx__tok_pairmap *m);

/* ------------------------------------------------------------------ scratch */

/* What one encode or decode call works in: PCRE2's match state and buffers reused
 * from call to call. Owned by the tokenizer (hence not thread-safe). */
typedef struct onyx__tok_run {
  pcre2_match_data *match;
  pcre2_match_context *mctx;
  pcre2_jit_stack *jit_stack;
  onyx__tok_buf tmp[2];
} onyx__tok_run;

bool onyx__tok_run_init(onyx__tok_run *r);
void onyx__tok_run_free(onyx__tok_run *r);

/* ------------------------------------------------------------------ regex */

/* A Split or Replace pattern: a literal string or a regex in Oniguruma's dialect
 * (the one `tokenizers` uses), compiled by PCRE2 after the few escapes whose meaning
 * differs are rewritten (\s, \w, \h and their negations; ^ and $ match at lines and
 * . matches a newline, as in Oniguruma's Ruby syntax). */
typedef struct onyx__tok_regex {
  pcre2_code *code; /* NULL for a non-empty literal */
  char *literal;
  size_t literal_len;
} onyx__tok_regex;

/* Reads a {"String": s} or {"Regex": r} member. */
bool onyx__tok_regex_parse(onyx__tok_ctx *c, json_t *obj, const char *key, onyx__tok_regex *out);
/* Compiles one; `what` names it in messages. */
bool onyx__tok_regex_compile(onyx__tok_ctx *c, const char *pattern, size_t len, bool literal,
                             onyx__tok_regex *out);
void onyx__tok_regex_free(onyx__tok_regex *re);

/* A part of a string: a match of a pattern or the text between two. */
typedef struct onyx__tok_span {
  size_t start, end;
  bool match;
} onyx__tok_span;

typedef struct onyx__tok_spans {
  onyx__tok_span *items;
  size_t count, cap;
} onyx__tok_spans;

bool onyx__tok_spans_add(onyx__tok_spans *s, size_t start, size_t end, bool match);

/* The parts of s: the pattern's matches as Oniguruma's find_iter yields them (an
 * empty match right after a match skipped) and the text between (tokenizers'
 * Pattern::find_matches). Replaces *out's contents. */
onyx_status onyx__tok_regex_find(const onyx__tok_regex *re, onyx__tok_run *run, const char *s,
                                 size_t n, onyx__tok_spans *out, onyx_error **out_error);
/* The same for a test on characters (each matching character is one match). */
bool onyx__tok_chars_find(const char *s, size_t n, bool (*test)(uint32_t cp, const void *arg),
                          const void *arg, onyx__tok_spans *out);

/* How a split treats its delimiters (tokenizers' SplitDelimiterBehavior). */
typedef enum onyx__tok_behavior {
  ONYX__SPLIT_REMOVED = 0,
  ONYX__SPLIT_ISOLATED,
  ONYX__SPLIT_MERGED_WITH_PREVIOUS,
  ONYX__SPLIT_MERGED_WITH_NEXT,
  ONYX__SPLIT_CONTIGUOUS
} onyx__tok_behavior;

bool onyx__tok_behavior_parse(onyx__tok_ctx *c, json_t *obj, onyx__tok_behavior *out);
/* Rewrites the spans into the parts to keep (match flags then mean nothing). */
bool onyx__tok_spans_apply(onyx__tok_spans *s, onyx__tok_behavior behavior);

/* ------------------------------------------------------------------ pieces */

/* Text on its way through the pipeline: a list of pieces in an arena. */
typedef struct onyx__tok_piece {
  size_t off, len; /* bytes in the list's text */
  int64_t id;      /* an added token already resolved, or -1 */
  bool first;      /* starts at the beginning of the input (Metaspace "first") */
} onyx__tok_piece;

typedef struct onyx__tok_pieces {
  onyx__tok_buf text;
  onyx__tok_piece *items;
  size_t count, cap;
} onyx__tok_pieces;

/* Appends a piece holding a copy of s[0..n). */
bool onyx__tok_pieces_add(onyx__tok_pieces *p, const char *s, size_t n, int64_t id, bool first);
/* Opens a piece whose text the caller then appends to p->text. */
bool onyx__tok_pieces_open(onyx__tok_pieces *p, int64_t id, bool first);
void onyx__tok_pieces_clear(onyx__tok_pieces *p);
void onyx__tok_pieces_free(onyx__tok_pieces *p);
static inline const char *onyx__tok_piece_text(const onyx__tok_pieces *p, size_t i) {
  return p->text.data + p->items[i].off;
}

/* ------------------------------------------------------------------ normalizers */

typedef struct onyx__tok_normalizer onyx__tok_normalizer;

bool onyx__tok_normalizer_parse(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_normalizer **out);
void onyx__tok_normalizer_free(onyx__tok_normalizer *n);
/* Normalizes s into *out (replaced). */
onyx_status onyx__tok_normalize(const onyx__tok_normalizer *n, onyx__tok_run *run, const char *s,
                                size_t len, onyx__tok_buf *out, onyx_error **out_error);

/* ------------------------------------------------------------------ pre-tokenizers */

typedef struct onyx__tok_pretok onyx__tok_pretok;

bool onyx__tok_pretok_parse(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_pretok **out);
void onyx__tok_pretok_free(onyx__tok_pretok *p);
/* Splits and rewrites the pieces of *io (pieces with an id pass through);
 * `spare` is a second list to work in. */
onyx_status onyx__tok_pretokenize(const onyx__tok_pretok *p, onyx__tok_run *run,
                                  onyx__tok_pieces *io, onyx__tok_pieces *spare,
                                  onyx_error **out_error);
/* Metaspace's prepend_scheme. */
enum { ONYX__PREPEND_ALWAYS = 0, ONYX__PREPEND_FIRST = 1, ONYX__PREPEND_NEVER = 2 };
/* Metaspace's fields, shared by the pre-tokenizer and the decoder. */
bool onyx__tok_metaspace_parse(onyx__tok_ctx *c, json_t *j, uint32_t *out_replacement,
                               int *out_scheme, bool *out_split);
/* Whether the model's tokens are byte-level characters (a ByteLevel pre-tokenizer). */
bool onyx__tok_pretok_byte_level(const onyx__tok_pretok *p);

/* ------------------------------------------------------------------ the BPE model */

/* One symbol of a word being merged (tokenizers' Word). */
typedef struct onyx__tok_symbol {
  uint32_t id;
  int32_t prev, next;
  uint32_t len; /* bytes; 0 once merged into its left neighbour */
} onyx__tok_symbol;

typedef struct onyx__tok_merge {
  uint32_t rank, pos, merged;
} onyx__tok_merge;

typedef struct onyx__tok_bpe {
  onyx__tok_strmap vocab; /* token → id */
  /* id → the vocab key's offset and length in vocab.keys (len UINT32_MAX: no token) */
  struct onyx__tok_idslot {
    uint32_t off, len;
  } * tokens;
  size_t tokens_cap; /* highest id + 1 */
  onyx__tok_pairmap merges;
  char *unk_token;       /* NULL: none */
  int64_t unk_id;        /* -1: unk_token is not in the vocabulary (an error when needed) */
  char *prefix, *suffix; /* continuing_subword_prefix, end_of_word_suffix (NULL: none) */
  size_t prefix_len, suffix_len;
  bool fuse_unk, byte_fallback, ignore_merges;
  int32_t byte_ids[256]; /* ids of "<0xHH>", -1 when absent */
  int32_t *char_ids;     /* ids of one-character tokens below U+10000 (-1: none) */
  /* per pre-token cache: text → ids */
  onyx__tok_strmap cache;
  onyx__tok_ids cache_ids;
  /* scratch for one word */
  onyx__tok_symbol *sym;
  onyx__tok_merge *heap;
  size_t sym_cap, heap_cap;
  onyx__tok_buf key;
} onyx__tok_bpe;

bool onyx__tok_bpe_parse(onyx__tok_ctx *c, json_t *model, onyx__tok_bpe *out);
void onyx__tok_bpe_free(onyx__tok_bpe *b);
/* Appends the ids of one pre-token. */
onyx_status onyx__tok_bpe_encode(onyx__tok_bpe *b, const char *s, size_t n, onyx__tok_ids *out,
                                 onyx_error **out_error);
/* The token of an id (NULL: none). */
const char *onyx__tok_bpe_token(const onyx__tok_bpe *b, int64_t id, size_t *out_len);
int64_t onyx__tok_bpe_id(const onyx__tok_bpe *b, const char *s, size_t n);

/* ------------------------------------------------------------------ added tokens */

typedef struct onyx__tok_added_token {
  uint32_t id;
  char *content;
  size_t len;
  char *norm; /* the normalized content when the normalizer changes it (else NULL) */
  size_t norm_len;
  bool single_word, lstrip, rstrip, normalized, special;
} onyx__tok_added_token;

/* A byte trie over token texts; leftmost-longest matching as daachorse's. */
typedef struct onyx__tok_trie {
  struct onyx__tok_trienode {
    int32_t child, sibling; /* first child, next sibling (-1: none) */
    int32_t value;          /* index of an added token ending here (-1: none) */
    uint8_t byte;
  } * nodes;
  size_t count, cap;
  uint8_t first[32]; /* bitmap of first bytes */
  size_t longest;
} onyx__tok_trie;

typedef struct onyx__tok_added {
  onyx__tok_added_token *tokens; /* one per distinct content, in file order */
  size_t count;
  onyx__tok_strmap by_content; /* content → index in tokens */
  onyx__tok_strmap special;    /* contents of special tokens (value unused) */
  /* id → index in tokens (-1: none), over the ids added tokens have */
  int32_t *by_id;
  size_t by_id_cap;
  onyx__tok_trie raw, normalized; /* patterns matched before / after normalization */
} onyx__tok_added;

/* Reads added_tokens, giving each its id as `tokenizers` does (its id in the model's
 * vocabulary, else the next free one), and the normalized patterns. */
bool onyx__tok_added_parse(onyx__tok_ctx *c, json_t *arr, const onyx__tok_bpe *bpe,
                           const onyx__tok_normalizer *norm, onyx__tok_run *run,
                           onyx__tok_added *out);
void onyx__tok_added_free(onyx__tok_added *a);
/* Splits each piece without an id of `in` on the tokens of `trie` into `out`. */
bool onyx__tok_added_split(const onyx__tok_added *a, const onyx__tok_trie *trie,
                           const onyx__tok_pieces *in, onyx__tok_pieces *out);
/* The added token with this id, or NULL. */
const onyx__tok_added_token *onyx__tok_added_by_id(const onyx__tok_added *a, int64_t id);

/* ------------------------------------------------------------------ decoders */

typedef struct onyx__tok_decoder onyx__tok_decoder;

bool onyx__tok_decoder_parse(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_decoder **out);
void onyx__tok_decoder_free(onyx__tok_decoder *d);
/* Runs the decoder chain over the token strings of *io (`spare`: a second list). */
onyx_status onyx__tok_decoder_apply(const onyx__tok_decoder *d, onyx__tok_run *run,
                                    onyx__tok_pieces *io, onyx__tok_pieces *spare,
                                    onyx_error **out_error);

/* ------------------------------------------------------------------ post-processor */

/* The single-sequence template: ids before and after the sequence ($A). */
typedef struct onyx__tok_template {
  onyx__tok_ids before, after;
} onyx__tok_template;

bool onyx__tok_post_parse(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_template *out);
void onyx__tok_template_free(onyx__tok_template *t);

/* ------------------------------------------------------------------ the tokenizer */

struct onyx_tokenizer {
  onyx__tok_normalizer *normalizer; /* NULL: none */
  onyx__tok_pretok *pretok;         /* NULL: none */
  onyx__tok_bpe bpe;
  onyx__tok_added added;
  onyx__tok_decoder *decoder; /* NULL: tokens joined by spaces */
  onyx__tok_template post;
  int64_t bos_id, eos_id, pad_id, unk_id;
  int32_t add_bos_token, add_eos_token;
  onyx__tok_run run;
  onyx__tok_pieces work[2]; /* encode's and decode's pieces */
};

/* Reads tokenizer_config.json text into t's special ids. */
onyx_status onyx__tok_config_parse(onyx_tokenizer *t, const char *text, size_t size,
                                   const char *origin, onyx_error **out_error);
/* Reads an untrusted file whole: regular files only, opened without blocking, at most
 * `max_bytes`; the buffer ends with a NUL. */
onyx_status onyx__tok_read_file(const char *path, size_t max_bytes, char **out_data,
                                size_t *out_size, onyx_error **out_error);
/* The token strings of ids, as decode feeds them to the decoder. */
onyx_status onyx__tok_id_strings(onyx_tokenizer *t, const int64_t *ids, size_t count,
                                 bool skip_special, onyx__tok_pieces *out, onyx_error **out_error);

#endif /* ONYX_TOKENIZER_IMPL_H */
