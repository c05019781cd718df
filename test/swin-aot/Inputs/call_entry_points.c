/* Calls the CPU entry points of entry-point-checks.test with counts whose
 * buffers cannot exist and with outputs that overlap other buffers: each
 * call must return 1 and write nothing. Valid calls, inputs that alias
 * each other and buffers that only touch return 0. Each call runs in a
 * child process, so that one that crashes is reported and the rest run. */
#include "grad.so.h"
#include "packed.so.h"
#include "tok.so.h"
#include "win.so.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* tok: bf16 maps [batch, 144, 96] (12x12 padded to 14x14), table [169, 3],
 * pad_qkv [3, 96] f32. win and grad: f32 q, k, v [num_windows, 3, 49, 32],
 * out [num_windows, 49, 96]. packed: f32 qkv [batch, 196, 3, 3, 32]. */
enum {
  kMapElements = TOK_TOKENS_PER_IMAGE * TOK_NUM_HEADS * TOK_HEAD_DIM,
  kTableElements = TOK_TABLE_ROWS * TOK_NUM_HEADS,
  kPadElements = 3 * TOK_NUM_HEADS * TOK_HEAD_DIM,
  kWindowElements = WIN_NUM_TOKENS * WIN_NUM_HEADS * WIN_HEAD_DIM,
  kPackedElements =
      3 * PACKED_TOKENS_PER_IMAGE * PACKED_NUM_HEADS * PACKED_HEAD_DIM,
  kPackedOutElements =
      PACKED_TOKENS_PER_IMAGE * PACKED_NUM_HEADS * PACKED_HEAD_DIM,
};

/* One arena for every buffer of a call, so that the cases can place them
 * anywhere in it; zeros, except where a case fills an output with a mark. */
static unsigned char *arena;
enum { kArenaBytes = 1 << 22, kMark = 0xA5 };

static void *at(size_t offset) { return arena + offset; }

/* Whether `bytes` bytes at `p` still hold the mark. */
static int marked(const void *p, size_t bytes) {
  const unsigned char *c = p;
  for (size_t i = 0; i < bytes; ++i)
    if (c[i] != kMark)
      return 0;
  return 1;
}

typedef int (*Case)(void);

static void run(const char *what, Case body) {
  fflush(stdout);
  pid_t child = fork();
  if (child == 0) {
    memset(arena, 0, kArenaBytes);
    exit(body());
  }
  int status;
  waitpid(child, &status, 0);
  if (WIFSIGNALED(status))
    printf("%s: crashed (signal %d)\n", what, WTERMSIG(status));
  else
    fflush(stdout);
}

/* Prints the status and whether the output at `out` (marked before the
 * call) was written. */
static int report(const char *what, int status, const void *out, size_t bytes) {
  printf("%s: %d %s\n", what, status,
         marked(out, bytes) ? "untouched" : "written");
  fflush(stdout);
  return 0;
}

/*===--- tok: the token layout, bf16 ----------------------------------===*/

/* q, k, v, table, pad_qkv and out apart, 1 MiB each. */
#define TOK_Q at(0)
#define TOK_K at(1 << 20)
#define TOK_V at(2 << 20)
#define TOK_TABLE at(3 << 20)
#define TOK_PAD at((3 << 20) + (1 << 18))
#define TOK_OUT at((3 << 20) + (1 << 19))

static int tokCall(const char *what, void *q, void *k, void *v, void *table,
                   void *out, int64_t batch, void *pad) {
  size_t bytes =
      2 * kMapElements * (size_t)(batch > 0 && batch < 4 ? batch : 1);
  memset(out, kMark, bytes);
  int status = tok(q, k, v, table, out, batch, pad);
  return report(what, status, out, bytes);
}

static int tokValid(void) {
  return tokCall("tok valid", TOK_Q, TOK_K, TOK_V, TOK_TABLE, TOK_OUT, 2,
                 TOK_PAD);
}
static int tokHuge(void) {
  return tokCall("tok batch 2^62", TOK_Q, TOK_K, TOK_V, TOK_TABLE, TOK_OUT,
                 (int64_t)1 << 62, TOK_PAD);
}
static int tokMax(void) {
  return tokCall("tok batch INT64_MAX", TOK_Q, TOK_K, TOK_V, TOK_TABLE, TOK_OUT,
                 INT64_MAX, TOK_PAD);
}
static int tokAboveLimit(void) {
  return tokCall("tok batch max + 1", TOK_Q, TOK_K, TOK_V, TOK_TABLE, TOK_OUT,
                 TOK_MAX_BATCH + 1, TOK_PAD);
}
static int tokOutIsQ(void) {
  memset(TOK_Q, kMark, 2 * kMapElements);
  return tokCall("tok out = q", TOK_Q, TOK_K, TOK_V, TOK_TABLE, TOK_Q, 1,
                 TOK_PAD);
}
static int tokOutInK(void) {
  /* out starts 8 elements into k. */
  return tokCall("tok out inside k", TOK_Q, TOK_K, TOK_V, TOK_TABLE,
                 (char *)TOK_K + 16, 1, TOK_PAD);
}
static int tokOutOverTable(void) {
  /* The table's last element is out's first. */
  return tokCall("tok out over the table's end", TOK_Q, TOK_K, TOK_V, TOK_TABLE,
                 (char *)TOK_TABLE + 2 * (kTableElements - 1), 1, TOK_PAD);
}
static int tokOutOverPad(void) {
  /* pad_qkv starts at out's last byte. */
  return tokCall("tok pad_qkv at out's end", TOK_Q, TOK_K, TOK_V, TOK_TABLE,
                 TOK_OUT, 1, (char *)TOK_OUT + 2 * kMapElements - 1);
}
static int tokOutAfterQ(void) {
  return tokCall("tok out right after q", TOK_Q, TOK_K, TOK_V, TOK_TABLE,
                 (char *)TOK_Q + 2 * kMapElements, 1, TOK_PAD);
}
static int tokOutBeforeQ(void) {
  return tokCall("tok out right before q", (char *)TOK_OUT + 2 * kMapElements,
                 TOK_K, TOK_V, TOK_TABLE, TOK_OUT, 1, TOK_PAD);
}
static int tokInputsAlias(void) {
  return tokCall("tok q = k = v = pad_qkv", TOK_Q, TOK_Q, TOK_Q, TOK_TABLE,
                 TOK_OUT, 1, TOK_Q);
}
static int tokEmpty(void) {
  /* No image: the maps are empty and overlap nothing. */
  int status = tok(TOK_Q, TOK_K, TOK_V, TOK_TABLE, TOK_Q, 0, TOK_PAD);
  printf("tok batch 0, out = q: %d\n", status);
  return 0;
}

/*===--- win: the windows layout, f32 ---------------------------------===*/

static int winCall(const char *what, void *q, void *out, int64_t count) {
  size_t bytes = 4 * kWindowElements;
  memset(out, kMark, bytes);
  int status = win(q, at(1 << 20), at(2 << 20), at(3 << 20), out, count);
  return report(what, status, out, bytes);
}
static int winValid(void) {
  return winCall("win valid", at(0), at(7 << 19), 1);
}
static int winHuge(void) {
  return winCall("win num_windows 2^62", at(0), at(7 << 19), (int64_t)1 << 62);
}
static int winMax(void) {
  return winCall("win num_windows INT64_MAX", at(0), at(7 << 19), INT64_MAX);
}
static int winOutIsQ(void) { return winCall("win out = q", at(0), at(0), 1); }

/*===--- packed: qkv [batch, 196, 3, heads, head_dim], f32 ------------===*/

static int packedCall(const char *what, void *out, int64_t batch, void *pad) {
  size_t bytes = 4 * kPackedOutElements;
  memset(out, kMark, bytes);
  int status = packed(at(0), at(3 << 20), out, batch, pad);
  return report(what, status, out, bytes);
}
static int packedValid(void) {
  return packedCall("packed valid", at(2 << 20), 1, NULL);
}
static int packedHuge(void) {
  return packedCall("packed batch 2^62", at(2 << 20), (int64_t)1 << 62, NULL);
}
static int packedOutInQkv(void) {
  /* out starts in the last image row of qkv. */
  return packedCall("packed out inside qkv", at(4 * kPackedElements - 64), 1,
                    NULL);
}
static int packedUnusedPad(void) {
  /* 14x14 needs no padding: pad_qkv is not read, and may be anything. */
  return packedCall("packed unused pad_qkv = out", at(2 << 20), 1, at(2 << 20));
}

/*===--- grad: the backward of the windows layout, f32 ----------------===*/

/* q, k, v, out, dout, dq, dk, dv 256 KiB apart; table and dtable after. */
#define G(i) at((size_t)(i) << 18)
#define G_TABLE G(8)
#define G_DTABLE G(9)

static int gradCall(const char *what, void *out, void *dout, void *dq, void *dk,
                    void *dv, void *table, void *dtable, int64_t count) {
  size_t bytes = 4 * kWindowElements;
  memset(dq, kMark, bytes);
  memset(dk, kMark, bytes);
  memset(dv, kMark, bytes);
  memset(dtable, kMark, 4 * kTableElements);
  int status = grad_backward(G(0), G(1), G(2), table, out, dout, dq, dk, dv,
                             dtable, count);
  int untouched = marked(dq, bytes) && marked(dk, bytes) && marked(dv, bytes) &&
                  marked(dtable, 4 * kTableElements);
  printf("%s: %d %s\n", what, status, untouched ? "untouched" : "written");
  fflush(stdout);
  return 0;
}
static int gradValid(void) {
  return gradCall("grad valid", G(3), G(4), G(5), G(6), G(7), G_TABLE, G_DTABLE,
                  1);
}
static int gradHuge(void) {
  return gradCall("grad num_windows 2^62", G(3), G(4), G(5), G(6), G(7),
                  G_TABLE, G_DTABLE, (int64_t)1 << 62);
}
static int gradMax(void) {
  return gradCall("grad num_windows INT64_MAX", G(3), G(4), G(5), G(6), G(7),
                  G_TABLE, G_DTABLE, INT64_MAX);
}
static int gradDqInDout(void) {
  return gradCall("grad dq inside dout", G(3), G(4), (char *)G(4) + 4, G(6),
                  G(7), G_TABLE, G_DTABLE, 1);
}
static int gradDqIsDk(void) {
  return gradCall("grad dq = dk", G(3), G(4), G(5), G(5), G(7), G_TABLE,
                  G_DTABLE, 1);
}
static int gradDvIsOut(void) {
  return gradCall("grad dv = out", G(3), G(4), G(5), G(6), G(3), G_TABLE,
                  G_DTABLE, 1);
}
static int gradDtableIsTable(void) {
  return gradCall("grad dtable = table", G(3), G(4), G(5), G(6), G(7), G_TABLE,
                  G_TABLE, 1);
}
static int gradDtableInDq(void) {
  return gradCall("grad dtable inside dq", G(3), G(4), G(5), G(6), G(7),
                  G_TABLE, (char *)G(5) + 64, 1);
}
static int gradEmptyDtableIsTable(void) {
  /* No window, but dtable [169, 3] is written (zeros): it still may not
   * overlap the table. */
  return gradCall("grad num_windows 0, dtable = table", G(3), G(4), G(5), G(6),
                  G(7), G_TABLE, G_TABLE, 0);
}

int main(void) {
  arena = malloc(kArenaBytes);
  if (!arena)
    return 1;
  printf("max batch %lld\n", (long long)TOK_MAX_BATCH);
  run("tok valid", tokValid);
  run("tok batch 2^62", tokHuge);
  run("tok batch INT64_MAX", tokMax);
  run("tok batch max + 1", tokAboveLimit);
  run("tok out = q", tokOutIsQ);
  run("tok out inside k", tokOutInK);
  run("tok out over the table's end", tokOutOverTable);
  run("tok pad_qkv at out's end", tokOutOverPad);
  run("tok out right after q", tokOutAfterQ);
  run("tok out right before q", tokOutBeforeQ);
  run("tok q = k = v = pad_qkv", tokInputsAlias);
  run("tok batch 0, out = q", tokEmpty);
  run("win valid", winValid);
  run("win num_windows 2^62", winHuge);
  run("win num_windows INT64_MAX", winMax);
  run("win out = q", winOutIsQ);
  run("packed valid", packedValid);
  run("packed batch 2^62", packedHuge);
  run("packed out inside qkv", packedOutInQkv);
  run("packed unused pad_qkv = out", packedUnusedPad);
  run("grad valid", gradValid);
  run("grad num_windows 2^62", gradHuge);
  run("grad num_windows INT64_MAX", gradMax);
  run("grad dq inside dout", gradDqInDout);
  run("grad dq = dk", gradDqIsDk);
  run("grad dv = out", gradDvIsOut);
  run("grad dtable = table", gradDtableIsTable);
  run("grad dtable inside dq", gradDtableInDq);
  run("grad num_windows 0, dtable = table", gradEmptyDtableIsTable);
  free(arena);
  return 0;
}
