/*
 * The tile layout of MatMulNBits weights (cpu_nbits.h draws it), the int8 quantization
 * of A, and the portable tile kernels every build has.
 *
 * Packing happens once, at kernel creation, for weights that are constants of the
 * session (or per run into workspace when they are not). It reorders codes; it never
 * dequantizes them: the packed weights are as many bits a weight as the model's, scales
 * of the model's type, and one byte of zero point a block.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_nbits.h"

/* ------------------------------------------------------------------ layout */

static uint64_t nb_align64(uint64_t v) { return (v + 63) & ~(uint64_t)63; }

/* Byte sizes of the parts: codes, scales, zero points. */
static void nb_parts(const onyx__pc_nb_attrs *a, onyx__pc_nb_zp zp, uint32_t scale_dtype,
                     uint64_t out[3]) {
  uint64_t blocks = (uint64_t)((a->n + ONYX__NB_TILE - 1) / ONYX__NB_TILE) * (uint64_t)a->k_blocks;
  out[0] = nb_align64(blocks * (uint64_t)(ONYX__NB_TILE * a->block_size * a->bits / 8));
  out[1] = nb_align64(blocks * ONYX__NB_TILE * onyx_dtype_size(scale_dtype));
  out[2] = zp == ONYX__PC_NB_ZP_PACKED  ? nb_align64(blocks * ONYX__NB_TILE)
           : zp == ONYX__PC_NB_ZP_FLOAT ? nb_align64(blocks * ONYX__NB_TILE * sizeof(float))
                                        : 0;
}

uint64_t onyx__nb_packed_bytes(const onyx__pc_nb_attrs *a, onyx__pc_nb_zp zp,
                               uint32_t scale_dtype) {
  uint64_t p[3];
  nb_parts(a, zp, scale_dtype, p);
  return p[0] + p[1] + p[2];
}

/* Code j of block blk of column n in the op's B (bits-wide fields, low bits first). */
static inline unsigned nb_code(const onyx__pc_nb_attrs *a, const uint8_t *b, int64_t n, int64_t blk,
                               int64_t j) {
  const uint8_t *block = b + (n * a->k_blocks + blk) * a->blob;
  int64_t bit = j * a->bits;
  return (unsigned)(block[bit / 8] >> (bit % 8)) & ((1u << a->bits) - 1);
}

typedef struct nb_pack_job {
  const onyx__pc_nb_attrs *a;
  const uint8_t *b;
  const onyx_tensor *scales, *zp;
  const onyx__nb_packed *w;
  /* The parts of the destination that w describes read-only. */
  uint8_t *codes, *zp_codes;
  uint8_t *scales_out;
  float *zp_float;
} nb_pack_job;

/* One block of one tile: codes, scale and zero point of its 16 columns. */
static void nb_pack_block(const nb_pack_job *j, int64_t t, int64_t blk) {
  const onyx__pc_nb_attrs *a = j->a;
  const onyx__nb_packed *w = j->w;
  const int bits = w->bits, per_lane = 32 / bits;
  const int64_t idx = t * w->kb + blk;
  uint8_t *dst = j->codes + idx * onyx__nb_block_bytes(w);
  memset(dst, 0, (size_t)onyx__nb_block_bytes(w));
  for (int c = 0; c < ONYX__NB_TILE; ++c) {
    const int64_t n = t * ONYX__NB_TILE + c;
    const size_t es = onyx_dtype_size(w->scale_dtype);
    uint8_t *sc = j->scales_out + (size_t)(idx * ONYX__NB_TILE + c) * es;
    if (n >= a->n) {
      memset(sc, 0, es); /* a padding column: zero codes, zero scale, zero point 0 */
      if (j->zp_codes) j->zp_codes[idx * ONYX__NB_TILE + c] = 0;
      if (j->zp_float) j->zp_float[idx * ONYX__NB_TILE + c] = 0.0f;
      continue;
    }
    const int64_t valid = a->k - blk * a->block_size; /* codes of this block inside K */
    const uint8_t *src = j->b + (n * a->k_blocks + blk) * a->blob;
    if (valid >= a->block_size && bits == 8) { /* a lane is 4 codes in order */
      for (int64_t g = 0; g < a->block_size / 4; ++g)
        memcpy(dst + (g * ONYX__NB_TILE + c) * 4, src + 4 * g, 4);
    } else if (valid >= a->block_size && bits == 4) {
      /* Source bytes (c0|c1<<4) (c2|c3<<4) (c4|c5<<4) (c6|c7<<4) of a group of 8 give the
       * lane bytes c0|c4<<4, c1|c5<<4, c2|c6<<4, c3|c7<<4. */
      for (int64_t g = 0; g < a->block_size / 8; ++g) {
        const uint8_t *s = src + 4 * g;
        uint8_t *o = dst + (g * ONYX__NB_TILE + c) * 4;
        o[0] = (uint8_t)((s[0] & 0x0F) | (s[2] << 4));
        o[1] = (uint8_t)((s[0] >> 4) | (s[2] & 0xF0));
        o[2] = (uint8_t)((s[1] & 0x0F) | (s[3] << 4));
        o[3] = (uint8_t)((s[1] >> 4) | (s[3] & 0xF0));
      }
    } else {
      for (int64_t g = 0; g < a->block_size / per_lane; ++g)
        for (int i = 0; i < 8 / bits; ++i)
          for (int byte = 0; byte < 4; ++byte) {
            int64_t kk = g * per_lane + 4 * i + byte;
            if (kk >= valid) continue;
            dst[(g * ONYX__NB_TILE + c) * 4 + byte] |=
                (uint8_t)(nb_code(a, j->b, n, blk, kk) << (i * bits));
          }
    }
    memcpy(sc, (const uint8_t *)j->scales->data + (size_t)(n * a->k_blocks + blk) * es, es);
    if (w->zp == ONYX__PC_NB_ZP_PACKED) {
      const uint8_t *z = (const uint8_t *)j->zp->data + n * a->zp_bytes;
      int64_t bit = blk * bits;
      j->zp_codes[idx * ONYX__NB_TILE + c] =
          (uint8_t)((z[bit / 8] >> (bit % 8)) & ((1u << bits) - 1));
    } else if (w->zp == ONYX__PC_NB_ZP_FLOAT) {
      j->zp_float[idx * ONYX__NB_TILE + c] =
          onyx__cpu_load_f32(j->zp->dtype, j->zp->data, n * a->k_blocks + blk);
    }
  }
}

static void nb_pack_tiles(void *arg, int64_t t0, int64_t t1) {
  const nb_pack_job *j = arg;
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t blk = 0; blk < j->w->kb; ++blk) nb_pack_block(j, t, blk);
}

void onyx__nb_pack(const onyx__cpu_provider *p, const onyx__pc_nb_attrs *a, const onyx_tensor *b,
                   const onyx_tensor *scales, const onyx_tensor *zp, void *dst,
                   onyx__nb_packed *out) {
  onyx__pc_nb_zp kind = zp == NULL                      ? ONYX__PC_NB_ZP_DEFAULT
                        : zp->dtype == ONYX_DTYPE_UINT8 ? ONYX__PC_NB_ZP_PACKED
                                                        : ONYX__PC_NB_ZP_FLOAT;
  uint64_t parts[3];
  nb_parts(a, kind, scales->dtype, parts);
  uint8_t *base = dst;
  *out = (onyx__nb_packed){.k = a->k,
                           .n = a->n,
                           .bs = a->block_size,
                           .kb = a->k_blocks,
                           .tiles = (a->n + ONYX__NB_TILE - 1) / ONYX__NB_TILE,
                           .bits = (int)a->bits,
                           .zp = kind,
                           .codes = base,
                           .scale_dtype = scales->dtype,
                           .scales = base + parts[0]};
  nb_pack_job j = {.a = a,
                   .b = b->data,
                   .scales = scales,
                   .zp = zp,
                   .w = out,
                   .codes = base,
                   .scales_out = base + parts[0]};
  if (kind == ONYX__PC_NB_ZP_PACKED) j.zp_codes = base + parts[0] + parts[1];
  if (kind == ONYX__PC_NB_ZP_FLOAT) j.zp_float = (float *)(base + parts[0] + parts[1]);
  out->zp_codes = j.zp_codes;
  out->zp_float = j.zp_float;
  /* About 8 KiB of codes a tile for K = 1024 at 4 bits: a few tiles per task. */
  onyx__cpu_parallel_range(p, out->tiles, 8, nb_pack_tiles, &j);
}

/* ------------------------------------------------------------------ quantized A */

uint64_t onyx__nb_qa_bytes(const onyx__pc_nb_attrs *a, int64_t rows) {
  uint64_t kpad = (uint64_t)(a->k_blocks * a->block_size);
  return nb_align64((uint64_t)rows * kpad) + 2 * nb_align64((uint64_t)rows * a->k_blocks * 4);
}

void onyx__nb_qa_init(const onyx__pc_nb_attrs *a, int64_t rows, void *mem, onyx__nb_qa *out) {
  uint8_t *base = mem;
  uint64_t q = nb_align64((uint64_t)(rows * a->k_blocks * a->block_size));
  uint64_t s = nb_align64((uint64_t)rows * a->k_blocks * 4);
  out->kpad = a->k_blocks * a->block_size;
  out->q = (int8_t *)base;
  out->scale = (float *)(base + q);
  out->sum = (int32_t *)(base + q + s);
}

/* The portable quantizer. x·inv with inv = 127/amax (not x/scale): ONNX Runtime's
 * rounding of the product, so that the same activations give the same codes. */
static void nb_quantize_generic(uint32_t dtype, const void *x, int64_t k, int64_t bs,
                                const onyx__nb_qa *qa, int64_t row) {
  const int64_t kb = qa->kpad / bs;
  int8_t *q = qa->q + row * qa->kpad;
  for (int64_t blk = 0; blk < kb; ++blk) {
    const int64_t k0 = blk * bs, n = k - k0 < bs ? k - k0 : bs;
    float amax = 0.0f;
    for (int64_t j = 0; j < n; ++j) amax = fmaxf(amax, fabsf(onyx__cpu_load_f32(dtype, x, k0 + j)));
    const float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t sum = 0;
    for (int64_t j = 0; j < bs; ++j) {
      int v = j < n ? (int)nearbyintf(onyx__cpu_load_f32(dtype, x, k0 + j) * inv) : 0;
      q[k0 + j] = (int8_t)v;
      sum += v;
    }
    qa->scale[row * kb + blk] = amax / 127.0f;
    qa->sum[row * kb + blk] = sum;
  }
}

/* ------------------------------------------------------------------ portable kernels */

/* Zero point of column c of block idx, as the int8 route subtracts it. */
static inline int32_t nb_zp_int(const onyx__nb_packed *w, int64_t idx, int c) {
  return w->zp == ONYX__PC_NB_ZP_PACKED ? w->zp_codes[idx * ONYX__NB_TILE + c]
                                        : (int32_t)1 << (w->bits - 1);
}

static void nb_i8_generic(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0, int mr,
                          int64_t t, float *out) {
  const int bits = w->bits, per_lane = 32 / bits;
  const unsigned mask = (1u << bits) - 1;
  memset(out, 0, (size_t)mr * ONYX__NB_TILE * sizeof(float));
  for (int64_t blk = 0; blk < w->kb; ++blk) {
    const int64_t idx = t * w->kb + blk;
    const uint8_t *codes = w->codes + idx * onyx__nb_block_bytes(w);
    const int64_t sc = idx * ONYX__NB_TILE;
    for (int r = 0; r < mr; ++r) {
      const int8_t *x = qa->q + (r0 + r) * qa->kpad + blk * w->bs;
      int32_t dot[ONYX__NB_TILE] = {0};
      for (int64_t g = 0; g < w->bs / per_lane; ++g)
        for (int c = 0; c < ONYX__NB_TILE; ++c)
          for (int byte = 0; byte < 4; ++byte) {
            unsigned v = codes[(g * ONYX__NB_TILE + c) * 4 + byte];
            for (int i = 0; i < 8 / bits; ++i)
              dot[c] += (int32_t)((v >> (i * bits)) & mask) * x[g * per_lane + 4 * i + byte];
          }
      const int64_t ai = (r0 + r) * w->kb + blk;
      for (int c = 0; c < ONYX__NB_TILE; ++c) {
        int32_t d = dot[c] - nb_zp_int(w, idx, c) * qa->sum[ai];
        out[r * ONYX__NB_TILE + c] += (float)d * (onyx__nb_scale(w, sc + c) * qa->scale[ai]);
      }
    }
  }
}

static void nb_f32_generic(const onyx__nb_packed *w, const float *a, int64_t lda, int64_t r0,
                           int mr, int64_t t, float *out) {
  const int bits = w->bits, per_lane = 32 / bits;
  const unsigned mask = (1u << bits) - 1;
  memset(out, 0, (size_t)mr * ONYX__NB_TILE * sizeof(float));
  for (int64_t blk = 0; blk < w->kb; ++blk) {
    const int64_t idx = t * w->kb + blk;
    const uint8_t *codes = w->codes + idx * onyx__nb_block_bytes(w);
    const int64_t sc = idx * ONYX__NB_TILE;
    float zp[ONYX__NB_TILE];
    for (int c = 0; c < ONYX__NB_TILE; ++c)
      zp[c] = w->zp == ONYX__PC_NB_ZP_FLOAT ? w->zp_float[idx * ONYX__NB_TILE + c]
                                            : (float)nb_zp_int(w, idx, c);
    for (int r = 0; r < mr; ++r) {
      const float *x = a + (r0 + r) * lda + blk * w->bs;
      float acc[ONYX__NB_TILE] = {0};
      for (int64_t g = 0; g < w->bs / per_lane; ++g)
        for (int c = 0; c < ONYX__NB_TILE; ++c)
          for (int byte = 0; byte < 4; ++byte) {
            unsigned v = codes[(g * ONYX__NB_TILE + c) * 4 + byte];
            for (int i = 0; i < 8 / bits; ++i)
              acc[c] +=
                  ((float)((v >> (i * bits)) & mask) - zp[c]) * x[g * per_lane + 4 * i + byte];
          }
      for (int c = 0; c < ONYX__NB_TILE; ++c)
        out[r * ONYX__NB_TILE + c] += acc[c] * onyx__nb_scale(w, sc + c);
    }
  }
}

static void nb_dequant_generic(const onyx__nb_packed *w, int64_t t, int64_t k0, int64_t kc,
                               float *out) {
  const int bits = w->bits, per_lane = 32 / bits;
  const unsigned mask = (1u << bits) - 1;
  for (int64_t p = 0; p < kc; ++p) {
    const int64_t k = k0 + p, blk = k / w->bs, j = k % w->bs, idx = t * w->kb + blk;
    const int64_t g = j / per_lane, i = (j % per_lane) / 4, byte = j % 4;
    const uint8_t *lanes = w->codes + idx * onyx__nb_block_bytes(w) + g * ONYX__NB_GROUP + byte;
    for (int c = 0; c < ONYX__NB_TILE; ++c) {
      float zp = w->zp == ONYX__PC_NB_ZP_FLOAT ? w->zp_float[idx * ONYX__NB_TILE + c]
                                               : (float)nb_zp_int(w, idx, c);
      float code = (float)((lanes[4 * c] >> (i * bits)) & mask);
      out[p * ONYX__NB_TILE + c] = (code - zp) * onyx__nb_scale(w, idx * ONYX__NB_TILE + c);
    }
  }
}

const onyx__nb_isa onyx__nb_isa_generic = {
    "generic", 4, nb_quantize_generic, nb_i8_generic, nb_f32_generic, nb_dequant_generic};

const onyx__nb_isa *onyx__nb_isa_get(void) {
  const char *cap = getenv("ONYX_CPU_NBITS_ISA");
  if (cap != NULL && strcmp(cap, "generic") == 0) return &onyx__nb_isa_generic;
  const onyx__nb_isa *x86 = onyx__nb_isa_x86(cap);
  return x86 != NULL ? x86 : &onyx__nb_isa_generic;
}

bool onyx__nb_uses_int8(const onyx__pc_nb_attrs *a, bool constant_weights, onyx__pc_nb_zp zp) {
  if (a->accuracy_level != 4 || !constant_weights || zp == ONYX__PC_NB_ZP_FLOAT) return false;
  if (a->bits == 2) return a->block_size >= 32 && a->block_size <= 128;
  return true;
}
