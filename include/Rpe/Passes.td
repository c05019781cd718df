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
    constant addresses by the lowering that consumes it.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def ConvertRpeToLinalg : Pass<"convert-rpe-to-linalg"> {
  let summary = "Lower rpe ops to linalg, tensor, arith and math (unfused)";
  let description = [{
    The reference lowering: every `rpe` op becomes upstream tensor-level ops,
    step by step as a framework would run them, with no fusion.

    * `rpe.relative_index` and `rpe.shift_mask` become constants;
    * `rpe.lookup` becomes a `linalg.generic` that gathers
      `table[idx[i, j], h]` with `idx` a constant tensor;
    * `rpe.window_attention` becomes an `scf.forall` over windows and heads
      whose body computes, on `N x N` tiles in f32, the scaled product
      `(scale * q) kᵀ`, adds the bias and the mask, a three-step softmax
      (row max, `exp(s - max)` with its row sum, division) and the product
      with `v`, and writes the result in the layout of the op's result;
    * `rpe.window_partition` and `rpe.window_reverse` become gathers;
    * `linalg.softmax` (attention spelled out in linalg that did not fuse)
      is decomposed into its generics, which loops can lower.

    It exists as the correctness baseline of the fused lowering and as the
    "unfused" point of comparison of the benchmarks.
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
    `SwinTransformerBlock`):

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
    * the `P·v` `linalg.batch_matmul`,

    and rewrites it to `rpe.window_attention` over `rpe.lookup(table)`
    (head-major result, collapsed back to the importer's `[B*H, N, d]`),
    so that `rpe-fuse-bias-softmax` fuses it. Nothing is raised on faith:
    the index constant must be Swin's relative position index of some
    window (2-D, non-square, or 3-D), read from the constant itself; a
    gather through any other index is left as it is. A constant mask
    that is Swin's shifted-window mask of some resolution and shift
    becomes `rpe.shift_mask`; any other mask, constant or a function
    argument, stays an explicit mask operand, which `rpe-fuse-bias-softmax`
    fuses as the kernel's `mask` operand.
    Attention without a gathered bias is left alone. The importer's ops
    that computed the attention are left dead for later cleanup.
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
    labels, so no bias, index or mask tensor is ever built.

    A windows-layout mask that is not an `rpe.shift_mask` (a run-time one,
    as timm's `WindowAttention.forward(x, mask)` takes, or any other
    constant) fuses too, as the fused op's `mask` operand: the kernel then
    reads `mask[b mod nW, i, j]` as it is. Attention whose bias is not an
    `rpe.lookup` is left alone (and lowered unfused), as is a feature-map
    attention whose mask is not the shift's, and attention whose per-thread
    scratch (keys transposed, `N x d` floats) would exceed
    `max-scratch-bytes`.
  }];
  let options = [
    Option<"maxScratchBytes", "max-scratch-bytes", "int64_t",
           /*default=*/"1048576",
           "Largest per-thread scratch the fused kernel may use">,
  ];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def RpeLowerFusedAttention : Pass<"rpe-lower-fused-attention"> {
  let summary = "Lower bufferized rpe.fused_window_attention to vector code";
  let description = [{
    Emits the fused CPU kernel for `rpe.fused_window_attention` on memrefs:
    an `scf.parallel` over (window, head) whose body, with stack scratch in
    an `memref.alloca_scope`, runs these steps on vectors of `vector-width`
    lanes:

    1. pack `kᵀ * scale` into `d x N'` scratch, where keys are laid out one
       window row per `ceil(Ww / L)` vectors (`N' = N / Ww * ceil(Ww/L) * L`)
       so that padding lanes exist only inside registers' worth of scratch
       (8 keys x 8 channels at a time, transposed in registers by shuffles,
       when `L` is 8);
    2. scores `S[i, :] = q[i, :] · kᵀ`, a register-blocked outer-product
       micro-kernel (rows x vectors of accumulators, FMA, which start at
       `-inf` on the lanes of padding keys); on AVX-512, when a row's score
       vectors fit the registers, each block of rows goes from the
       accumulators to steps 3-4 without being stored;
    3. per row: `S += bias + mask`, where the bias vector of a key row is a
       contiguous load from the head's reversed table at offset `idx(j, i)`
       (index arithmetic; `bias(i, j) = table[T-1-idx(j, i)]`), and the
       mask compares constant region labels; then the row max, reduced for
       up to three rows at once in one vector (shuffles shared by the
       rows, no scalar per row);
    4. `P = exp(S - max)` and the row sum, in one pass over the row, which
       stays in L1, and the group's sums reduced together, with one
       division. The softmax runs in base 2: log2(e) is folded into the
       scale of kᵀ, the table and the mask value (all three, or the scores
       would mix bases), and `2^x` is a degree-5 polynomial plus exponent
       arithmetic in registers (with `avx512`, vreduceps and vscalefps,
       which take `-inf` with no clamp);
    5. `out[i, :] = (P[i, :] · v) / sum`, a register-blocked micro-kernel,
       normalized once per output row rather than per probability.

    Query rows are processed in blocks so that a block of scores fits in
    `score-block-bytes`: the softmax of a row always sees the whole row, so
    a single pass suffices and no online rescaling is needed. Steps 3-4 run
    at the micro-kernels' width, on groups of rows step by step (a row's
    max, exponentials and sum are a chain of dependent instructions; the
    rows of a group overlap), and each row keeps its scores in registers
    when they fit. Each softmax row also prefetches one token's rows of q,
    k and v of the next (window, head): at large batches the kernel would
    otherwise wait for memory at the start of every item.

    `bf16-dot` makes bf16 operands (AVX-512 width, head_dim a multiple of
    16, not cosine) take AVX512-BF16 dot products (`x86vector.avx512.dot`,
    vdpbf16ps: two bf16 multiply-adds per f32 lane): kᵀ and v are packed in
    pairs of channels and of keys, the scale multiplies the f32 scores with
    the bias, and the probabilities are rounded to bf16 for `P·v`; the
    softmax and every accumulation stay f32. Without it (and on CPUs
    without AVX512-BF16) bf16 operands, like f16 ones, are widened to f32
    once per (window, head): k into kᵀ, q and v into f32 scratch.

    `kernel=rows` emits instead one online softmax per query row (running
    max `m`, sum `l` and rescaled accumulator), with the bias read from the
    table at `idx(i, j)` and the mask computed from the tokens' region
    labels in closed form: nested `scf.parallel` loops over (window, head)
    and rows on the host, or, with `target=gpu`, a `gpu.launch` with a
    block per (window, head) and a thread per row. It needs no scratch and
    takes any op; it is the GPU's fallback.

    `kernel=warps` emits the tensor-core form: one warp per (window,
    head), its keys, values, a 16-row query tile and the head's table
    staged in shared memory, scores and `P·v` as m16n8k16 `mma.sync` tiles
    (f16 or bf16 operands, f32 accumulators), an online softmax over blocks
    of up to 64 keys with the row max and sum reduced by quad shuffles, and
    the probabilities kept in registers between the two products (the C
    fragments of S are the A fragment of P). Several warps share a block
    for small windows. With `target=host` each warp is emulated by vectors
    of its 32 lanes (shuffles as vector shuffles, mma.sync by its
    definition), which is how its numbers are tested without a GPU. Ops it
    does not take (f32 operands, a head_dim not a multiple of 16, a window
    whose keys and values exceed 48 KiB of shared memory) get `rows`, and
    so do all ops when `sm` names a chip without m16n8k16 tensor-core tiles
    (below 80: sm_75).

    `rpe.fused_window_attention_grad` gets the gradient's CPU kernel, with
    any `kernel` (it has one form): per (window, head) the same packing
    of kᵀ (and of vᵀ), the scores and softmax recomputed by steps 2-4,
    `dP = dout · vᵀ` on the scores' micro-kernel, `dS = P (dP - rowsum(dout
    out))`, then `dq`, `dk` and `dv` on the output's micro-kernel. The
    table's gradient accumulates in the reversed table's layout, one vector
    add per query row and row of keys, the same addresses the bias was read
    from; its item loop is an `scf.for` (the items add to one table
    gradient) that `rpe-item-range` restricts like the forward's.
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
           "48 KiB of shared memory, at most 4)">,
    Option<"smVersion", "sm", "unsigned",
           /*default=*/"::mlir::rpe::kMmaM16N8K16MinSmVersion",
           "SM version of the GPU the kernel is for (75 for sm_75; "
           "rpe-gpu-pipeline sets it from its chip): warps need 80 or later, "
           "older chips get rows">,
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
    holding a fused kernel's item loop (the `scf.parallel` that
    `rpe-lower-fused-attention` marks `rpe.item_loop`) gets two trailing
    `index` arguments, `begin` and `end`, and the loop runs the items
    `[begin, min(end, items))` only, sequentially. (The gradient's item
    loop is an `scf.for` from the start; it is restricted the same way, and
    a caller running ranges on threads gives each its own table gradient.) Any thread pool can then
    split `[0, windows * heads)`: swin-aot's entry point hands the ranges to
    the GNU OpenMP runtime's team (`GOMP_parallel`), which in a PyTorch
    process is torch's own intra-op pool.

    A function may hold one item loop; it must not be called from the
    module (its signature changes). Run it before the loops are lowered,
    with `hoist-scratch` scratch (the loop is sequential).

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

#endif // RPE_PASSES_TD
