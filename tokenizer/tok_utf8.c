/* UTF-8, the character classes the format's Rust code tests with, and GPT-2's
 * byte-level alphabet. Categories come from utf8proc. */
#include <pthread.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_impl.h"

/* Length of the well-formed sequence at s (Unicode table 3-7), 0 when there is none;
 * *prefix receives how many bytes of a well-formed sequence s begins with. */
static size_t sequence_at(const unsigned char *s, size_t n, size_t *prefix) {
  unsigned char c = s[0];
  *prefix = 0;
  if (c < 0x80) return *prefix = 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  size_t i = 1;
  for (; i < need && i < n; ++i) {
    unsigned char b = s[i];
    if (b < lo || b > hi) break;
    lo = 0x80, hi = 0xBF;
  }
  *prefix = i;
  return i == need ? need : 0;
}

size_t onyx__tok_utf8_check(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    /* Runs of ASCII eight at a time: most text is. */
    while (i + 8 <= n) {
      uint64_t w;
      memcpy(&w, u + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    size_t prefix, len = sequence_at(u + i, n - i, &prefix);
    if (len == 0) return i;
    i += len;
  }
  return n;
}

uint32_t onyx__tok_utf8_decode(const char *s, size_t *out_len) {
  const unsigned char *u = (const unsigned char *)s;
  size_t len = onyx__tok_utf8_len(u[0]);
  uint32_t cp;
  switch (len) {
  case 1:
    cp = u[0];
    break;
  case 2:
    cp = (uint32_t)(u[0] & 0x1F) << 6 | (u[1] & 0x3F);
    break;
  case 3:
    cp = (uint32_t)(u[0] & 0x0F) << 12 | (uint32_t)(u[1] & 0x3F) << 6 | (u[2] & 0x3F);
    break;
  default:
    cp = (uint32_t)(u[0] & 0x07) << 18 | (uint32_t)(u[1] & 0x3F) << 12 |
         (uint32_t)(u[2] & 0x3F) << 6 | (u[3] & 0x3F);
    break;
  }
  *out_len = len;
  return cp;
}

size_t onyx__tok_utf8_encode(uint32_t cp, char *out) {
  unsigned char *o = (unsigned char *)out;
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xC0 | cp >> 6);
    o[1] = (unsigned char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xE0 | cp >> 12);
    o[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
    o[2] = (unsigned char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (unsigned char)(0xF0 | cp >> 18);
  o[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
  o[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
  o[3] = (unsigned char)(0x80 | (cp & 0x3F));
  return 4;
}

bool onyx__tok_utf8_lossy(const char *s, size_t n, onyx__tok_buf *out) {
  static const char replacement[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
  const unsigned char *u = (const unsigned char *)s;
  if (!onyx__tok_buf_reserve(out, n)) return false;
  if (n == 0) return true; /* s may be NULL then */
  size_t i = 0, run = 0;   /* run: start of the valid bytes not yet copied */
  while (i < n) {
    size_t prefix, len = sequence_at(u + i, n - i, &prefix);
    if (len) {
      i += len;
      continue;
    }
    if (!onyx__tok_buf_add(out, s + run, i - run) ||
        !onyx__tok_buf_add(out, replacement, sizeof replacement))
      return false;
    i += prefix ? prefix : 1; /* one U+FFFD per maximal ill-formed subsequence */
    run = i;
  }
  return onyx__tok_buf_add(out, s + run, n - run);
}

bool onyx__tok_is_whitespace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool onyx__tok_is_numeric(uint32_t cp) {
  utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

bool onyx__tok_is_word(uint32_t cp) {
  switch (utf8proc_category((utf8proc_int32_t)cp)) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_MN:
  case UTF8PROC_CATEGORY_MC:
  case UTF8PROC_CATEGORY_ME:
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_PC:
    return true;
  default:
    /* Join_Control, and the symbols that are Other_Alphabetic (circled and squared
     * letters). */
    return cp == 0x200C || cp == 0x200D || (cp >= 0x24B6 && cp <= 0x24E9) ||
           (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) ||
           (cp >= 0x1F170 && cp <= 0x1F189);
  }
}

static onyx__tok_bytemap bytemap;
static pthread_once_t bytemap_once = PTHREAD_ONCE_INIT;

static void bytemap_build(void) {
  onyx__tok_bytemap *m = &bytemap;
  for (size_t i = 0; i < 0x144; ++i) m->byte_of[i] = -1;
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    uint32_t cp = printable ? b : next++;
    m->utf8_len[b] = (uint8_t)onyx__tok_utf8_encode(cp, m->utf8[b]);
    m->byte_of[cp] = (int16_t)b;
  }
}

const onyx__tok_bytemap *onyx__tok_bytemap_get(void) {
  pthread_once(&bytemap_once, bytemap_build);
  return &bytemap;
}
