/*===- ProfileRuntime.c - the per-op profile of a compiled module ---------===*
 *
 * rpe-profile-ops (rpe-cpu-pipeline's profile=true) wraps each op at the top
 * level of a module's public functions in swin_prof_begin(id) and
 * swin_prof_end(id) and describes the ops in a table of hidden globals,
 * declared below. This runtime adds up each op's time (CLOCK_MONOTONIC) and
 * executions, and exports
 *
 *   void swin_profile_reset(void);
 *   int swin_profile_write(const char *path);
 *
 * the second writing the profile as JSON, format swin-opt-profile/1 (see
 * bench/README.md, "Per-op profile"):
 *
 *   {"format": "swin-opt-profile/1", "function": "forward", "calls": 2,
 *    "ops": [{"id": 0, "name": "rpe.matmul", "loc": "m.mlir:7:10",
 *             "count": 2, "ns": 81234}, ...]}
 *
 * `function` is the first profiled function and `calls` the executions of
 * its first op (id 0): one per call. swin-aot --profile compiles this file
 * to LLVM bitcode when swin-aot is built and links it into the module, so
 * that a library needs no C compiler; everything but the two functions
 * above stays inside the library (hidden). The counters are plain
 * globals: profile one call at a time.
 *
 *===----------------------------------------------------------------------===*/

#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define SWIN_PROF_HIDDEN __attribute__((visibility("hidden")))

/* An op's time and executions since the last reset. */
struct swin_prof_counter {
  int64_t ns;
  int64_t count;
};

/* The table of rpe-profile-ops: the first profiled function's name; each
 * op's name and location, NUL-terminated, in id order; the number of ops;
 * a zeroed counter per op. */
extern SWIN_PROF_HIDDEN const char swin_prof_function[];
extern SWIN_PROF_HIDDEN const char swin_prof_ops[];
extern SWIN_PROF_HIDDEN const int32_t swin_prof_op_count;
extern SWIN_PROF_HIDDEN struct swin_prof_counter swin_prof_counters[];

/* When the running op began. The profiled ops are not nested: each begin is
 * followed by its own end. */
static int64_t swin_prof_start_ns;

static int64_t swin_prof_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
}

/* Calls, not inlined code: an opaque call stays between the op's code and
 * its neighbours', which the optimizer would not keep apart from a few
 * loads and stores of globals. */
SWIN_PROF_HIDDEN __attribute__((noinline)) void swin_prof_begin(int32_t id);
SWIN_PROF_HIDDEN __attribute__((noinline)) void swin_prof_end(int32_t id);

void swin_prof_begin(int32_t id) {
  (void)id;
  swin_prof_start_ns = swin_prof_now_ns();
}

void swin_prof_end(int32_t id) {
  struct swin_prof_counter *counter = &swin_prof_counters[id];
  counter->ns += swin_prof_now_ns() - swin_prof_start_ns;
  ++counter->count;
}

void swin_profile_reset(void);
int swin_profile_write(const char *path);

void swin_profile_reset(void) {
  for (int32_t id = 0; id < swin_prof_op_count; ++id) {
    swin_prof_counters[id].ns = 0;
    swin_prof_counters[id].count = 0;
  }
}

/* `text` as a JSON string. */
static void swin_prof_write_string(FILE *file, const char *text) {
  fputc('"', file);
  for (const unsigned char *c = (const unsigned char *)text; *c; ++c) {
    if (*c == '"' || *c == '\\')
      fprintf(file, "\\%c", *c);
    else if (*c < 0x20)
      fprintf(file, "\\u%04x", *c);
    else
      fputc(*c, file);
  }
  fputc('"', file);
}

int swin_profile_write(const char *path) {
  if (!path)
    return 1;
  FILE *file = fopen(path, "w");
  if (!file)
    return 1;
  int64_t calls = swin_prof_op_count > 0 ? swin_prof_counters[0].count : 0;
  fputs("{\"format\": \"swin-opt-profile/1\", \"function\": ", file);
  swin_prof_write_string(file, swin_prof_function);
  fprintf(file, ", \"calls\": %" PRId64 ", \"ops\": [", calls);
  const char *entry = swin_prof_ops;
  for (int32_t id = 0; id < swin_prof_op_count; ++id) {
    const char *name = entry;
    while (*entry)
      ++entry;
    const char *loc = ++entry;
    while (*entry)
      ++entry;
    ++entry;
    fprintf(file, "%s\n  {\"id\": %" PRId32 ", \"name\": ", id ? "," : "", id);
    swin_prof_write_string(file, name);
    fputs(", \"loc\": ", file);
    swin_prof_write_string(file, loc);
    fprintf(file, ", \"count\": %" PRId64 ", \"ns\": %" PRId64 "}",
            swin_prof_counters[id].count, swin_prof_counters[id].ns);
  }
  fputs("\n]}\n", file);
  /* A profile that could not be written whole is not left behind. */
  int failed = ferror(file);
  if (fclose(file) != 0 || failed) {
    remove(path);
    return 1;
  }
  return 0;
}
