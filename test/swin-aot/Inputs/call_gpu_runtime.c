/* Calls the GPU host runtime of gpu-runtime-checks.test (token layout,
 * 54x54 padded, f32) against the stand-in driver of test/GPU/Inputs: a
 * count whose buffers would exceed 2^63 - 1 bytes and an output that
 * overlaps another buffer are refused before anything is launched. */
#include "tokens.ptx.h"

#include <stdio.h>

/* The kernel's parameters, in the order of its launch: q, k, v, out
 * [batch, 2916, 96]; pad_qkv's three rows of 96; the table [169, 3]. */
const int fake_param_ranks[] = {3, 3, 3, 3, 1, 1, 1, 2};
const int fake_num_params = 8;

/* Device addresses 16 MiB apart; one image of a map is 1119744 bytes, the
 * table 2028, pad_qkv 1152. */
enum { kMapBytes = 2916 * 96 * 4, kTableBytes = 169 * 3 * 4 };
static const CUdeviceptr kQ = 0x1000000, kK = 0x2000000, kV = 0x3000000,
                         kOut = 0x4000000, kTable = 0x5000000, kPad = 0x6000000;

static void call(const char *what, CUdeviceptr q, CUdeviceptr k, CUdeviceptr v,
                 CUdeviceptr out, CUdeviceptr pad, int64_t batch) {
  int status =
      swin_window_attention(q, k, v, kTable, out, batch, pad, (CUstream)0);
  printf("%s: %d %s\n", what, status,
         status ? swin_window_attention_last_error() : "");
}

int main(void) {
  call("valid", kQ, kK, kV, kOut, kPad, 1);
  call("batch 2^62", kQ, kK, kV, kOut, kPad, (int64_t)1 << 62);
  call("batch INT64_MAX", kQ, kK, kV, kOut, kPad, INT64_MAX);
  call("batch max + 1", kQ, kK, kV, kOut, kPad,
       SWIN_WINDOW_ATTENTION_MAX_BATCH + 1);
  call("batch max", kQ, kK, kV, kOut, kPad, SWIN_WINDOW_ATTENTION_MAX_BATCH);
  call("out = q", kQ, kK, kV, kQ, kPad, 1);
  call("out inside k", kQ, kK, kV, kK + 16, kPad, 1);
  call("out over the table's end", kQ, kK, kV, kTable + kTableBytes - 12, kPad,
       1);
  call("pad_qkv at out's end", kQ, kK, kV, kOut, kOut + kMapBytes - 16, 1);
  call("out right after q", kQ, kK, kV, kQ + kMapBytes, kPad, 1);
  call("q = k = v = pad_qkv", kQ, kQ, kQ, kOut, kQ, 1);
  call("batch 0, out = q", kQ, kK, kV, kQ, kPad, 0);
  return 0;
}
