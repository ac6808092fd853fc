/*
 * onyx-check-provider PATH.so [--reference CPU.so] [--threads N] — checks a provider
 * library the way the core will use it, and more strictly: what it exports, how it
 * negotiates, its tables, NULL-safety, and per kernel the workspace contract, thread
 * determinism, heap use during compute and agreement with the CPU reference on fresh
 * random inputs. Prints one line per finding and a summary; exits 1 on any failure.
 *
 * This half knows no ABI struct (onyx_check_provider.h): reports, the ELF symbol
 * table, child-process isolation, random data, comparisons and allocation counting.
 * The ABI half (onyx_check_provider_abi.c) does the rest.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "onyx_check_provider.h"

/* ------------------------------------------------------------ reports */

/* Counts live in shared memory so that findings of isolated children count too. */
typedef struct chk_counts {
  atomic_int ok, failed, skipped;
} chk_counts;
static chk_counts *counts;

static void report(const char *tag, atomic_int *counter, const char *check, const char *fmt,
                   va_list ap) {
  char text[1024];
  vsnprintf(text, sizeof text, fmt, ap);
  printf("  %-4s  %-14s %s\n", tag, check, text);
  fflush(stdout);
  atomic_fetch_add(counter, 1);
}

void chk_ok(const char *check, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report("ok", &counts->ok, check, fmt, ap);
  va_end(ap);
}

void chk_fail(const char *check, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report("FAIL", &counts->failed, check, fmt, ap);
  va_end(ap);
}

void chk_skip(const char *check, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  report("skip", &counts->skipped, check, fmt, ap);
  va_end(ap);
}

void chk_section(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
}

bool chk_isolated(const char *what, void (*fn)(void *arg), void *arg) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    chk_fail(what, "cannot fork: %s", strerror(errno));
    return false;
  }
  if (pid == 0) {
    fn(arg);
    fflush(stdout);
    _exit(0); /* no atexit handlers: the parent owns the process's end */
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  if (WIFSIGNALED(status))
    chk_fail(what, "crashed: %s", strsignal(WTERMSIG(status)));
  else
    chk_fail(what, "crashed: exited with status %d (a sanitizer's report is above)",
             WEXITSTATUS(status));
  return false;
}

/* ------------------------------------------------------------ exports */

/* The defined global symbols of an ELF64 shared object's dynamic symbol table, as a
 * comma-separated list; -1 when the file is not one. */
static int elf_exports(const char *path, char *names, size_t cap, char *why, size_t why_cap) {
  names[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(why, why_cap, "cannot open: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  size_t size = (size_t)st.st_size;
  const unsigned char *base =
      size >= sizeof(Elf64_Ehdr) ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
  close(fd);
  if (base == MAP_FAILED) {
    snprintf(why, why_cap, "not an ELF file (%zu bytes)", size);
    return -1;
  }
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
  int count = -1;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shoff == 0 || eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > size) {
    snprintf(why, why_cap, "not a 64-bit ELF shared object");
    goto done;
  }
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
  for (unsigned i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr *strs = &sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > size || strs->sh_offset + strs->sh_size > size) break;
    const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof *sym;
    count = 0;
    for (size_t k = 1; k < n; ++k) {
      unsigned bind = ELF64_ST_BIND(sym[k].st_info), type = ELF64_ST_TYPE(sym[k].st_info);
      if (sym[k].st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK) ||
          type == STT_SECTION || type == STT_FILE || sym[k].st_name >= strs->sh_size)
        continue;
      const char *name = (const char *)base + strs->sh_offset + sym[k].st_name;
      size_t used = strlen(names);
      snprintf(names + used, cap - used, "%s%s", count ? ", " : "", name);
      count++;
    }
    break;
  }
  if (count < 0) snprintf(why, why_cap, "no dynamic symbol table");
done:
  munmap((void *)(uintptr_t)base, size);
  return count;
}

/* The entry points a provider may export: the v1/v2 entry, the v3 factory (and both,
 * for a provider that also loads in an older core). Anything else is a leak. */
static bool is_entry_point(const char *name, size_t len) {
  static const char *const allowed[] = {ONYX_PROVIDER_ENTRY_SYMBOL,
#ifdef ONYX_PROVIDER_FACTORY_SYMBOL
                                        ONYX_PROVIDER_FACTORY_SYMBOL
#endif
  };
  for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; ++i)
    if (strlen(allowed[i]) == len && !strncmp(name, allowed[i], len)) return true;
  return false;
}

static void check_exports(const char *path) {
  char names[4096], why[256];
  int n = elf_exports(path, names, sizeof names, why, sizeof why);
  if (n < 0) {
    chk_fail("exports", "%s", why);
    return;
  }
  int stray = 0;
  for (const char *p = names; *p;) {
    size_t len = strcspn(p, ",");
    stray += !is_entry_point(p, len);
    p += len;
    while (*p == ',' || *p == ' ') ++p;
  }
  if (n > 0 && stray == 0)
    chk_ok("exports", "%s (entry points only)", names);
  else
    chk_fail("exports",
             "%d symbols, %d of them not an entry point: %s (build with "
             "-fvisibility=hidden and export the entry alone)",
             n, stray, n ? names : "none");
}

/* ------------------------------------------------------------ data */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* IEEE half and bfloat16 from a float (round toward zero: test data only). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

static uint16_t to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xFFu, man = u & 0x7FFFFFu;
  if (exp < 113) return (uint16_t)sign; /* below the half range: signed zero */
  return (uint16_t)(sign | ((exp - 112) << 10) | (man >> 13));
}

static float half_to_float(uint16_t h, bool bf16) {
  uint32_t u;
  if (bf16) {
    u = (uint32_t)h << 16;
  } else {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
    u = exp == 0 ? sign : sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

void chk_fill_random(uint32_t dtype, void *data, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint64_t r = next_random();
    /* [-1, 1) without the values closest to 0, so that no element is zero. */
    float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    if (fabsf(f) < 1e-3f) f = 0.5f;
    int64_t v = 1 + (int64_t)(r % 3);
    switch (dtype) {
    case ONYX_DTYPE_FLOAT32:
      ((float *)data)[i] = f;
      break;
    case ONYX_DTYPE_FLOAT64:
      ((double *)data)[i] = f;
      break;
    case ONYX_DTYPE_FLOAT16:
      ((uint16_t *)data)[i] = to_half(f);
      break;
    case ONYX_DTYPE_BFLOAT16:
      ((uint16_t *)data)[i] = to_bf16(f);
      break;
    case ONYX_DTYPE_INT64:
      ((int64_t *)data)[i] = v;
      break;
    case ONYX_DTYPE_INT32:
      ((int32_t *)data)[i] = (int32_t)v;
      break;
    case ONYX_DTYPE_INT16:
      ((int16_t *)data)[i] = (int16_t)v;
      break;
    case ONYX_DTYPE_BOOL:
      ((uint8_t *)data)[i] = (uint8_t)(r >> 63);
      break;
    default:
      ((uint8_t *)data)[i] = (uint8_t)v;
      break;
    }
  }
}

static double element(uint32_t dtype, const void *p, size_t i) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    return ((const float *)p)[i];
  case ONYX_DTYPE_FLOAT64:
    return ((const double *)p)[i];
  case ONYX_DTYPE_FLOAT16:
    return half_to_float(((const uint16_t *)p)[i], false);
  case ONYX_DTYPE_BFLOAT16:
    return half_to_float(((const uint16_t *)p)[i], true);
  case ONYX_DTYPE_INT64:
    return (double)((const int64_t *)p)[i];
  case ONYX_DTYPE_INT32:
    return ((const int32_t *)p)[i];
  case ONYX_DTYPE_INT16:
    return ((const int16_t *)p)[i];
  case ONYX_DTYPE_INT8:
    return ((const int8_t *)p)[i];
  case ONYX_DTYPE_UINT16:
    return ((const uint16_t *)p)[i];
  case ONYX_DTYPE_UINT32:
    return ((const uint32_t *)p)[i];
  case ONYX_DTYPE_UINT64:
    return (double)((const uint64_t *)p)[i];
  default:
    return ((const uint8_t *)p)[i];
  }
}

bool chk_close(uint32_t dtype, const void *got, const void *want, size_t n, char *why, size_t cap) {
  bool is_float = dtype == ONYX_DTYPE_FLOAT32 || dtype == ONYX_DTYPE_FLOAT64 ||
                  dtype == ONYX_DTYPE_FLOAT16 || dtype == ONYX_DTYPE_BFLOAT16;
  bool half = dtype == ONYX_DTYPE_FLOAT16 || dtype == ONYX_DTYPE_BFLOAT16;
  double rtol = !is_float ? 0 : half ? 1e-2 : 1e-4, atol = !is_float ? 0 : half ? 1e-2 : 1e-5;
  for (size_t i = 0; i < n; ++i) {
    double g = element(dtype, got, i), w = element(dtype, want, i);
    bool same_nan = isnan(g) && isnan(w);
    if (!same_nan && !(fabs(g - w) <= atol + rtol * fabs(w))) {
      snprintf(why, cap, "element %zu: got %.9g, the reference %.9g (rtol %g, atol %g)", i, g, w,
               rtol, atol);
      return false;
    }
  }
  return true;
}

/* ------------------------------------------------------------ allocations */

/* glibc's own entry points: the tool's malloc family forwards to them and counts the
 * calls of the thread that asked. Under a sanitizer, which replaces malloc itself,
 * nothing is counted and the check says so. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CHK_COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CHK_COUNT_ALLOCS 0
#endif
#endif
#ifndef CHK_COUNT_ALLOCS
#ifdef __GLIBC__
#define CHK_COUNT_ALLOCS 1
#else
#define CHK_COUNT_ALLOCS 0
#endif
#endif

static _Thread_local bool counting;
static _Thread_local uint64_t counted;

bool chk_alloc_counting(void) { return CHK_COUNT_ALLOCS; }

bool chk_alloc_count_suspend(void) {
  bool was = counting;
  counting = false;
  return was;
}

void chk_alloc_count_restore(bool was) { counting = was; }

void *chk_alloc_untracked(size_t alignment, size_t size) {
  bool was = counting;
  counting = false;
  void *p = NULL;
  if (posix_memalign(&p, alignment, size) != 0) p = NULL;
  counting = was;
  return p;
}
void chk_alloc_count_begin(void) {
  counted = 0;
  counting = true;
}
uint64_t chk_alloc_count_end(void) {
  counting = false;
  return counted;
}

#if CHK_COUNT_ALLOCS
/* Default visibility (the build hides everything else) and listed in
 * onyx_check_provider.dynlist, so that the dynamic linker binds the providers' calls
 * here. */
#pragma GCC visibility push(default)
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void __libc_free(void *ptr);
void *malloc(size_t size);
void *calloc(size_t count, size_t size);
void *realloc(void *ptr, size_t size);
void free(void *ptr);
void *aligned_alloc(size_t alignment, size_t size);
int posix_memalign(void **out, size_t alignment, size_t size);

#define COUNT()                                                                                    \
  do {                                                                                             \
    if (counting) counted++;                                                                       \
  } while (0)
void *malloc(size_t size) {
  COUNT();
  return __libc_malloc(size);
}
void *calloc(size_t count, size_t size) {
  COUNT();
  return __libc_calloc(count, size);
}
void *realloc(void *ptr, size_t size) {
  COUNT();
  return __libc_realloc(ptr, size);
}
void free(void *ptr) { __libc_free(ptr); }
void *aligned_alloc(size_t alignment, size_t size) {
  COUNT();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void **out, size_t alignment, size_t size) {
  COUNT();
  void *p = __libc_memalign(alignment, size);
  if (p == NULL) return ENOMEM;
  *out = p;
  return 0;
}
#pragma GCC visibility pop
#endif

/* ------------------------------------------------------------ ONNX node tests */

/* The folder of this binary, where onyx-run lies too (bin/ or the build's tools/). */
static bool exe_dir(char *buf, size_t cap) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash == NULL) return false;
  *slash = '\0';
  snprintf(buf, cap, "%s", exe);
  return true;
}

/* The ONNX node tests under `dir` whose ops the provider claims, through the core:
 * onyx-run --conformance with a plugins.ini that loads the provider alone (as its own
 * fallback), so that only tests it claims run, and every output is compared. */
static void check_node_tests(const char *path, const char *dir) {
  char tools[PATH_MAX], ini[64] = "/tmp/onyx-check-XXXXXX";
  int fd = exe_dir(tools, sizeof tools) ? mkstemp(ini) : -1;
  if (fd < 0) {
    chk_fail("node tests", "cannot write a plugins.ini: %s", strerror(errno));
    return;
  }
  FILE *f = fdopen(fd, "w");
  if (f) {
    fprintf(f, "[onyx]\nfallback = subject\n\n[provider.subject]\npath = %s\n", path);
    fclose(f);
  }
  char cmd[3 * PATH_MAX];
  snprintf(cmd, sizeof cmd, "'%s/onyx-run' --config '%s' --conformance '%s' 2>&1", tools, ini, dir);
  FILE *run = popen(cmd, "r");
  long passed = -1, failed = -1;
  char line[4096], first_failure[512] = "";
  while (run && fgets(line, sizeof line, run)) {
    long p = 0, q = 0;
    if (sscanf(line, "%ld passed, %ld failed", &p, &q) == 2) {
      passed = p;
      failed = q;
    } else if (!first_failure[0] && strstr(line, ": FAIL")) {
      line[strcspn(line, "\n")] = '\0';
      snprintf(first_failure, sizeof first_failure, "%s", line);
    }
  }
  int status = run ? pclose(run) : -1;
  unlink(ini);
  if (passed < 0)
    chk_fail("node tests", "onyx-run gave no summary (status %d): is %s/onyx-run there?", status,
             tools);
  else if (failed > 0)
    chk_fail("node tests", "%ld of %ld claimed tests failed; first: %s", failed, passed + failed,
             first_failure);
  else if (passed == 0)
    chk_skip("node tests", "the provider claims no test under %s", dir);
  else
    chk_ok("node tests", "%ld claimed tests of %s pass (outputs compared)", passed, dir);
}

/* ------------------------------------------------------------ main */

static void usage(void) {
  fprintf(stderr, "usage: onyx-check-provider PATH.so [--reference CPU.so | --no-reference] "
                  "[--threads N] [--node-tests DIR]\n");
}

/* The CPU provider beside this tool: an install prefix's lib/onyx/, or the build
 * tree's providers/cpu/. */
static const char *default_reference(char *buf, size_t cap) {
  char dir[PATH_MAX];
  if (!exe_dir(dir, sizeof dir)) return NULL;
  static const char *const places[] = {"../lib/onyx/libonyx_cpu.so", "../lib64/onyx/libonyx_cpu.so",
                                       "../providers/cpu/libonyx_cpu.so"};
  for (size_t i = 0; i < sizeof places / sizeof places[0]; ++i) {
    snprintf(buf, cap, "%s/%s", dir, places[i]);
    if (access(buf, R_OK) == 0) return buf;
  }
  return NULL;
}

int main(int argc, char **argv) {
  chk_options opt = {.threads = 4};
  bool no_reference = false;
  const char *node_tests = NULL;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (!strcmp(a, "--reference") && i + 1 < argc) {
      opt.reference = argv[++i];
    } else if (!strcmp(a, "--node-tests") && i + 1 < argc) {
      node_tests = argv[++i];
    } else if (!strcmp(a, "--no-reference")) {
      no_reference = true;
    } else if (!strcmp(a, "--threads") && i + 1 < argc) {
      char *end = NULL;
      long t = strtol(argv[++i], &end, 10);
      if (*end != '\0' || t < 2 || t > 64) {
        fprintf(stderr, "onyx-check-provider: --threads wants 2..64, got '%s'\n", argv[i]);
        return 2;
      }
      opt.threads = (int)t;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    } else if (a[0] == '-' || opt.path) {
      fprintf(stderr, "onyx-check-provider: unexpected argument '%s'\n", a);
      usage();
      return 2;
    } else {
      opt.path = a;
    }
  }
  if (opt.path == NULL) {
    usage();
    return 2;
  }
  char ref[PATH_MAX + 64];
  if (no_reference)
    opt.reference = NULL;
  else if (opt.reference == NULL)
    opt.reference = default_reference(ref, sizeof ref);
  counts = mmap(NULL, sizeof *counts, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (counts == MAP_FAILED) return 2;
  printf("onyx-check-provider %s (reference: %s)\n", opt.path,
         opt.reference ? opt.reference : "none");
  check_exports(opt.path);
  chk_provider(&opt);
  if (node_tests) {
    chk_section("ONNX node tests");
    check_node_tests(opt.path, node_tests);
  }
  int ok = atomic_load(&counts->ok), failed = atomic_load(&counts->failed),
      skipped = atomic_load(&counts->skipped);
  printf("summary: %d passed, %d failed, %d skipped — %s\n", ok, failed, skipped,
         failed ? "FAIL" : "PASS");
  munmap(counts, sizeof *counts);
  return failed ? 1 : 0;
}
