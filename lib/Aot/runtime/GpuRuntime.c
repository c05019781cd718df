/*===- GpuRuntime.c - host runtime of swin-aot's GPU kernels -------------===*
 *
 * swin-aot --target=nvptx writes NAME.c: this file's text, then the data of
 * one kernel (its image; per entry point, its launches with their
 * parameter tables and grids) and a few lines that give each entry point
 * of NAME.h its C signature and call swin_rt_launch. Everything that is the
 * same for every kernel is here, as C that the build compiles and
 * warning-checks (GpuRuntimeCheck.c); the generated part is data.
 *
 * The runtime uses the CUDA driver API only: it loads the image once per
 * CUDA context, into the one current at the call (device 0's primary one
 * where none is), so that a process may launch on several devices; checks
 * the arguments (as the CPU entry points do: NULL buffers, the count, an
 * output that overlaps another buffer, by the same arithmetic on device
 * addresses), builds the memref descriptors the kernel takes from the
 * device pointers, and queues the entry point's launches on the caller's
 * stream, in order, with the scratch they share (the backward's partial
 * table gradients) allocated and freed on that stream: no call waits for
 * the device. It never aborts: errors return non-zero and are described by
 * NAME_last_error().
 *
 *===----------------------------------------------------------------------===*/

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* Limits of what a kernel's tables may hold, and of the CUDA contexts (one
 * per device, for PyTorch) it may be loaded into. */
enum {
  SWIN_RT_MAX_ARGUMENTS = 16,
  SWIN_RT_MAX_PARAMS = 16,
  SWIN_RT_MAX_RANK = 5,
  SWIN_RT_MAX_LAUNCHES = 4,
  SWIN_RT_MAX_CONTEXTS = 64,
  SWIN_RT_ERROR_BYTES = 256
};

/* Shared memory a block has without opting in (static __shared__ arrays
 * take at most this); a function whose dynamic shared memory exceeds it
 * must opt in with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. */
enum { SWIN_RT_STATIC_SHARED_BYTES = 48 * 1024 };

/* The `argument` of a parameter that views the entry point's scratch. */
enum { SWIN_RT_SCRATCH = -1 };

/* A memref parameter of a kernel function: a view of a C argument or of
 * the scratch. */
struct swin_rt_param {
  /* The C argument (an index into the entry point's device pointers), or
   * SWIN_RT_SCRATCH. */
  int argument;
  int64_t offset;
  int rank;
  /* -1 is the count argument's value, -2 the (window, head) items. */
  int64_t shape[SWIN_RT_MAX_RANK];
  int64_t strides[SWIN_RT_MAX_RANK];
};

/* What the entry point checks about a C argument. */
enum swin_rt_check {
  SWIN_RT_UNCHECKED = 0,
  /* Must not be NULL. */
  SWIN_RT_NONNULL = 1,
  /* Must be 16-byte aligned (rows move in 16-byte vectors). */
  SWIN_RT_ALIGNED = 2,
  /* May be NULL: zeros of `zero_bytes` bytes are passed instead. */
  SWIN_RT_ZEROS_IF_NULL = 4
};

/* The size of a buffer argument: `bytes` per unit of the count, or in all
 * where `per_count` is 0. */
struct swin_rt_size {
  int64_t bytes;
  int per_count;
};

/* Two arguments that must not overlap: one the kernel writes, and another
 * it reads or writes. */
struct swin_rt_pair {
  int written, other;
};

/* One launch of an entry point: a kernel function of the image, its
 * parameters and its grid. */
struct swin_rt_launch_info {
  const char *symbol;
  int num_params;
  const struct swin_rt_param *params;
  unsigned block_size;
  /* (window, head) items per block: the grid is ceil(items / this); 0: a
   * grid of `grid` blocks whatever the count. */
  int64_t items_per_block;
  unsigned grid;
  /* Bytes of dynamic shared memory per block, passed to every launch (0:
   * the kernel's shared memory is static). */
  unsigned dynamic_shared_bytes;
};

/* One entry point. */
struct swin_rt_kernel {
  const char *name;
  const unsigned char *image;
  /* The entry point's device-pointer arguments, with their names. */
  int num_arguments;
  const char *const *argument_names;
  const int *argument_checks;
  const struct swin_rt_size *argument_sizes;
  int num_disjoint;
  const struct swin_rt_pair *disjoint;
  int64_t zero_bytes;
  /* The count must be at most this: its buffers' sizes in bytes (and the
   * scratch's) fit in int64_t, so no product of the count wraps. */
  int64_t max_count;
  /* The count must be a multiple of this (whole images of windows). */
  int64_t count_multiple;
  /* Windows per unit of the count (per image in the token layout). */
  int64_t windows_per_count;
  int64_t heads;
  /* Device scratch the launches share, in bytes per (window, head) item (0:
   * none): allocated on the stream before the first launch and freed on it
   * after the last. */
  int64_t scratch_bytes_per_item;
  /* Queued in order on the caller's stream. */
  int num_launches;
  const struct swin_rt_launch_info *launches;
};

/* An entry point's functions loaded into one CUDA context: a function (and
 * the zeros) of one context cannot be used from another, i.e. on another
 * device. */
struct swin_rt_module {
  CUcontext context;
  CUresult status;
  CUfunction functions[SWIN_RT_MAX_LAUNCHES];
  CUdeviceptr zeros;
};

/* Per-entry-point state: the contexts it was loaded into; the last error, in
 * a buffer the entry points of a kernel share (NAME_last_error). A context
 * is assumed to live as long as the process (the primary contexts PyTorch
 * and the runtime API use do). */
struct swin_rt_state {
  pthread_mutex_t lock;
  int num_modules;
  struct swin_rt_module modules[SWIN_RT_MAX_CONTEXTS];
  char *error;
};

#define SWIN_RT_STATE_INIT(error)                                              \
  {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}, error}

static int swin_rt_fail(const struct swin_rt_kernel *kernel,
                        struct swin_rt_state *state, CUresult status,
                        const char *what) {
  const char *text = 0;
  cuGetErrorString(status, &text);
  snprintf(state->error, SWIN_RT_ERROR_BYTES, "%s: %s: %s (CUDA error %d)",
           kernel->name, what, text ? text : "unknown error", (int)status);
  return (int)status ? (int)status : 1;
}

static int swin_rt_invalid(const struct swin_rt_kernel *kernel,
                           struct swin_rt_state *state, const char *argument,
                           const char *problem) {
  snprintf(state->error, SWIN_RT_ERROR_BYTES, "%s: invalid arguments: %s%s%s",
           kernel->name, argument, argument[0] ? " " : "", problem);
  return 1;
}

/* The size in bytes of argument `i` for `count` (at most max_count). */
static uint64_t swin_rt_bytes(const struct swin_rt_kernel *kernel, int i,
                              int64_t count) {
  const struct swin_rt_size *size = &kernel->argument_sizes[i];
  return (uint64_t)size->bytes * (size->per_count ? (uint64_t)count : 1u);
}

/* Whether [x, x + m) and [y, y + n) overlap: differences rather than
 * ends, which cannot wrap; an empty range overlaps nothing. */
static int swin_rt_overlap(CUdeviceptr x, uint64_t m, CUdeviceptr y,
                           uint64_t n) {
  return x < y ? y - x < m : x - y < n;
}

/* The blocks of launch `launch` for `items` (window, head) items. */
static int64_t swin_rt_grid(const struct swin_rt_launch_info *launch,
                            int64_t items) {
  if (!launch->items_per_block)
    return launch->grid;
  return (items + launch->items_per_block - 1) / launch->items_per_block;
}

/* The current context, or device 0's primary one made current where none
 * is (a process that has not used CUDA yet). */
static CUresult swin_rt_context(CUcontext *context) {
  CUdevice device;
  CUresult s = cuCtxGetCurrent(context);
  if (s == CUDA_ERROR_NOT_INITIALIZED) {
    s = cuInit(0);
    if (s == CUDA_SUCCESS)
      s = cuCtxGetCurrent(context);
  }
  if (s != CUDA_SUCCESS || *context)
    return s;
  s = cuDeviceGet(&device, 0);
  if (s == CUDA_SUCCESS)
    s = cuDevicePrimaryCtxRetain(context, device);
  if (s == CUDA_SUCCESS)
    s = cuCtxSetCurrent(*context);
  return s;
}

/* Loads the image into `module->context`, with the functions of the entry
 * point's launches (opted in to their dynamic shared memory); the status is
 * kept. */
static void swin_rt_load_into(const struct swin_rt_kernel *kernel,
                              struct swin_rt_module *module) {
  CUmodule loaded;
  int i;
  CUresult s = cuModuleLoadData(&loaded, kernel->image);
  for (i = 0; s == CUDA_SUCCESS && i < kernel->num_launches; ++i) {
    unsigned shared = kernel->launches[i].dynamic_shared_bytes;
    s = cuModuleGetFunction(&module->functions[i], loaded,
                            kernel->launches[i].symbol);
    /* Once per function and context: beyond the static 48 KiB a launch
     * fails unless its function opted in to that much. */
    if (s == CUDA_SUCCESS && shared > SWIN_RT_STATIC_SHARED_BYTES)
      s = cuFuncSetAttribute(module->functions[i],
                             CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             (int)shared);
  }
  if (s == CUDA_SUCCESS && kernel->zero_bytes > 0)
    s = cuMemAlloc(&module->zeros, (size_t)kernel->zero_bytes);
  if (s == CUDA_SUCCESS && kernel->zero_bytes > 0)
    s = cuMemsetD8(module->zeros, 0, (size_t)kernel->zero_bytes);
  module->status = s;
}

/* The entry point in the current context, loaded there at the first call
 * from it; a failure is remembered and reported by every later call from
 * that context. */
static CUresult swin_rt_load(const struct swin_rt_kernel *kernel,
                             struct swin_rt_state *state,
                             const struct swin_rt_module **loaded) {
  struct swin_rt_module *module = 0;
  CUcontext context = 0;
  CUresult s = swin_rt_context(&context);
  int i;
  if (s != CUDA_SUCCESS)
    return s;
  pthread_mutex_lock(&state->lock);
  for (i = 0; i < state->num_modules && !module; ++i)
    if (state->modules[i].context == context)
      module = &state->modules[i];
  if (!module && state->num_modules < SWIN_RT_MAX_CONTEXTS) {
    module = &state->modules[state->num_modules++];
    module->context = context;
    swin_rt_load_into(kernel, module);
  }
  s = module ? module->status : CUDA_ERROR_NOT_SUPPORTED;
  pthread_mutex_unlock(&state->lock);
  *loaded = module;
  return s;
}

/* Checks the arguments, loads the kernel and queues its launches over
 * `count` windows (or images) on `stream`. `arguments` are the entry
 * point's device pointers, in the order of kernel->argument_names. */
static int swin_rt_launch(const struct swin_rt_kernel *kernel,
                          struct swin_rt_state *state, CUdeviceptr *arguments,
                          int64_t count, CUstream stream) {
  CUdeviceptr pointers[SWIN_RT_MAX_PARAMS];
  int64_t descriptors[SWIN_RT_MAX_PARAMS][1 + 2 * SWIN_RT_MAX_RANK];
  void *params[SWIN_RT_MAX_PARAMS * (3 + 2 * SWIN_RT_MAX_RANK)];
  int64_t windows, items, grid;
  CUdeviceptr scratch = 0;
  const struct swin_rt_module *module;
  CUresult s = CUDA_SUCCESS;
  int i, j, l, any = 0;

  if (kernel->num_arguments > SWIN_RT_MAX_ARGUMENTS ||
      kernel->num_launches > SWIN_RT_MAX_LAUNCHES)
    return swin_rt_invalid(kernel, state, "", "(a corrupt kernel table)");
  for (l = 0; l < kernel->num_launches; ++l)
    if (kernel->launches[l].num_params > SWIN_RT_MAX_PARAMS)
      return swin_rt_invalid(kernel, state, "", "(a corrupt kernel table)");
  for (i = 0; i < kernel->num_arguments; ++i) {
    int check = kernel->argument_checks[i];
    if ((check & SWIN_RT_NONNULL) && !arguments[i])
      return swin_rt_invalid(kernel, state, kernel->argument_names[i],
                             "is NULL");
    if ((check & SWIN_RT_ALIGNED) && arguments[i] % 16)
      return swin_rt_invalid(kernel, state, kernel->argument_names[i],
                             "is not 16-byte aligned");
  }
  if (count < 0)
    return swin_rt_invalid(kernel, state, "", "the count is negative");
  if (count % kernel->count_multiple)
    return swin_rt_invalid(kernel, state, "",
                           "the count is not a multiple of the windows per "
                           "image");
  if (count > kernel->max_count)
    return swin_rt_invalid(kernel, state, "",
                           "the count's buffers would exceed 2^63 - 1 bytes");
  /* At most max_count, neither the items nor the grids nor the scratch's
   * size wrap. */
  windows = count * kernel->windows_per_count;
  items = windows * kernel->heads;
  for (l = 0; l < kernel->num_launches; ++l) {
    grid = swin_rt_grid(&kernel->launches[l], items);
    if (grid > 0x7fffffff)
      return swin_rt_invalid(kernel, state, "",
                             "the count exceeds a grid of 2^31 - 1 blocks");
    any |= grid > 0;
  }
  for (i = 0; i < kernel->num_disjoint; ++i) {
    int out = kernel->disjoint[i].written, other = kernel->disjoint[i].other;
    char problem[64];
    /* A NULL pad_qkv is the runtime's own zeros. */
    if (!arguments[out] || !arguments[other] ||
        !swin_rt_overlap(arguments[out], swin_rt_bytes(kernel, out, count),
                         arguments[other], swin_rt_bytes(kernel, other, count)))
      continue;
    snprintf(problem, sizeof problem, "overlaps %s",
             kernel->argument_names[other]);
    return swin_rt_invalid(kernel, state, kernel->argument_names[out], problem);
  }
  /* Nothing to queue: no item, and no launch of a fixed grid. */
  if (!any)
    return 0;
  s = swin_rt_load(kernel, state, &module);
  if (s != CUDA_SUCCESS)
    return swin_rt_fail(kernel, state, s, "loading the kernel");
  for (i = 0; i < kernel->num_arguments; ++i)
    if ((kernel->argument_checks[i] & SWIN_RT_ZEROS_IF_NULL) && !arguments[i])
      arguments[i] = module->zeros;
  if (kernel->scratch_bytes_per_item > 0 && items > 0) {
    s = cuMemAllocAsync(
        &scratch, (size_t)items * (size_t)kernel->scratch_bytes_per_item,
        stream);
    if (s != CUDA_SUCCESS)
      return swin_rt_fail(kernel, state, s, "allocating the scratch");
  }

  for (l = 0; l < kernel->num_launches && s == CUDA_SUCCESS; ++l) {
    const struct swin_rt_launch_info *launch = &kernel->launches[l];
    int num_params = 0;
    grid = swin_rt_grid(launch, items);
    if (grid == 0)
      continue;
    /* A memref descriptor is passed expanded: allocated and aligned
     * pointers, offset, sizes, strides. */
    for (i = 0; i < launch->num_params; ++i) {
      const struct swin_rt_param *param = &launch->params[i];
      int64_t *descriptor = descriptors[i];
      pointers[i] =
          param->argument == SWIN_RT_SCRATCH ? scratch
                                             : arguments[param->argument];
      descriptor[0] = param->offset;
      for (j = 0; j < param->rank; ++j) {
        int64_t extent = param->shape[j];
        descriptor[1 + j] = extent == -1 ? count : extent == -2 ? items : extent;
        descriptor[1 + param->rank + j] = param->strides[j];
      }
      params[num_params++] = &pointers[i];
      params[num_params++] = &pointers[i];
      for (j = 0; j < 1 + 2 * param->rank; ++j)
        params[num_params++] = &descriptor[j];
    }
    s = cuLaunchKernel(module->functions[l], (unsigned)grid, 1, 1,
                       launch->block_size, 1, 1, launch->dynamic_shared_bytes,
                       stream, params, 0);
  }
  /* Freed after the launches that use it, in the stream's order. */
  if (scratch)
    cuMemFreeAsync(scratch, stream);
  if (s != CUDA_SUCCESS)
    return swin_rt_fail(kernel, state, s, "cuLaunchKernel");
  return 0;
}
