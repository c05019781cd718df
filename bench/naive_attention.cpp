// naive_attention.cpp - the "plain C++ loop" baseline of bench/run.py.
//
// Swin window attention with relative position bias, written the obvious way
// a C++ programmer would without intrinsics or blocking:
//
//   for each (window b, head h)              -- OpenMP parallel, like swin-aot
//     S[i][j] = scale * dot(q[b,h,i,:], k[b,h,j,:])        materialized N x N
//     S[i][j] += table[index[i*N + j] * heads + h]          bias via the index
//     S[i][j] += mask[(b % nW)][i][j]                       (shifted windows)
//     S[i][:] = softmax(S[i][:])                            max, exp, sum, divide
//     out[b, i, h*d:(h+1)*d] = sum_j S[i][j] * v[b,h,j,:]
//
// The index ([N*N] int64, Swin's relative_position_index) and the mask
// ([nW, N, N] float, Swin's attn_mask) are precomputed by the caller, exactly
// as Swin precomputes them as module buffers.
//
// Build (bench/run.py does this):
//   clang++ -O3 -march=native -fopenmp -shared -fPIC naive_attention.cpp -o naive.so
// No -ffast-math: the dot-product reduction over d stays in order (scalar or
// only partially vectorized), the S·v loop (j outer, c inner) vectorizes over c.
//
// C ABI (all arrays row-major, float32):
//   q, k, v  [num_windows, heads, N, d]
//   table    [table_rows, heads]
//   index    [N, N]            int64 rows into table
//   mask     [num_masks, N, N] or NULL (then num_masks is ignored)
//   out      [num_windows, N, heads*d]
// Returns 0, or 1 on invalid arguments.

#include <cmath>
#include <cstdint>
#include <vector>

extern "C" const char *naive_build_info(void) {
#if defined(_OPENMP)
  return "plain C++ loops, materialized N x N scores, OpenMP over windows x heads";
#else
  return "plain C++ loops, materialized N x N scores, single-threaded (built without OpenMP)";
#endif
}

extern "C" int naive_window_attention(const float *q, const float *k, const float *v,
                                      const float *table, const std::int64_t *index,
                                      const float *mask, std::int64_t num_masks, float *out,
                                      std::int64_t num_windows, std::int64_t heads,
                                      std::int64_t n, std::int64_t d, float scale) {
  if (!q || !k || !v || !table || !index || !out || num_windows < 0 || heads < 1 || n < 1 ||
      d < 1 || (mask && num_masks < 1))
    return 1;
  const std::int64_t work = num_windows * heads;

#pragma omp parallel
  {
    std::vector<float> scores(static_cast<std::size_t>(n * n));  // per-thread scratch
#pragma omp for schedule(static)
    for (std::int64_t wh = 0; wh < work; ++wh) {
      const std::int64_t b = wh / heads, h = wh % heads;
      const float *qb = q + wh * n * d;
      const float *kb = k + wh * n * d;
      const float *vb = v + wh * n * d;
      const float *mb = mask ? mask + (b % num_masks) * n * n : nullptr;
      float *s = scores.data();

      // Scores, bias and mask.
      for (std::int64_t i = 0; i < n; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          float dot = 0.0f;
          for (std::int64_t c = 0; c < d; ++c) dot += qb[i * d + c] * kb[j * d + c];
          float x = scale * dot + table[index[i * n + j] * heads + h];
          if (mb) x += mb[i * n + j];
          s[i * n + j] = x;
        }
      }

      // Row softmax.
      for (std::int64_t i = 0; i < n; ++i) {
        float *row = s + i * n;
        float mx = row[0];
        for (std::int64_t j = 1; j < n; ++j) mx = std::fmax(mx, row[j]);
        float sum = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) {
          row[j] = std::exp(row[j] - mx);
          sum += row[j];
        }
        const float inv = 1.0f / sum;
        for (std::int64_t j = 0; j < n; ++j) row[j] *= inv;
      }

      // P · v, written into out[b, i, h*d : (h+1)*d].
      for (std::int64_t i = 0; i < n; ++i) {
        float *o = out + (b * n + i) * heads * d + h * d;
        for (std::int64_t c = 0; c < d; ++c) o[c] = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) {
          const float p = s[i * n + j];
          for (std::int64_t c = 0; c < d; ++c) o[c] += p * vb[j * d + c];
        }
      }
    }
  }
  return 0;
}
