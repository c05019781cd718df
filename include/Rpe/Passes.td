//===- Passes.td - rpe passes -------------------------------*- tablegen -*-===//

#ifndef RPE_PASSES_TD
#define RPE_PASSES_TD

include "mlir/Pass/PassBase.td"

def RpeFoldRelativeIndex : Pass<"rpe-fold-relative-index"> {
  let summary = "Fold the relative position index, the shift mask and constant "
                "lookups into constants";
  let description = [{
    Everything about a window's relative position index is known at compile
    time: it depends on the window extents alone. Frameworks still build the
    `N x N` index (and the `nW x N x N` shifted-window mask) as tensors at run
    time. This pass replaces

    * `rpe.relative_index` by an `arith.constant` holding Swin's index,
    * `rpe.shift_mask` by an `arith.constant` holding Swin's mask,
    * `rpe.lookup` of a constant table (inference, SwinV2's continuous
      position bias after constant propagation) by the constant bias,

    so that no index arithmetic is left for run time. An `rpe.lookup` of a
    table that is not constant is left alone: its index is folded into
    constant addresses by the lowering that consumes it. The values are the
    ops' folders (`lib/Rpe/RpeOps.cpp`), so this pass, the canonicalizer and
    the lowerings agree.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def ConvertRpeToLinalg : Pass<"convert-rpe-to-linalg"> {
  let summary = "Lower rpe ops to linalg, tensor, arith and math (unfused)";
  let description = [{
    The reference lowering: every `rpe` op becomes upstream tensor-level ops,
    step by step as a framework would run them, with no fusion. It exists as
    the correctness baseline of the fused lowering and as the "unfused"
    point of comparison of the benchmarks.

    * `rpe.relative_index` and `rpe.shift_mask` become constants;
    * `rpe.lookup` becomes a `linalg.generic` that gathers
      `table[idx[i, j], h]` with `idx` a constant tensor;
    * `rpe.window_attention` becomes an `scf.forall` over windows and heads
      whose body computes the attention of one `N x N` tile in f32, one
      `linalg.generic` per step (scores, bias and mask, the softmax's max,
      exponentials, sum and division, `P·v`), written in the layout of the
      op's result;
    * `rpe.window_partition` and `rpe.window_reverse` become gathers;
    * `linalg.softmax` (attention spelled out in linalg that did not fuse)
      is decomposed into its generics, which loops can lower.

    The steps: `lib/Transforms/ConvertRpeToLinalg.cpp`.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

def RpeRaiseWindowAttention : Pass<"rpe-raise-window-attention"> {
  let summary = "Raise Swin attention imported as linalg (torch-mlir) into "
                "rpe ops";
  let description = [{
    The rest of `swin-opt` helps IR written for it; an MLIR user's module
    comes from an importer, where Swin's attention is spelled out in
    upstream ops and nothing would fuse. This pass finds it in
    torch-mlir's linalg-on-tensors form (timm's `WindowAttention`,
    `SwinTransformerBlock`) and rewrites it to `rpe.window_attention` over
    `rpe.lookup(table)` (head-major result, collapsed back to the
    importer's `[B*H, N, d]`), so that `rpe-fuse-bias-softmax` fuses it.
    It accepts:

    * `q` scaled by a constant (an f64 truncated in the body), or the
      scores scaled (or divided) after the product;
    * `linalg.batch_matmul` of the head-merged `[B*H, N, d]` q and
      `kᵀ` (`linalg.transpose [0, 1, 3, 2]`), zero-filled;
    * the bias: a `linalg.generic` gathering `table[idx[p], h]` over the
      flattened pairs through a constant index (`dense` or
      `dense_resource`), with or without the wrap of negative indices,
      expanded to `[N, N, H]` and transposed `[2, 0, 1]`, added broadcast
      over the windows;
    * optionally a `[nW, N, N]` mask added through Swin's
      `[B/nW, nW, H, N, N]` view;
    * `linalg.softmax` over the keys, or its decomposition: a max reduction
      (an argmax computed beside it is ignored), sub, exp, sum, div;
    * the `P·v` `linalg.batch_matmul`.

    Nothing is raised on faith: the index constant must be Swin's relative
    position index of some window (2-D, non-square, or 3-D), or BEiT's of
    some grid and its class token (an `rpe.lookup` with `class_token`), read
    from the constant itself; a gather through any other index is left as
    it is. A
    constant mask that is Swin's shifted-window mask of some resolution and
    shift becomes `rpe.shift_mask`; any other mask, constant or a function
    argument, stays an explicit mask operand, which `rpe-fuse-bias-softmax`
    fuses as the kernel's `mask` operand. Attention without a gathered bias
    is left alone. The importer's ops that computed the attention are left
    dead for later cleanup. The matching:
    `lib/Transforms/RaiseWindowAttention.cpp`.
  }];
  let dependentDialects = ["::mlir::rpe::RpeDialect",
                           "::mlir::tensor::TensorDialect"];
}

def RpeFuseBiasSoftmax : Pass<"rpe-fuse-bias-softmax"> {
  let summary = "Fuse the relative position bias gather and the shift mask "
                "into the attention";
  let description = [{
    Frameworks gather an `H x N x N` bias from the compact table, add it
    (and an `nW x N x N` mask) to the scores and run the softmax, touching
    memory at every step. This pass rewrites

    ```
    rpe.window_attention(q, k, v, bias = rpe.lookup(table)
                         [, mask = rpe.shift_mask])
    ```

    (and the same attention spelled out in linalg: a zero-initialized
    `q·kᵀ` contraction generic with an optional constant scale on a factor,
    a generic adding the lookup's bias `[h, i, j]` and optionally a shift
    mask read at `[b mod nW, i, j]`, `linalg.softmax` over the keys, and the
    `P·v` contraction generic, all f32 on `[B, H, N, *]` tensors) into
    `rpe.fused_window_attention(q, k, v, table)`, which carries the
    window and the shift as attributes: its lowering reads the bias from the
    compact table inside the softmax loop and computes the mask from region
    labels, so no bias, index or mask tensor is ever built. On feature maps,
    `rpe.window_reverse` of the attention of `rpe.window_partition`s fuses
    whole: the shift, padding and partition become the kernel's addressing.

    A windows-layout mask that is not an `rpe.shift_mask` (a run-time one,
    as timm's `WindowAttention.forward(x, mask)` takes, or any other
    constant) fuses too, as the fused op's `mask` operand: the kernel then
    reads `mask[b mod nW, i, j]` as it is. Attention whose bias is not an
    `rpe.lookup` is left alone (and lowered unfused), as is a feature-map
    attention whose mask is not the shift's, and attention whose per-thread
    scratch (keys transposed, `N x d` floats) would exceed
    `max-scratch-bytes`. The patterns: `lib/Transforms/FuseBiasSoftmax.cpp`.
  }];
  let options = [
    Option<"maxScratchBytes", "max-scratch-bytes", "int64_t",
           /*default=*/"1048576",
           "Largest per-thread scratch the fused kernel may use">,
  ];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def RpeLowerFusedAttention : Pass<"rpe-lower-fused-attention"> {
  let summary = "Replace each bufferized fused attention by its kernel";
  let description = [{
    Replaces each `rpe.fused_window_attention` and
    `rpe.fused_window_attention_grad` on memrefs by the loops, vectors or
    GPU launch that compute it, reading the bias from the compact table and
    the mask from region labels: no `N x N` tensor exists at run time. The
    kernels are built by `lib/Codegen` (`Rpe/Codegen.h`); the header of each
    file states its algorithm.

    * `kernel=tiles`, the CPU's: per (window, head), register-blocked FMA
      micro-kernels of `vector-width` lanes for `q·kᵀ` and `P·v` around a
      single-pass softmax in base 2, over query blocks of
      `score-block-bytes` (`TilesKernel.cpp`; bf16 on AVX512-BF16 dot
      products with `bf16-dot`, `PairedBf16.cpp`).
    * `kernel=rows`: one online softmax per query row; nested
      `scf.parallel` loops on the host, a block per (window, head) and a
      thread per row with `target=gpu`. It needs no scratch and takes any
      op (`RowsKernel.cpp`).
    * `kernel=warps`: one warp per (window, head) on m16n8k16 tensor-core
      tiles with an online softmax over blocks of `key-block` keys, several
      warps per block for small windows; with `target=host` each warp is
      emulated by 32-lane vectors, which is how its numbers are tested
      without a GPU (`WarpKernel.cpp`).

    The gradient op gets the CPU's backward kernel (`BackwardKernel.cpp`),
    or with `target=gpu` (whatever `kernel` says) and with `kernel=warps`
    on the host, emulated, the GPU's (`GpuBackwardKernel.cpp`): a warp per
    (window, head), on tensor cores for f16 and bf16 (head_dim a multiple of
    16), whose table gradient goes to a partial per item, then a
    second launch (on the host, loops) that sums the partials in a fixed
    order, without atomics. The item loop of every host kernel, over
    (window, head), is marked `rpe.item_loop` for `rpe-item-range`.

    The GPU kernels keep their buffers in static shared memory up to the
    48 KiB a block has without opting in, and beyond it in dynamic shared
    memory (`gpu.dynamic_shared_memory`, the launch's
    `dynamic_shared_memory_size`) up to what a block may opt in to on the
    chip of `sm` (64 KiB on sm_75, 163 KiB on sm_80, 99 KiB on sm_86/89 and
    sm_120, 227 KiB on sm_90 and sm_100).

    `kernel=warps` falls back to `rows` for ops it does not take (operands
    not all f16, all bf16 or, with `f32-mma`, all f32; a head_dim not a
    multiple of 16 or above 256 (f32: 128),
    an explicit mask, a window whose keys and values exceed 48 KiB of
    static shared memory unless `warps-per-block` is given, or the chip's
    shared memory per block when it is) and for every op when `sm` is below 80 (no
    m16n8k16 tiles: sm_75). Refused, with an error on the op: an op that is
    not bufferized, the GPU's gradient of a
    window whose q, k, v and dout exceed the chip's shared memory per block
    (also when emulated on the host), on the
    GPU a window of more than 1024 tokens (`rows`),
    a shifted map of too many windows to label (`tiles`), a `key-block` or
    `warps-per-block` that the op's window cannot have; and
    at the pass's operation, before any IR changes, an option out of range
    or `kernel=tiles target=gpu`.

    Example: `--rpe-lower-fused-attention="kernel=warps target=gpu sm=80"`.
  }];
  let options = [
    // The field is FusedKernelOptions::strategy.
    Option<"strategy", "kernel", "::mlir::rpe::KernelStrategy",
           /*default=*/"::mlir::rpe::KernelStrategy::Tiles",
           "The kernel: tiles (CPU micro-kernels), rows (one online "
           "softmax per query row) or warps (a warp per (window, head) on "
           "tensor-core tiles, rows where it does not apply)",
           [{::mlir::rpe::enumOptionValues(
               ::mlir::rpe::symbolizeKernelStrategy)}]>,
    Option<"target", "target", "::mlir::rpe::KernelTarget",
           /*default=*/"::mlir::rpe::KernelTarget::Host",
           "Where the kernel runs: host (scf.parallel loops; warps emulated "
           "by 32-lane vectors) or gpu (one gpu.launch)",
           [{::mlir::rpe::enumOptionValues(
               ::mlir::rpe::symbolizeKernelTarget)}]>,
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"8",
           "f32 lanes of the micro-kernels and the exponentials (8 for AVX2, "
           "16 for AVX-512); key rows are padded to min(width, 8) lanes">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "tiles: bf16 operands take AVX512-BF16 dot products (vdpbf16ps; "
           "the CPU must have AVX512-BF16) where the shape allows">,
    Option<"avx512", "avx512", "bool", /*default=*/"false",
           "tiles: the CPU has AVX-512F; with vector-width=16, 2^x takes "
           "vreduceps and vscalefps (implied by bf16-dot)">,
    Option<"hoistScratch", "hoist-scratch", "bool", /*default=*/"false",
           "Allocate the scratch of the tiles kernel and of the warp "
           "emulation once, before the (window, head) "
           "loop, for a loop that will run sequentially (else per "
           "iteration, in an alloca scope, as threads need)">,
    Option<"scoreBlockBytes", "score-block-bytes", "int64_t",
           /*default=*/"32768",
           "Bytes of scores kept per query block (an L1 budget)">,
    Option<"keyBlock", "key-block", "int64_t", /*default=*/"0",
           "warps: keys per online-softmax step, 16 to 64, dividing N "
           "rounded up to 16 (0: the largest that does)">,
    Option<"warpsPerBlock", "warps-per-block", "int64_t", /*default=*/"0",
           "warps: (window, head) items per GPU block (0: as many as fit "
           "48 KiB of static shared memory, at most 4, and rows for a window "
           "that needs more; given, dynamic shared memory where needed)">,
    Option<"f32Mma", "f32-mma", "::mlir::rpe::F32Mma",
           /*default=*/"::mlir::rpe::F32Mma::None",
           "warps: f32 q, k, v on the tensor cores as bf16 terms: bf16x3 "
           "(two terms, three products: 2^-16 of each, finer than TF32) or "
           "bf16x6 (three terms, six products: f32's precision); none (the "
           "default): f32 ops take rows",
           [{::mlir::rpe::enumOptionValues(
               ::mlir::rpe::symbolizeF32Mma)}]>,
    Option<"smVersion", "sm", "unsigned",
           /*default=*/"::mlir::rpe::kMmaM16N8K16MinSmVersion",
           "SM version of the GPU the kernel is for (75 for sm_75; "
           "rpe-gpu-pipeline sets it from its chip): warps need 80 or later, "
           "older chips get rows; it bounds a block's shared memory">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::gpu::GPUDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::NVVM::NVVMDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect",
  ];
}

def RpeItemRange : Pass<"rpe-item-range", "::mlir::ModuleOp"> {
  let summary = "Make a fused kernel compute a range of its (window, head) "
                "items that its caller gives";
  let description = [{
    A kernel that starts its own threads (OpenMP through
    `convert-scf-to-openmp`) brings its own thread pool into the caller's
    process. Inside PyTorch that is a second pool beside torch's: the two
    spin against each other on the same cores and every call pays for it.
    This pass instead lets the caller schedule the work: each function
    holding a fused kernel's item loop (marked `rpe.item_loop` by
    `rpe-lower-fused-attention`) gets two trailing `index` arguments,
    `begin` and `end`, and computes the items `[begin, min(end, items))`
    only. Any thread pool can then split `[0, windows * heads)`: swin-aot's
    entry point hands the ranges to the GNU OpenMP runtime's team
    (`GOMP_parallel`), which in a PyTorch process is torch's own intra-op
    pool. (The gradient's items add to one table gradient: a caller running
    its ranges on threads gives each its own.)

    A function may hold one item loop, from 0 by 1; it must not be called
    from the module (its signature changes). Run it before the loops are
    lowered, on kernels built with `hoist-scratch` (the loop then runs
    sequentially). The rewrite: `lib/Transforms/ItemRange.cpp`.

    Example:

    ```mlir
    func.func @k(%out: memref<8xf32>) {
      scf.parallel (%i) = (%c0) to (%c8) step (%c1) {...} {rpe.item_loop}
    }
    // becomes
    func.func @k(%out: memref<8xf32>, %begin: index, %end: index) {
      %e = arith.minui %end, %c8 : index
      scf.parallel (%i) = (%begin) to (%e) step (%c1) {...}
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def RpeParallelToGomp : Pass<"rpe-parallel-to-gomp", "::mlir::ModuleOp"> {
  let summary = "Run parallel loops on the GNU OpenMP runtime's team "
                "(GOMP_parallel)";
  let description = [{
    Upstream's `convert-scf-to-openmp` runs parallel loops on LLVM's OpenMP
    runtime (libomp, `__kmpc_fork_call`). Inside PyTorch that is a second
    thread pool beside torch's (GNU libgomp): the two spin against each
    other on the same cores. This pass runs them on the calling thread's
    GNU OpenMP team instead, as swin-aot's kernel entry points do
    (`rpe-item-range`), which in a PyTorch process is torch's own intra-op
    pool.

    Each outermost `scf.parallel` of a `func.func` becomes a call of
    `GOMP_parallel(worker, &frame, 0, 0)`: `frame`, on the caller's stack,
    is a struct of the values the loop's body uses from outside (memrefs
    and indices as their LLVM types, through
    `builtin.unrealized_conversion_cast`s that the conversions to LLVM
    resolve); `worker`, a private function of the loop's body, loads them
    and runs the iterations of its thread's share: the iteration space,
    linearized, in `omp_get_num_threads()` contiguous shares, the
    `omp_get_thread_num()`-th. Constants (ops without operands or memory
    effects, such as `memref.get_global`) are cloned into the worker rather
    than passed. An iteration that allocates on the stack gets a
    `memref.alloca_scope` of its own. Parallel loops nested in the body stay
    and run sequentially on their thread; a loop with reductions is an
    error.

    The worker is named after the function, the loop's number in it and
    what its location says of where the loop came from: the op that became
    the loop (a name location, `rpe.matmul` as `matmul`) and the line of the
    source, e.g. `@forward.par6.matmul.line413`, so that a profile names
    the op. Run it after the loops are parallel loops (forall-to-parallel)
    and before memrefs go to LLVM. The rewrite:
    `lib/Transforms/ParallelToGomp.cpp`.

    Example:

    ```mlir
    func.func @f(%out: memref<8xf32>) {
      scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
        memref.store %x, %out[%i] : memref<8xf32>
      }
    }
    // becomes
    func.func @f(%out: memref<8xf32>) {
      %frame = llvm.alloca ... x !llvm.struct<(struct<(ptr, ptr, i64, ...)>)>
      // store %out's descriptor into %frame
      %worker = func.constant @f.par0 : (!llvm.ptr) -> ()
      call @GOMP_parallel(%worker, %frame, %c0_i32, %c0_i32)
    }
    func.func private @f.par0(%frame: !llvm.ptr) {
      // %out from %frame, this thread's [%begin, %end) of [0, 8)
      cf.br ^header(%begin : index)
    ^header(%i: index):
      %more = arith.cmpi ult, %i, %end : index
      cf.cond_br %more, ^iteration, ^exit
    ^iteration:
      memref.store %x, %out[%i] : memref<8xf32>
      ...
      cf.br ^header(%next : index)
    ^exit:
      return
    }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::cf::ControlFlowDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
}

def RpeExpandMemrefCopy : Pass<"rpe-expand-memref-copy"> {
  let summary = "Rewrite memref.copy as linalg.copy";
  let description = [{
    Bufferization copies with `memref.copy`, which the LLVM lowering turns
    into a call to `memrefCopy` from MLIR's C runner library whenever a side
    is not contiguous. Generated kernels must link against nothing but libc,
    libm and the OpenMP runtime, so this pass rewrites every `memref.copy` as
    `linalg.copy`, which `convert-linalg-to-loops` turns into plain loops.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def RpeOrderGlobals : Pass<"rpe-order-globals", "::mlir::ModuleOp"> {
  let summary = "Order the module's memref.globals by name";
  let description = [{
    One-shot bufferization creates a `memref.global` for each constant
    tensor in an order that varies from run to run (it visits the module's
    functions in an order of pointers), and that order becomes the order of
    the globals in the LLVM module, so that compiling the same input twice
    gave two different libraries. This pass moves the globals to the start
    of the module, sorted by symbol name: the same input gives the same
    bytes.
  }];
}

def RpeProfileOps : Pass<"rpe-profile-ops", "::mlir::ModuleOp"> {
  let summary = "Time each op of the public functions through calls of a "
                "profiling runtime";
  let description = [{
    Where does a model's time go, op by op? On buffers (after
    bufferization: the ops write memory, so that no call moves across them),
    before the loops are lowered, this pass wraps each op at the top level
    of each public function with a body in calls of the profiling runtime,

    ```mlir
    %id = arith.constant 3 : i32
    func.call @swin_prof_begin(%id) : (i32) -> ()
    rpe.matmul ins(...) outs(...)
    func.call @swin_prof_end(%id) : (i32) -> ()
    ```

    and describes the ops, in id order, in hidden LLVM globals that the
    runtime reads (`lib/Aot/runtime/ProfileRuntime.c`, which `swin-aot
    --profile` links into the library):

    * `@swin_prof_function`: the name of the first profiled function;
    * `@swin_prof_ops`: each op's name and location, NUL-terminated;
    * `@swin_prof_op_count` (i32) and `@swin_prof_counters`, a zeroed
      `{i64 ns, i64 count}` per op.

    The ops that do work are timed: linalg ops, rpe ops (`rpe.matmul`, the
    fused attention), `memref.copy`, and loop nests (`scf.for`,
    `scf.forall`, `scf.parallel`); allocations, deallocations, views,
    constants and calls are not. A loop nest is named after the linalg op
    it holds (a contraction, else the last one); one that the row passes
    vectorized holds none and is named after what it does:
    `rows.reduction` (LayerNorms, means), `rows.elementwise` (float
    arithmetic), `rows.gather` (only addressing: rolls, window partitions,
    transposes). Vector code the row passes leave at the top level (a
    single row, such as Swin's final mean) is not timed.

    A location prints as `file:line:col` (the file's name without its
    directory); a call site (torch-mlir's FX importer writes each op's
    Python stack as one) as its innermost frame and that frame's caller,
    `file:line at file:line` (`linear.py:134 at mlp.py:48`: fc1); a name
    as the name; a fused location as its first known part; anything else
    in MLIR's syntax.

    A module that already has one of the symbols above is refused.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::LLVM::LLVMDialect"];
}

def RpeGpuModuleToBinary : Pass<"rpe-gpu-module-to-binary",
                                 "::mlir::ModuleOp"> {
  let summary = "gpu-module-to-binary with errors that do not print the "
                "kernel";
  let description = [{
    Runs upstream `gpu-module-to-binary` and keeps its errors to their
    messages. MLIR attaches the operation an error is reported on as a note
    (`see current operation`, unless `--mlir-print-op-on-diagnostic=false`);
    for a failure in LLVM, libdevice or ptxas that operation is the whole
    `gpu.module`, tens of kilobytes that bury the message. This pass drops
    that note from the diagnostics the serialization reports on operations
    and otherwise succeeds or fails as upstream does (which, for `isa`,
    reports a missing libdevice as an error but succeeds, leaving the
    libdevice calls unresolved). `rpe-gpu-pipeline` ends with it.
  }];
  let options = [
    Option<"format", "format", "::mlir::rpe::GpuBinaryFormat",
           /*default=*/"::mlir::rpe::GpuBinaryFormat::Isa",
           "What the gpu.binary holds: isa (PTX), bin (a cubin, from "
           "ptxas), fatbin (cubin and PTX, from ptxas and fatbinary) or none "
           "(leave the gpu.module as it is)",
           [{::mlir::rpe::enumOptionValues(
               ::mlir::rpe::symbolizeGpuBinaryFormat)}]>,
    Option<"toolkit", "toolkit", "std::string",
           /*default=*/"SWIN_CUDA_TOOLKIT_DEFAULT",
           "CUDA toolkit (libdevice, ptxas, fatbinary)">,
  ];
}

def RpeMoveHalvesAsBits : Pass<"rpe-move-halves-as-bits"> {
  let summary = "Gather and scatter f16 and bf16 vectors as their bits";
  let description = [{
    Rewrites each `llvm.intr.masked.gather` and `llvm.intr.masked.scatter`
    of an f16 or bf16 vector as the same access of 16-bit integers and a
    bitcast. The x86 code generator scalarizes such an access (there is no
    16-bit gather) and, on a CPU without AVX512-BF16 or AVX512-FP16, moves
    each element through f32: it widens it and rounds it back, bf16 by a
    call of `__truncsfbf2`, which the kernel libraries do not link (GCC's
    libgcc has it from GCC 13 on, Debian bookworm's is 12), f16 by F16C
    conversions where the CPU has them, else by calls too. Integers move as
    they are. The warp kernels' host emulation (`kernel=warps target=host`)
    reads and writes their operands this way.

    `rpe-cpu-pipeline` runs it after `convert-vector-to-llvm`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def RpeCheckLowered : Pass<"rpe-check-lowered", "::mlir::ModuleOp"> {
  let summary = "Fail where an op that translation to LLVM IR rejects "
                "remains";
  let description = [{
    A conversion pass that cannot convert an op leaves it, and a pipeline
    of such passes exits successfully with IR that
    `mlir-translate --mlir-to-llvmir` rejects. `rpe-cpu-pipeline`
    (`dialects=llvm,omp`) and `rpe-gpu-pipeline` (`dialects=llvm,gpu,nvvm`)
    end with this check, so that they either produce what translates or
    fail with an error at an op that was not lowered.

    It reports, at its location, the first op of each name that was not
    lowered, an op of a dialect neither builtin nor in `dialects` or a
    `builtin.unrealized_conversion_cast` that a conversion left unresolved,
    and fails. The walk: `lib/Transforms/Pipelines.cpp`.
  }];
  let options = [
    ListOption<"dialects", "dialects", "std::string",
               "Dialects whose ops may remain, besides builtin">,
  ];
}

def RpeFormMatmul : Pass<"rpe-form-matmul"> {
  let summary = "Turn linalg contractions into rpe.matmul, with constant "
                "weights packed and elementwise consumers fused";
  let description = [{
    An imported model's linear layers are `linalg.matmul`s of a transposed
    constant weight, followed by generics that add the bias, apply GELU or
    add the residual; lowered as they are, each is a loop nest of its own
    that writes and rereads its result, and the weight is transposed on
    every call. This pass turns each 2-D contraction `A[M, K] B[K, N]` (B
    possibly transposed) of f32, or of bf16 A and B widened to an f32
    product, into `rpe.matmul`:

    * a constant B (also behind `linalg.transpose`) is packed into panels
      `[N / NR, K, NR]` at compile time (`NR` = `panel-width`, the kernel's
      register tile width); with `bf16-dot`, bf16 weights into panels of
      pairs of k, `[N / NR, ceil(K / 2), NR, 2]` (the operand of
      AVX512-BF16's dot product); other weights are packed by the kernel at
      run time;
    * elementwise generics fuse first (upstream's elementwise fusion of
      single-use producers), then an elementwise generic that is the
      product's only user becomes the op's epilogue, its other inputs
      epilogue inputs read at `(n)`, `(m, n)`, `(m)` or `0`.

    The algorithm of the kernel is in `lib/Codegen/MatmulKernel.cpp`.
  }];
  let options = [
    Option<"panelWidth", "panel-width", "int64_t", /*default=*/"48",
           "Columns of a packed panel of B: the kernel's register tile "
           "width (48 for AVX-512, 24 for AVX2)">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "Pack constant bf16 weights in pairs of k, for the kernel's "
           "AVX512-BF16 dot products (rpe-lower-matmul's bf16-dot)">,
  ];
  let dependentDialects = ["::mlir::rpe::RpeDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def RpeLowerMatmul : Pass<"rpe-lower-matmul"> {
  let summary = "Lower bufferized rpe.matmul to a register-blocked vector "
                "kernel";
  let description = [{
    Replaces each `rpe.matmul` on memrefs by its CPU kernel: an
    `scf.parallel` over (panel, block of rows) items whose body keeps an
    `MR x NR` tile of the product in vector registers over the whole
    reduction, applies the epilogue to each vector and stores it. With
    `bf16-dot`, bf16 operands whose weights are packed in pairs of k (or
    packed here, at run time) take AVX512-BF16 dot products, two k per f32
    lane and instruction. The algorithm and the tile sizes are in
    `lib/Codegen/MatmulKernel.cpp`.
  }];
  let options = [
    Option<"vectorWidth", "vector-width", "int64_t", /*default=*/"8",
           "f32 lanes of the kernel's vectors (8 for AVX2, 16 for "
           "AVX-512); the panel width of a packed rhs must be a multiple">,
    Option<"bf16Dot", "bf16-dot", "bool", /*default=*/"false",
           "bf16 operands take AVX512-BF16 dot products (vdpbf16ps; the "
           "CPU must have AVX512-BF16 and vector-width be 4, 8 or 16) on "
           "weights packed in pairs of k">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::vector::VectorDialect",
    "::mlir::x86vector::X86VectorDialect",
  ];
}

def RpeFoldDataMovement : Pass<"rpe-fold-data-movement"> {
  let summary = "Fold chains of reshapes, transposes, slices and concats "
                "into one gather";
  let description = [{
    The rolls (slices and a concat per dimension) and window partitions
    (reshape, transpose, reshape chains) of an imported Swin each write a
    whole tensor. A chain that copies becomes one elementwise
    `linalg.generic` reading its source with `tensor.extract`, where each
    row of the result is a contiguous run of the source (one vector load);
    other chains are left as they are. The algorithm:
    `lib/Transforms/FoldDataMovement.cpp`.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def RpeFuseElementwise : Pass<"rpe-fuse-elementwise"> {
  let summary = "Fuse elementwise linalg generics into their consumers "
                "where the producer goes away or is a cast";
  let description = [{
    torch-mlir writes a LayerNorm as about ten generics, each a tensor
    written and read back. Upstream's elementwise fusion, after unit
    dimensions are folded, under a control that never duplicates work
    (nor fuses into a product): a LayerNorm becomes its reductions and one
    elementwise generic. The control: `lib/Transforms/FuseElementwise.cpp`.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
}

def RpeTileRows : Pass<"rpe-tile-rows"> {
  let summary = "Tile linalg ops to rows of their innermost dimension, "
                "producers fused, in parallel loops";
  let description = [{
    Each linalg op on static tensors that is not a product becomes a loop
    (an `scf.forall` for threads when large) whose iteration computes one
    row of the innermost dimension, with the producers of that row fused in:
    a LayerNorm reads and writes each row once. Ops inside the loop work on
    `1 x .. x 1 x C` slices, for `rpe-vectorize-rows`. The algorithm:
    `lib/Transforms/TileRows.cpp`.
  }];
  let options = [
    Option<"parallel", "parallel", "bool", /*default=*/"true",
           "Tile large ops with scf.forall (threads) rather than scf.for">,
    Option<"minParallelElements", "min-parallel-elements", "int64_t",
           /*default=*/"32768",
           "The least elements of an op's iteration space for scf.forall">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::tensor::TensorDialect"];
}

def RpeVectorizeRows : Pass<"rpe-vectorize-rows"> {
  let summary = "Vectorize the linalg ops that compute one row along the "
                "row";
  let description = [{
    Each linalg op whose loops have extent 1 but the last (as
    `rpe-tile-rows` leaves them), reading and writing its operands
    contiguously along the row, becomes 1-D vector code; reductions along
    the row reassociate. Other ops are left for `convert-linalg-to-loops`.
    The algorithm: `lib/Transforms/VectorizeRows.cpp`.
  }];
  let options = [
    Option<"maxRowElements", "max-row-elements", "int64_t",
           /*default=*/"4096",
           "The longest row kept in vectors (longer rows stay loops)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::vector::VectorDialect"];
}

#endif // RPE_PASSES_TD
