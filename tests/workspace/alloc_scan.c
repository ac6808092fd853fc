/*
 * No hidden pools: kernels get scratch memory through the workspace contract (or,
 * for memory they keep, through the host table's mem_alloc), never from an allocator
 * of their own that the governor cannot see. This program scans provider sources
 * for allocator calls and fails on any that an allow list does not name.
 *
 *   onyx-alloc-scan ROOT ALLOW_LIST [DIR...]     (DIR defaults to "providers")
 *
 * Files: *.c *.h *.cu *.cuh *.cc *.cpp *.hpp under ROOT/DIR, recursively. A small
 * lexer skips comments, string and character literals. A hit is an allocator name
 * followed by '(' (a call, or a macro that hides one), or, in C++ and CUDA files,
 * the `new` operator. Each hit is attributed to the function whose body holds it.
 *
 * Allow-list lines: `PATH FUNCTION ALLOCATOR REASON...`, PATH relative to ROOT,
 * FUNCTION and ALLOCATOR exact or `*`; `#` starts a comment. Entries that allow
 * nothing are reported as stale (a note, not a failure: the code they named moved).
 * Exit status: 0 when every hit is allowed, 1 otherwise, 2 on a usage or I/O error.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const allocators[] = {"malloc",          "calloc",
                                         "realloc",         "reallocarray",
                                         "aligned_alloc",   "posix_memalign",
                                         "memalign",        "valloc",
                                         "pvalloc",         "strdup",
                                         "strndup",         "cudaMalloc",
                                         "cudaMallocAsync", "cudaMallocManaged",
                                         "cudaMallocHost",  "cudaHostAlloc",
                                         "cudaMallocPitch", "cudaMalloc3D",
                                         "cuMemAlloc",      "cuMemAllocAsync",
                                         "cuMemAllocHost",  "cuMemAllocManaged",
                                         "cuMemAllocPitch"};

typedef struct allow {
  char path[512], function[128], allocator[64], reason[512];
  int used;
} allow;

static allow *allows;
static size_t allow_count;
static int hits, allowed_hits;

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

static bool is_cxx(const char *path) {
  return ends_with(path, ".cu") || ends_with(path, ".cuh") || ends_with(path, ".cc") ||
         ends_with(path, ".cpp") || ends_with(path, ".hpp");
}

static bool is_source(const char *path) {
  return is_cxx(path) || ends_with(path, ".c") || ends_with(path, ".h");
}

static bool load_allow_list(const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    perror(path);
    return false;
  }
  char line[2048];
  size_t cap = 0;
  while (fgets(line, sizeof line, f)) {
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    allow a;
    memset(&a, 0, sizeof a);
    int consumed = 0;
    if (sscanf(line, "%511s %127s %63s %n", a.path, a.function, a.allocator, &consumed) < 3)
      continue; /* blank or comment */
    snprintf(a.reason, sizeof a.reason, "%s", line + consumed);
    a.reason[strcspn(a.reason, "\r\n")] = '\0';
    if (a.reason[0] == '\0') {
      fprintf(stderr, "%s: entry '%s %s %s' gives no reason\n", path, a.path, a.function,
              a.allocator);
      fclose(f);
      return false;
    }
    if (allow_count == cap) {
      cap = cap ? cap * 2 : 16;
      allow *grown = realloc(allows, cap * sizeof *allows);
      if (grown == NULL) {
        fclose(f);
        return false;
      }
      allows = grown;
    }
    allows[allow_count++] = a;
  }
  fclose(f);
  return true;
}

static void report(const char *rel, int line, const char *function, const char *allocator) {
  hits++;
  for (size_t i = 0; i < allow_count; ++i) {
    allow *a = &allows[i];
    if (strcmp(a->path, rel) != 0) continue;
    if (strcmp(a->function, "*") != 0 && strcmp(a->function, function) != 0) continue;
    if (strcmp(a->allocator, "*") != 0 && strcmp(a->allocator, allocator) != 0) continue;
    a->used++;
    allowed_hits++;
    printf("allowed  %s:%d: %s in %s (%s)\n", rel, line, allocator, function, a->reason);
    return;
  }
  printf("HIDDEN   %s:%d: %s in %s: scratch must come from the workspace contract, "
         "kept memory from host->mem_alloc\n",
         rel, line, allocator, function);
}

static bool is_allocator(const char *id) {
  for (size_t i = 0; i < sizeof allocators / sizeof allocators[0]; ++i)
    if (!strcmp(id, allocators[i])) return true;
  return false;
}

static bool ident_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Index of the next character that is not blank, comment or newline from i. */
static size_t skip_blank(const char *s, size_t n, size_t i) {
  while (i < n) {
    if (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\\') {
      i++;
    } else if (s[i] == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') i++;
    } else if (s[i] == '/' && i + 1 < n && s[i + 1] == '*') {
      i += 2;
      while (i + 1 < n && !(s[i] == '*' && s[i + 1] == '/')) i++;
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

static void scan_text(const char *rel, const char *s, size_t n) {
  bool cxx = is_cxx(rel);
  int line = 1, depth = 0, paren = 0, func_depth = -1;
  char function[128] = "(file scope)", candidate[128] = "", prev_ident[128] = "";
  char last = 0; /* last significant character outside identifiers: ')' before a body */
  for (size_t i = 0; i < n;) {
    char c = s[i];
    if (c == '\n') {
      line++;
      i++;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') i++;
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      for (i += 2; i + 1 < n && !(s[i] == '*' && s[i + 1] == '/'); ++i)
        if (s[i] == '\n') line++;
      i += 2;
    } else if (c == '"' || c == '\'') {
      for (++i; i < n && s[i] != c; ++i) {
        if (s[i] == '\\')
          i++;
        else if (s[i] == '\n')
          line++; /* unterminated: stop at the line's end */
      }
      i++;
      last = c;
    } else if (ident_char(c) && !(c >= '0' && c <= '9')) {
      char id[128];
      size_t k = 0;
      while (i < n && ident_char(s[i])) {
        if (k + 1 < sizeof id) id[k++] = s[i];
        i++;
      }
      id[k] = '\0';
      size_t next = skip_blank(s, n, i);
      bool call = next < n && s[next] == '(';
      if (call && is_allocator(id)) report(rel, line, function, id);
      if (cxx && !strcmp(id, "new") && strcmp(prev_ident, "operator") != 0 && next < n &&
          (ident_char(s[next]) || s[next] == '(' || s[next] == ':'))
        report(rel, line, function, "new");
      if (func_depth < 0 && paren == 0 && call && strcmp(id, "__attribute__") != 0 &&
          strcmp(id, "__declspec") != 0)
        snprintf(candidate, sizeof candidate, "%s", id);
      /* Qualifiers between a parameter list and a body keep `last` at ')'. */
      if (strcmp(id, "const") && strcmp(id, "noexcept") && strcmp(id, "override") &&
          strcmp(id, "final"))
        last = 'a';
      snprintf(prev_ident, sizeof prev_ident, "%s", id);
    } else {
      if (c == '(')
        paren++;
      else if (c == ')')
        paren = paren > 0 ? paren - 1 : 0;
      else if (c == '{') {
        if (func_depth < 0 && last == ')') {
          func_depth = depth;
          snprintf(function, sizeof function, "%s", candidate[0] ? candidate : "?");
        }
        depth++;
      } else if (c == '}') {
        depth = depth > 0 ? depth - 1 : 0;
        if (depth == func_depth) {
          func_depth = -1;
          snprintf(function, sizeof function, "(file scope)");
          candidate[0] = '\0';
        }
      } else if (c == ';' && func_depth < 0) {
        candidate[0] = '\0'; /* a declaration ended */
      }
      if (c != ' ' && c != '\t' && c != '\r') last = c;
      i++;
    }
  }
}

static bool scan_file(const char *root, const char *rel) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return false;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc(size > 0 ? (size_t)size : 1);
  bool ok = text != NULL && fread(text, 1, (size_t)size, f) == (size_t)size;
  fclose(f);
  if (ok) scan_text(rel, text, (size_t)size);
  free(text);
  return ok;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Scans ROOT/rel, a folder, in sorted order so that the report is stable. */
static bool scan_dir(const char *root, const char *rel, int *files) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  DIR *d = opendir(path);
  if (d == NULL) {
    perror(path);
    return false;
  }
  char **names = NULL;
  size_t count = 0, cap = 0;
  struct dirent *e;
  bool ok = true;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 32;
      char **grown = realloc(names, cap * sizeof *names);
      if (grown == NULL) {
        ok = false;
        break;
      }
      names = grown;
    }
    names[count] = strdup(e->d_name);
    if (names[count] == NULL) {
      ok = false;
      break;
    }
    count++;
  }
  closedir(d);
  if (count) qsort(names, count, sizeof *names, cmp_names);
  for (size_t i = 0; i < count; ++i) {
    char child[4096], full[8192];
    snprintf(child, sizeof child, "%s/%s", rel, names[i]);
    snprintf(full, sizeof full, "%s/%s", root, child);
    struct stat st;
    if (ok && stat(full, &st) == 0) {
      if (S_ISDIR(st.st_mode))
        ok = scan_dir(root, child, files);
      else if (S_ISREG(st.st_mode) && is_source(child)) {
        ok = scan_file(root, child);
        (*files)++;
      }
    }
    free(names[i]);
  }
  free(names);
  return ok;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ROOT ALLOW_LIST [DIR...]\n", argv[0]);
    return 2;
  }
  if (!load_allow_list(argv[2])) return 2;
  int files = 0;
  bool ok = true;
  if (argc == 3) ok = scan_dir(argv[1], "providers", &files);
  for (int i = 3; ok && i < argc; ++i) ok = scan_dir(argv[1], argv[i], &files);
  for (size_t i = 0; i < allow_count; ++i)
    if (!allows[i].used)
      printf("note: stale allow-list entry '%s %s %s' allows nothing\n", allows[i].path,
             allows[i].function, allows[i].allocator);
  int hidden = hits - allowed_hits;
  printf("%d files scanned, %d allocator calls, %d allowed, %d hidden\n", files, hits, allowed_hits,
         hidden);
  free(allows);
  if (!ok) return 2;
  return hidden ? 1 : 0;
}
