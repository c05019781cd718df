/* Calls the token-layout runtime of runtime-host.test (Swin-T stage 1 at
 * 54x54, padded, so pad_qkv is passed) with valid and invalid arguments. */
#include "tokens.ptx.h"

#include <stdio.h>

/* The kernel's parameters, in the order of its launch: q, k, v, out
 * [batch, 2916, 96]; pad_qkv's three rows of 96; the table [169, 3]. */
const int fake_param_ranks[] = {3, 3, 3, 3, 1, 1, 1, 2};
const int fake_num_params = 8;

/* The buffers lie 16 MiB apart: none overlaps another. */
static void call(const char *what, CUdeviceptr q, CUdeviceptr table,
                 CUdeviceptr pad, int64_t batch) {
  int status = swin_window_attention(q, 0x2000000, 0x3000000, table, 0x4000000,
                                     batch, pad, (CUstream)0);
  printf("%s: %d %s\n", what, status,
         status ? swin_window_attention_last_error() : "");
}

int main(void) {
  call("valid", 0x1000100, 0x5000000, 0x6000000, 2);
  call("null pad", 0x1000100, 0x5000000, 0, 1);
  call("null q", 0, 0x5000000, 0x6000000, 1);
  call("null table", 0x1000100, 0, 0x6000000, 1);
  call("misaligned q", 0x1000108, 0x5000000, 0x6000000, 1);
  call("negative batch", 0x1000100, 0x5000000, 0x6000000, -1);
  call("empty batch", 0x1000100, 0x5000000, 0x6000000, 0);
  call("huge batch", 0x1000100, 0x5000000, 0x6000000, (int64_t)1 << 40);
  return 0;
}
