//===- WarpKernel.cpp - the tensor-core form of the fused attention -------===//
//
// One warp computes the attention of one (window b, head h), N tokens of d
// channels, on m16n8k16 tensor-core tiles (mma.sync, f16 or bf16 operands,
// f32 accumulators). With P(t) the table offset of token t and the softmax
// in base 2 (log2 e folded into the scale, the table and the mask value):
//
//   shared: K, V (N' x d, zero rows past N), R = table[:, h] * log2 e
//   for each tile of 16 query rows I:
//     m = lowest finite, l = 0, O = 0                        per row of I
//     for each block J of keys:
//       S   = q_I kᵀ_J                           mma.sync, m16n8k16
//       S   = S * scale * log2 e + R[P(i) - P(j) + (T-1)/2]
//             (+ mask * log2 e where labels differ) (-inf where j >= N)
//       m'  = max(m, max_J S)                    quad shuffles (xor 1, 2)
//       P   = 2^(S - m'),  c = 2^(m - m')
//       l   = l c + sum_J P,  O = O c + P v_J    mma.sync, P stays in
//       m   = m'                                 registers (C -> A layout)
//     out_I = O / l                              via shared, a row at a time
//
// Fragments follow PTX's mma.m16n8k16 layouts. With lane = 4 g + t:
//   A (16 x 16, row major) a0..a7: row g (+8 for a2, a3, a6, a7),
//                                  column 2t + (i & 1) (+8 for a4..a7)
//   B (16 x 8)             b0..b3: row 2t + (i & 1) (+8 for b2, b3), column g
//   C (16 x 8)             c0..c3: row g (+8 for c2, c3), column 2t + (i & 1)
// so the C fragments of two adjacent 8-key tiles of S are, rounded, the A
// fragment of P for those 16 keys: no shuffle between the two products.
//
// Memory: token rows move between global and shared memory as 16-byte
// vectors, d / 8 lanes per row, eight steps' loads issued before their
// stores (the kernel is memory-bound: bytes in flight are what count);
// rows sit in shared memory with a stride of d + 8 elements, so that the
// 8 rows x 4 column pairs of a fragment load hit distinct banks. Small
// windows put several warps in a block (up to 48 KiB of static shared
// memory); the host runtime sizes the grid from rpe.items_per_block.
//
// The same code runs on the host with each warp emulated by vectors of its
// 32 lanes (SIMT as SIMD): lane values are vector<32x...>, shared memory is
// stack scratch, loads and stores are gathers and scatters, shuffles are
// vector shuffles and mma.sync is its definition as lane permutations and
// FMAs. That is how the kernel's numbers are tested without a GPU; only
// the primitives of the Warp class differ between the two (and the host
// stages rows in a loop rather than in unrolled batches).
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

static constexpr int64_t kWarpSize = 32;
/// Static shared memory a block may use without opting in to more.
static constexpr int64_t kSharedBytesPerBlock = 48 * 1024;
/// Several (window, head) items per block for small windows: a block of
/// one warp would cap an SM at 32 resident warps.
static constexpr int64_t kMaxWarpsPerBlock = 4;
/// Rows move between memories in chunks of this many bytes per lane.
static constexpr int64_t kChunkBytes = 16;

FailureOr<std::optional<WarpTileShape>>
mlir::rpe::detail::getWarpTileShape(FusedWindowAttentionOp op,
                                    const WarpTileOptions &options) {
  std::optional<WarpTileShape> none;
  Type element = getElementTypeOrSelf(op.getQuery().getType());
  if (!element.isF16() && !element.isBF16())
    return none;
  for (Value operand : {op.getKey(), op.getValue(), op.getInit()})
    if (getElementTypeOrSelf(operand.getType()) != element)
      return none;
  // Rows move in 16-byte chunks, a row's within one warp step.
  int64_t d = op.getHeadDim();
  if (d % 16 != 0 || d > 256)
    return none;
  WarpTileShape shape;
  shape.element = element;
  shape.queryTiles = llvm::divideCeil(op.getNumTokens(), 16);
  shape.paddedTokens = 16 * shape.queryTiles;
  // The largest block of <= 64 keys that tiles N': then every block holds
  // at least one real key (N' - N < 16), so the running max is finite.
  int64_t tiles = shape.queryTiles;
  shape.keyBlock = 16 * (tiles % 4 == 0   ? 4
                         : tiles % 3 == 0 ? 3
                         : tiles % 2 == 0 ? 2
                                          : 1);
  if (options.keyBlock) {
    if (shape.paddedTokens % options.keyBlock != 0)
      return op.emitOpError("key-block=")
             << options.keyBlock << " does not divide the "
             << shape.paddedTokens
             << " keys of its window (N rounded up to 16)";
    shape.keyBlock = options.keyBlock;
  }
  int64_t elementBytes = 2;
  // Rows of q, k, v in shared memory are padded by 16 bytes: with a stride
  // of d + 8 elements the 8 rows x 4 column pairs of a fragment load fall
  // in distinct banks (a stride of 64 bytes would put rows g and g + 2 in
  // the same bank).
  shape.rowStride = d + 8;
  shape.sharedBytes =
      (16 + 2 * shape.paddedTokens) * shape.rowStride * elementBytes +
      getNumTableRows(op.getWindow()) * 4 + 2 * shape.paddedTokens * 4;
  shape.warpsPerBlock = std::min<int64_t>(
      kMaxWarpsPerBlock, kSharedBytesPerBlock / shape.sharedBytes);
  if (shape.warpsPerBlock == 0)
    return none;
  if (options.warpsPerBlock) {
    if (options.warpsPerBlock * shape.sharedBytes > kSharedBytesPerBlock)
      return op.emitOpError("warps-per-block=")
             << options.warpsPerBlock << " needs "
             << options.warpsPerBlock * shape.sharedBytes
             << " bytes of shared memory, more than a block's "
             << kSharedBytesPerBlock;
    shape.warpsPerBlock = options.warpsPerBlock;
  }
  return std::optional<WarpTileShape>(shape);
}

namespace mlir::rpe::detail {

/// The shared memory of one warp: a query tile (16 x d, reused for the
/// output tile), the keys and values (N' x d), the head's table (T, f32),
/// and per key its table offset P(j) and region label (-1: padding), i32.
/// On the GPU the buffers are the block's and `*Base` the warp's offsets.
struct WarpScratch {
  Value queries, keys, values, table, keyOffsets, keyLabels;
  Value queryBase, tokenBase, tableBase, keyBase;
};

/// The primitives of a warp program. A lane value is a scalar on the GPU
/// (each thread holds its own) and a vector<32 x T> in the host emulation.
/// Uniform values (loop counters, token addresses) are scalars in both; the
/// lane-polymorphic index helpers of FusedKernelEmitter mix the two.
class Warp {
public:
  Warp(ImplicitLocOpBuilder &b, bool emulated) : b(b), emulated(emulated) {}

  bool isEmulated() const { return emulated; }

  /// The lane's index within the warp.
  Value laneId() {
    if (!emulated)
      return gpu::LaneIdOp::create(b, /*upper_bound=*/nullptr);
    SmallVector<int64_t> lanes = llvm::to_vector(llvm::seq<int64_t>(0, 32));
    auto type = VectorType::get({kWarpSize}, b.getIndexType());
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(type, ArrayRef<int64_t>(lanes)));
  }

  /// The type of a lane value of element type `element`.
  Type laneType(Type element) {
    return emulated ? VectorType::get({kWarpSize}, element) : element;
  }

  /// The same float constant in every lane.
  Value constant(double value, Type element) {
    Attribute attr = b.getFloatAttr(element, value);
    if (emulated)
      attr = DenseElementsAttr::get(cast<ShapedType>(laneType(element)), attr);
    return arith::ConstantOp::create(b, cast<TypedAttr>(attr));
  }

  /// memref[index] in every lane (index uniform or per lane); lanes whose
  /// `mask` is false read nothing and get zero.
  Value load(Value memref, Value index, Value mask = {}) {
    Type element = cast<MemRefType>(memref.getType()).getElementType();
    if (!emulated) {
      if (!mask)
        return memref::LoadOp::create(b, memref, index);
      auto guarded = scf::IfOp::create(b, TypeRange{element}, mask,
                                       /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&guarded.getThenRegion().front());
      scf::YieldOp::create(
          b, ValueRange{memref::LoadOp::create(b, memref, index)});
      b.setInsertionPointToStart(&guarded.getElseRegion().front());
      scf::YieldOp::create(b, ValueRange{arith::ConstantOp::create(
                                  b, cast<TypedAttr>(b.getZeroAttr(element)))});
      return guarded.getResult(0);
    }
    auto type = VectorType::get({kWarpSize}, element);
    Value zero = arith::ConstantOp::create(
        b, DenseElementsAttr::get(type, b.getZeroAttr(element)));
    return vector::GatherOp::create(b, type, memref, ValueRange{index0()},
                                    lanes(index), laneMask(mask), zero);
  }

  /// memref[index] = value in every lane whose `mask` holds.
  void store(Value value, Value memref, Value index, Value mask = {}) {
    if (!emulated) {
      if (!mask) {
        memref::StoreOp::create(b, value, memref, index);
        return;
      }
      auto guarded = scf::IfOp::create(b, mask, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&guarded.getThenRegion().front());
      memref::StoreOp::create(b, value, memref, index);
      return;
    }
    vector::ScatterOp::create(b, Type(), memref, ValueRange{index0()},
                              lanes(index), laneMask(mask), lanes(value));
  }

  /// `width` consecutive elements from memref[index] on in every lane whose
  /// `mask` holds (zeros elsewhere): on the GPU one vector load, aligned to
  /// its size (16 bytes: ld.v4.b32), in the emulation `width` gathers.
  SmallVector<Value> loadChunk(Value memref, Value index, int64_t width,
                               Value mask = {}) {
    Type element = cast<MemRefType>(memref.getType()).getElementType();
    if (emulated) {
      SmallVector<Value> parts;
      for (int64_t i = 0; i < width; ++i)
        parts.push_back(load(memref, offset(index, i), mask));
      return parts;
    }
    auto type = VectorType::get({width}, element);
    auto loadVector = [&] {
      return vector::LoadOp::create(b, type, memref, index,
                                    /*nontemporal=*/false, chunkAlignment(type))
          .getResult();
    };
    if (!mask)
      return {loadVector()};
    auto guarded = scf::IfOp::create(b, TypeRange{type}, mask,
                                     /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&guarded.getThenRegion().front());
    scf::YieldOp::create(b, ValueRange{loadVector()});
    b.setInsertionPointToStart(&guarded.getElseRegion().front());
    scf::YieldOp::create(
        b, ValueRange{arith::ConstantOp::create(
               b, DenseElementsAttr::get(type, b.getZeroAttr(element)))});
    return {guarded.getResult(0)};
  }

  /// Stores a chunk of loadChunk's form at memref[index] on.
  void storeChunk(ArrayRef<Value> chunk, Value memref, Value index,
                  Value mask = {}) {
    if (emulated) {
      for (auto [i, part] : llvm::enumerate(chunk))
        store(part, memref, offset(index, i), mask);
      return;
    }
    OpBuilder::InsertionGuard guard(b);
    if (mask) {
      auto guarded = scf::IfOp::create(b, mask, /*withElseRegion=*/false);
      b.setInsertionPointToStart(&guarded.getThenRegion().front());
    }
    vector::StoreOp::create(
        b, chunk.front(), memref, index, /*nontemporal=*/false,
        chunkAlignment(cast<VectorType>(chunk.front().getType())));
  }

  /// The value of lane (lane xor offset).
  Value shuffleXor(Value value, int64_t offset) {
    if (!emulated)
      return gpu::ShuffleOp::create(b, value, offset, kWarpSize,
                                    gpu::ShuffleMode::XOR)
          .getShuffleResult();
    SmallVector<int64_t> source;
    for (int64_t lane = 0; lane < kWarpSize; ++lane)
      source.push_back(lane ^ offset);
    return vector::ShuffleOp::create(b, value, value, source);
  }

  /// Orders the warp's shared-memory accesses (__syncwarp).
  void sync() {
    if (!emulated)
      NVVM::SyncWarpOp::create(
          b, arith::ConstantOp::create(b, b.getI32IntegerAttr(-1)));
  }

  /// D = A B + C on one m16n8k16 tile: `a` holds a0..a7, `bOperand` b0..b3
  /// (f16 or bf16 lane values), `c` c0..c3 (f32), in PTX's layouts.
  SmallVector<Value, 4> mma(ArrayRef<Value> a, ArrayRef<Value> bOperand,
                            ArrayRef<Value> c) {
    return emulated ? emulatedMma(a, bOperand, c) : nvvmMma(a, bOperand, c);
  }

private:
  Value index0() { return arith::ConstantIndexOp::create(b, 0); }
  Value offset(Value index, int64_t i) {
    Value c = arith::ConstantIndexOp::create(b, i);
    matchLanes(b, b.getLoc(), index, c);
    return arith::AddIOp::create(b, index, c);
  }
  /// Chunks are 16-byte aligned (the runtime checks its buffers are); a
  /// wider chunk (f32 padding rows) is two 16-byte accesses.
  static llvm::MaybeAlign chunkAlignment(VectorType type) {
    return llvm::Align(
        std::min<int64_t>(kChunkBytes, type.getNumElements() *
                                           type.getElementTypeBitWidth() / 8));
  }

  /// Broadcasts a uniform value to the warp's lanes (emulation only).
  Value lanes(Value value) {
    if (isa<VectorType>(value.getType()))
      return value;
    return vector::BroadcastOp::create(b, laneType(value.getType()), value);
  }
  Value laneMask(Value mask) {
    if (mask)
      return lanes(mask);
    auto type = VectorType::get({kWarpSize}, b.getI1Type());
    return arith::ConstantOp::create(
        b, DenseElementsAttr::get(type, b.getBoolAttr(true)));
  }

  SmallVector<Value, 4> nvvmMma(ArrayRef<Value> a, ArrayRef<Value> bOperand,
                                ArrayRef<Value> c) {
    Type element = a.front().getType();
    bool bf16 = element.isBF16();
    // Two elements per 32-bit register; NVVM takes bf16 pairs as i32.
    auto pair = [&](Value x, Value y) -> Value {
      Value packed = vector::FromElementsOp::create(
          b, VectorType::get({2}, element), ValueRange{x, y});
      if (!bf16)
        return packed;
      return LLVM::BitcastOp::create(b, b.getI32Type(), packed);
    };
    SmallVector<Value> aRegs, bRegs;
    for (int64_t i = 0; i < 8; i += 2)
      aRegs.push_back(pair(a[i], a[i + 1]));
    for (int64_t i = 0; i < 4; i += 2)
      bRegs.push_back(pair(bOperand[i], bOperand[i + 1]));
    Type f32 = b.getF32Type();
    auto resultType =
        LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
    NVVM::MMATypes type = bf16 ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
    Value d = NVVM::MmaOp::create(
        b, resultType, aRegs, bRegs, c, ArrayRef<int64_t>{16, 8, 16},
        std::nullopt, std::nullopt, std::array<NVVM::MMATypes, 2>{type, type},
        std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                       NVVM::MMALayout::col});
    SmallVector<Value, 4> result;
    for (int64_t i = 0; i < 4; ++i)
      result.push_back(LLVM::ExtractValueOp::create(b, d, i));
    return result;
  }

  /// mma.sync by its definition: c_i(lane) += sum_k A(row, k) B(k, col)
  /// with (row, col) the lane's element i of C; A(row, k) and B(k, col) are
  /// fetched from the lanes and registers the layouts above put them in.
  SmallVector<Value, 4> emulatedMma(ArrayRef<Value> a, ArrayRef<Value> bOperand,
                                    ArrayRef<Value> c) {
    auto f32Type = VectorType::get({kWarpSize}, b.getF32Type());
    auto widen = [&](Value v) -> Value {
      return arith::ExtFOp::create(b, f32Type, v);
    };
    SmallVector<Value> aWide = llvm::map_to_vector(a, widen);
    SmallVector<Value> bWide = llvm::map_to_vector(bOperand, widen);
    auto gather = [&](Value v, function_ref<int64_t(int64_t)> sourceLane) {
      SmallVector<int64_t> source;
      for (int64_t lane = 0; lane < kWarpSize; ++lane)
        source.push_back(sourceLane(lane));
      return vector::ShuffleOp::create(b, v, v, source).getResult();
    };
    // A(g + 8 rowHalf, k) for every lane, and B(k, 2t + column).
    DenseMap<std::pair<int64_t, int64_t>, Value> aAt, bAt;
    for (int64_t k = 0; k < 16; ++k)
      for (int64_t half = 0; half < 2; ++half) {
        int64_t aRegister = (k >= 8 ? 4 : 0) + 2 * half + (k & 1);
        aAt[{k, half}] = gather(aWide[aRegister], [&](int64_t lane) {
          return (lane / 4) * 4 + (k % 8) / 2;
        });
        int64_t bRegister = (k >= 8 ? 2 : 0) + (k & 1);
        bAt[{k, half}] = gather(bWide[bRegister], [&](int64_t lane) {
          return (2 * (lane % 4) + half) * 4 + (k % 8) / 2;
        });
      }
    SmallVector<Value, 4> result;
    for (int64_t i = 0; i < 4; ++i) {
      Value sum = c[i];
      for (int64_t k = 0; k < 16; ++k)
        sum = math::FmaOp::create(b, aAt[{k, i / 2}], bAt[{k, i % 2}], sum);
      result.push_back(sum);
    }
    return result;
  }

  ImplicitLocOpBuilder &b;
  bool emulated;
};

} // namespace mlir::rpe::detail

LogicalResult FusedKernelEmitter::emitWarpTiles(const WarpTileShape &shape,
                                                bool gpuLaunch,
                                                bool hoistScratch) {
  if (op.hasTokenLayout())
    featureMap.emplace(*op.getImage(), g.window, *op.getShift(),
                       op.isShiftThenPad());
  Value items = mulConst(countWindows(), g.heads);

  int64_t queryElements = 16 * shape.rowStride;
  int64_t tokenElements = shape.paddedTokens * shape.rowStride;
  OpBuilder::InsertionGuard guard(b);
  // A block of `warps` warps, one (window, head) each, each with its own
  // slice of the block's buffers.
  int64_t warps = shape.warpsPerBlock;
  struct Buffer {
    StringRef name;
    int64_t elements;
    Type element;
  };
  Buffer buffers[] = {{"queries", queryElements, shape.element},
                      {"keys", tokenElements, shape.element},
                      {"values", tokenElements, shape.element},
                      {"table", g.tableRows, f32},
                      {"key_offsets", shape.paddedTokens, b.getI32Type()},
                      {"key_labels", shape.paddedTokens, b.getI32Type()}};
  auto scratchAt = [&](ArrayRef<Value> memrefs, Value slot) {
    return WarpScratch{memrefs[0],
                       memrefs[1],
                       memrefs[2],
                       memrefs[3],
                       memrefs[4],
                       memrefs[5],
                       mulConst(slot, queryElements),
                       mulConst(slot, tokenElements),
                       mulConst(slot, g.tableRows),
                       mulConst(slot, shape.paddedTokens)};
  };

  if (!gpuLaunch) {
    // The host keeps the block's layout: item i works in slot i mod warps
    // of stack buffers sized for the block, so that the slot offsets run
    // here too. As for the tiles kernel, the buffers are allocated once
    // before a loop that will run sequentially (an alloca scope would not
    // survive that loop's lowering), else per iteration, for threads.
    auto allocateBuffers = [&] {
      SmallVector<Value, 6> memrefs;
      for (const Buffer &buffer : buffers)
        memrefs.push_back(memref::AllocaOp::create(
            b, MemRefType::get({warps * buffer.elements}, buffer.element)));
      return memrefs;
    };
    SmallVector<Value, 6> memrefs;
    if (hoistScratch)
      memrefs = allocateBuffers();
    auto loop = scf::ParallelOp::create(
        b, ValueRange{index(0)}, ValueRange{items}, ValueRange{index(1)});
    b.setInsertionPointToStart(loop.getBody());
    memref::AllocaScopeOp scope;
    if (!hoistScratch) {
      scope = memref::AllocaScopeOp::create(b, TypeRange{});
      scope.getBodyRegion().push_back(new Block());
      b.setInsertionPointToStart(&scope.getBodyRegion().front());
      memrefs = allocateBuffers();
    }
    Value item = loop.getInductionVars()[0];
    Warp warp(b, /*emulated=*/true);
    emitWarpItem(warp, shape, item, scratchAt(memrefs, remConst(item, warps)));
    if (scope)
      memref::AllocaScopeReturnOp::create(b, ValueRange{});
    return success();
  }

  // On the GPU the buffers are module globals in the workgroup address
  // space (CUDA's static __shared__ arrays), 16-byte aligned for the rows'
  // vector accesses; kernel outlining copies them into the kernel's module.
  // (Launch attributions would only be aligned to their element type.)
  auto workgroup =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto module = op->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  SmallVector<memref::GlobalOp> globals;
  for (const Buffer &buffer : buffers) {
    auto type = MemRefType::get({warps * buffer.elements}, buffer.element,
                                MemRefLayoutAttrInterface(), workgroup);
    OpBuilder::InsertionGuard guard(b);
    if (globals.empty())
      b.setInsertionPointToStart(module.getBody());
    else
      b.setInsertionPointAfter(globals.back());
    auto global = memref::GlobalOp::create(
        b, (Twine("__rpe_shared_") + buffer.name).str(),
        b.getStringAttr("private"), type, /*initial_value=*/Attribute(),
        /*constant=*/false, b.getI64IntegerAttr(kChunkBytes));
    symbols.insert(global); // renamed if the name is taken
    globals.push_back(global);
  }
  Value one = index(1);
  Value blocks = divConst(add(items, index(warps - 1)), warps);
  auto launch = gpu::LaunchOp::create(b, blocks, one, one,
                                      index(warps * kWarpSize), one, one);
  setItemsPerBlock(warps);
  b.setInsertionPointToStart(&launch.getBody().front());
  // Counted again inside, so that the outlined kernel captures the query,
  // not a count.
  items = mulConst(countWindows(), g.heads);
  Value slot = divConst(launch.getThreadIds().x, kWarpSize);
  Value item = add(mulConst(launch.getBlockIds().x, warps), slot);
  SmallVector<Value, 6> memrefs;
  for (memref::GlobalOp global : globals)
    memrefs.push_back(
        memref::GetGlobalOp::create(b, global.getType(), global.getSymName()));
  WarpScratch scratch = scratchAt(memrefs, slot);
  auto isItem = scf::IfOp::create(
      b, compare(arith::CmpIPredicate::ult, item, items), /*withElse=*/false);
  b.setInsertionPointToStart(&isItem.getThenRegion().front());
  Warp warp(b, /*emulated=*/false);
  emitWarpItem(warp, shape, item, scratch);
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b);
  return success();
}

/// Lanes move token rows in chunks of 8 elements (16 bytes): d / 8 lanes
/// per row, 32 / (d / 8) rows per step of the warp.
struct ChunkLayout {
  static constexpr int64_t width = 8;
  int64_t lanesPerRow, rowsPerStep, activeLanes;
  explicit ChunkLayout(int64_t headDim)
      : lanesPerRow(headDim / width), rowsPerStep(kWarpSize / lanesPerRow),
        activeLanes(rowsPerStep * lanesPerRow) {}
};

/// Chunks of one step loaded before any is stored, so that this many
/// 16-byte loads per lane are in flight.
static constexpr int64_t kStepsInFlight = 8;

SmallVector<Value>
FusedKernelEmitter::loadInputChunk(Warp &warp, const WarpTileShape &shape,
                                   Input which, RowAddress row, Value h,
                                   Value column) {
  int64_t width = ChunkLayout::width;
  SmallVector<Value> chunk = warp.loadChunk(flatInputs[static_cast<int>(which)],
                                            add(row.offset, column), width);
  if (!row.valid)
    return chunk;
  // Padding tokens read their padding row, or zeros.
  SmallVector<Value> padding;
  if (paddingRows.empty()) {
    for (Value part : chunk)
      padding.push_back(arith::ConstantOp::create(
          b, cast<TypedAttr>(b.getZeroAttr(part.getType()))));
  } else {
    for (Value part :
         warp.loadChunk(paddingRows[static_cast<int>(which)],
                        add(mulConst(h, g.headDim), column), width))
      padding.push_back(convertFloat(part, shape.element));
  }
  for (auto [part, pad] : llvm::zip(chunk, padding))
    part = select(row.valid, part, pad);
  return chunk;
}

void FusedKernelEmitter::stageTokenRows(Warp &warp, const WarpTileShape &shape,
                                        Input which, Value w, Value h,
                                        Value first, Value count, int64_t total,
                                        Value dest, Value destBase) {
  int64_t d = g.headDim;
  ChunkLayout layout(d);
  Value lane = warp.laneId();
  Value rowInStep = divConst(lane, layout.lanesPerRow);
  Value column = mulConst(remConst(lane, layout.lanesPerRow), layout.width);
  Value activeLane =
      layout.activeLanes < kWarpSize
          ? compare(arith::CmpIPredicate::ult, lane, index(layout.activeLanes))
          : Value();
  Value lastToken = add(first, arith::SubIOp::create(b, count, index(1)));
  int64_t steps = llvm::divideCeil(total, layout.rowsPerStep);
  // Rows past `count` load the last real row (an address that exists) and
  // keep zeros; rows past `total` (a partial last step) store nothing.
  auto loadStep = [&](Value step) {
    Value r = add(rowInStep, mulConst(step, layout.rowsPerStep));
    Value isRow = compare(arith::CmpIPredicate::ult, r, count);
    Value token = select(isRow, add(first, r), lastToken);
    SmallVector<Value> chunk = loadInputChunk(
        warp, shape, which, rowAddress(w, h, token, which), h, column);
    for (Value &part : chunk)
      part = select(isRow, part,
                    arith::ConstantOp::create(
                        b, cast<TypedAttr>(b.getZeroAttr(part.getType()))));
    return chunk;
  };
  auto storeStep = [&](Value step, ArrayRef<Value> chunk) {
    Value r = add(rowInStep, mulConst(step, layout.rowsPerStep));
    Value mask = activeLane;
    if (total % layout.rowsPerStep != 0) {
      Value inside = compare(arith::CmpIPredicate::ult, r, index(total));
      mask = mask ? arith::AndIOp::create(b, mask, inside).getResult() : inside;
    }
    warp.storeChunk(chunk, dest,
                    add(destBase, add(mulConst(r, shape.rowStride), column)),
                    mask);
  };
  if (warp.isEmulated()) {
    // The host needs no loads in flight: a loop keeps the emulation small.
    forLoop(index(0), index(steps), 1, {}, [&](Value step, ValueRange) {
      storeStep(step, loadStep(step));
      return SmallVector<Value>{};
    });
    return;
  }
  for (int64_t step0 = 0; step0 < steps; step0 += kStepsInFlight) {
    int64_t stepEnd = std::min(steps, step0 + kStepsInFlight);
    SmallVector<SmallVector<Value>> chunks;
    for (int64_t step = step0; step < stepEnd; ++step)
      chunks.push_back(loadStep(index(step)));
    for (int64_t step = step0; step < stepEnd; ++step)
      storeStep(index(step), chunks[step - step0]);
  }
}

void FusedKernelEmitter::emitWarpItem(Warp &warp, const WarpTileShape &shape,
                                      Value item, const WarpScratch &scratch) {
  emitOperandViews();
  Value table = flatten(b, b.getLoc(), op.getTable());

  const int64_t n = g.tokens, d = g.headDim, tableRows = g.tableRows;
  const int64_t keyTiles = shape.keyBlock / 8, channelTiles = d / 8;
  const int64_t stride = shape.rowStride; // of q, k, v rows in shared memory
  Type element = shape.element;
  Value w = divConst(item, g.heads), h = remConst(item, g.heads);
  Value lane = warp.laneId();
  Value group = divConst(lane, 4), quadLane = remConst(lane, 4); // g, t
  Value twiceQuadLane = mulConst(quadLane, 2);                   // 2t
  auto fadd = [&](Value x, Value y) { return arith::AddFOp::create(b, x, y); };
  auto fmul = [&](Value x, Value y) { return arith::MulFOp::create(b, x, y); };
  auto fmax = [&](Value x, Value y) {
    return arith::MaximumFOp::create(b, x, y);
  };
  auto exp2 = [&](Value x) { return math::Exp2Op::create(b, x); };

  // 1. The head's table, times log2 e, and the window's keys and values
  //    into the warp's shared memory.
  Value log2e = warp.constant(kLog2E, f32);
  for (int64_t t0 = 0; t0 < tableRows; t0 += kWarpSize) {
    Value t = add(lane, index(t0));
    Value valid = t0 + kWarpSize > tableRows
                      ? compare(arith::CmpIPredicate::ult, t, index(tableRows))
                      : Value();
    Value entry = toF32(warp.load(table, add(mulConst(t, g.heads), h), valid));
    warp.store(fmul(entry, log2e), scratch.table, add(scratch.tableBase, t),
               valid);
  }
  // Per key: P(j) and its region label, -1 past N (the softmax's -inf),
  // computed once here rather than in every query tile.
  int64_t imageWindows =
      op.getResolution() ? getNumWindows(*op.getResolution(), g.window) : 1;
  Value windowInImage = op.hasShiftMask() ? remConst(w, imageWindows) : Value();
  Type i32 = b.getI32Type();
  auto toI32 = [&](Value v) -> Value {
    Type type = i32;
    if (auto lanes = dyn_cast<VectorType>(v.getType()))
      type = lanes.clone(i32);
    return arith::IndexCastOp::create(b, type, v);
  };
  for (int64_t t0 = 0; t0 < shape.paddedTokens; t0 += kWarpSize) {
    Value t = add(lane, index(t0));
    Value valid =
        t0 + kWarpSize > shape.paddedTokens
            ? compare(arith::CmpIPredicate::ult, t, index(shape.paddedTokens))
            : Value();
    Value clamped = minConst(t, n - 1);
    Value label =
        windowInImage ? regionLabel(windowInImage, clamped) : index(0);
    if (shape.paddedTokens != n)
      label = select(compare(arith::CmpIPredicate::uge, t, index(n)), index(-1),
                     label);
    Value at = add(scratch.keyBase, t);
    warp.store(toI32(tableOffset(clamped)), scratch.keyOffsets, at, valid);
    warp.store(toI32(label), scratch.keyLabels, at, valid);
  }
  stageTokenRows(warp, shape, Input::Key, w, h, index(0), index(n),
                 shape.paddedTokens, scratch.keys, scratch.tokenBase);
  stageTokenRows(warp, shape, Input::Value, w, h, index(0), index(n),
                 shape.paddedTokens, scratch.values, scratch.tokenBase);
  warp.sync();

  Value scaleLog2e =
      warp.constant(op.getScale().convertToDouble() * kLog2E, f32);
  Value maskLog2e =
      warp.constant(op.getMaskValue().convertToDouble() * kLog2E, f32);
  Value zero = warp.constant(0.0, f32);
  Value minusInf = warp.constant(-std::numeric_limits<double>::infinity(), f32);
  Value initialMax = warp.constant(kOnlineSoftmaxInitialMax, f32);

  forLoop(
      index(0), index(shape.queryTiles), 1, {}, [&](Value tile, ValueRange) {
        Value first = mulConst(tile, 16);
        Value rows = arith::MinUIOp::create(
            b, index(16), arith::SubIOp::create(b, index(n), first));
        // 2. The tile's 16 query rows, then their A fragments (16 channels
        //    each): a_i = Q[g + 8 (i/2 % 2), 16 kk + 8 (i/4) + 2t + (i % 2)].
        stageTokenRows(warp, shape, Input::Query, w, h, first, rows, 16,
                       scratch.queries, scratch.queryBase);
        warp.sync();
        auto queryAt = [&](Value row, Value column) {
          return warp.load(
              scratch.queries,
              add(scratch.queryBase, add(mulConst(row, stride), column)));
        };
        SmallVector<SmallVector<Value, 8>> queryFragments(d / 16);
        for (int64_t kk = 0; kk < d / 16; ++kk)
          for (int64_t i = 0; i < 8; ++i)
            queryFragments[kk].push_back(queryAt(
                add(group, index(8 * ((i / 2) % 2))),
                add(twiceQuadLane, index(16 * kk + 8 * (i / 4) + i % 2))));

        // The lane's two rows, g and g + 8, clamped into the window for the
        // table and label arithmetic (rows past N are computed, then dropped).
        SmallVector<Value, 2> rowOffset, rowLabel;
        for (int64_t half = 0; half < 2; ++half) {
          Value row = minConst(add(first, add(group, index(8 * half))), n - 1);
          rowOffset.push_back(toI32(
              add(tableOffset(row), add(scratch.tableBase, index(g.center)))));
          if (windowInImage)
            rowLabel.push_back(toI32(regionLabel(windowInImage, row)));
        }

        // 3. The online softmax over blocks of keys. State: m and l for the two
        //    rows (l per lane: the quad's partial sums), then O's C fragments.
        SmallVector<Value> init = {initialMax, initialMax, zero, zero};
        init.append(4 * channelTiles, zero);
        int64_t blocks = shape.paddedTokens / shape.keyBlock;
        ValueRange state = forLoop(
            index(0), index(blocks), 1, init,
            [&](Value block, ValueRange carried) {
              Value key0 = mulConst(block, shape.keyBlock);
              // S = q kᵀ for 8 keys at a time:
              //   b_i = K[key0 + 8 nj + g, 16 kk + 8 (i/2) + 2t + (i % 2)].
              SmallVector<SmallVector<Value, 4>> scores;
              for (int64_t nj = 0; nj < keyTiles; ++nj) {
                Value keyRow =
                    add(scratch.tokenBase,
                        mulConst(add(key0, add(group, index(8 * nj))), stride));
                SmallVector<Value, 4> acc(4, zero);
                for (int64_t kk = 0; kk < d / 16; ++kk) {
                  SmallVector<Value, 4> keyFragment;
                  for (int64_t i = 0; i < 4; ++i)
                    keyFragment.push_back(warp.load(
                        scratch.keys,
                        add(keyRow,
                            add(twiceQuadLane,
                                index(16 * kk + 8 * (i / 2) + i % 2)))));
                  acc = warp.mma(queryFragments[kk], keyFragment, acc);
                }
                scores.push_back(acc);
              }
              // s = S scale log2e + R[P(i) - P(j) + c] (+ mask) (-inf past N),
              // element c of a tile: row g + 8 (c / 2), key 2t + (c % 2).
              for (int64_t nj = 0; nj < keyTiles; ++nj)
                for (int64_t column = 0; column < 2; ++column) {
                  Value key = add(
                      scratch.keyBase,
                      add(key0, add(twiceQuadLane, index(8 * nj + column))));
                  Value keyOffset = warp.load(scratch.keyOffsets, key);
                  Value keyLabel = windowInImage || shape.paddedTokens != n
                                       ? warp.load(scratch.keyLabels, key)
                                       : Value();
                  Value isPadding = shape.paddedTokens != n
                                        ? compare(arith::CmpIPredicate::slt,
                                                  keyLabel, toI32(index(0)))
                                        : Value();
                  for (int64_t half = 0; half < 2; ++half) {
                    Value &s = scores[nj][2 * half + column];
                    Value bias = warp.load(
                        scratch.table, arith::IndexCastOp::create(
                                           b, warp.laneType(b.getIndexType()),
                                           arith::SubIOp::create(
                                               b, rowOffset[half], keyOffset)));
                    s = math::FmaOp::create(b, s, scaleLog2e, bias);
                    if (windowInImage)
                      s = fadd(s, select(compare(arith::CmpIPredicate::ne,
                                                 rowLabel[half], keyLabel),
                                         maskLog2e, zero));
                    if (isPadding)
                      s = select(isPadding, minusInf, s);
                  }
                }
              // m' = max(m, the block's row max over the quad's 4 lanes);
              // c = 2^(m - m').
              SmallVector<Value, 2> newMax, correction;
              for (int64_t half = 0; half < 2; ++half) {
                Value rowMax = carried[half];
                for (int64_t nj = 0; nj < keyTiles; ++nj)
                  for (int64_t column = 0; column < 2; ++column)
                    rowMax = fmax(rowMax, scores[nj][2 * half + column]);
                rowMax = fmax(rowMax, warp.shuffleXor(rowMax, 1));
                rowMax = fmax(rowMax, warp.shuffleXor(rowMax, 2));
                newMax.push_back(rowMax);
                correction.push_back(
                    exp2(arith::SubFOp::create(b, carried[half], rowMax)));
              }
              // P = 2^(s - m'), rounded to the operand type; l = l c + sum P of
              // the rounded values, so that the weights used are the ones
              // normalized.
              SmallVector<SmallVector<Value, 4>> probabilities;
              SmallVector<Value, 2> sums = {zero, zero};
              for (int64_t nj = 0; nj < keyTiles; ++nj) {
                SmallVector<Value, 4> tileP;
                for (int64_t c = 0; c < 4; ++c) {
                  Value p = convertFloat(exp2(arith::SubFOp::create(
                                             b, scores[nj][c], newMax[c / 2])),
                                         element);
                  sums[c / 2] = fadd(sums[c / 2], toF32(p));
                  tileP.push_back(p);
                }
                probabilities.push_back(tileP);
              }
              SmallVector<Value> next = {newMax[0], newMax[1]};
              for (int64_t half = 0; half < 2; ++half)
                next.push_back(math::FmaOp::create(
                    b, carried[2 + half], correction[half], sums[half]));
              SmallVector<SmallVector<Value, 4>> out(channelTiles);
              for (int64_t nt = 0; nt < channelTiles; ++nt)
                for (int64_t c = 0; c < 4; ++c)
                  out[nt].push_back(
                      fmul(carried[4 + 4 * nt + c], correction[c / 2]));
              // O += P v, 16 keys at a time: P's A fragment is two C fragments
              // of S; b_i = V[key0 + 16 kk + 8 (i/2) + 2t + (i % 2), 8 nt + g].
              for (int64_t kk = 0; kk < shape.keyBlock / 16; ++kk) {
                SmallVector<Value, 8> pFragment(probabilities[2 * kk].begin(),
                                                probabilities[2 * kk].end());
                llvm::append_range(pFragment, probabilities[2 * kk + 1]);
                for (int64_t nt = 0; nt < channelTiles; ++nt) {
                  SmallVector<Value, 4> valueFragment;
                  for (int64_t i = 0; i < 4; ++i) {
                    Value key =
                        add(key0, add(twiceQuadLane,
                                      index(16 * kk + 8 * (i / 2) + i % 2)));
                    valueFragment.push_back(warp.load(
                        scratch.values, add(scratch.tokenBase,
                                            add(mulConst(key, stride),
                                                add(group, index(8 * nt))))));
                  }
                  out[nt] = warp.mma(pFragment, valueFragment, out[nt]);
                }
              }
              for (const SmallVector<Value, 4> &fragment : out)
                next.append(fragment.begin(), fragment.end());
              return next;
            });

        // 4. out = O / l, l summed over the quad. The tile goes through the
        //    query tile's shared memory so that it is stored a token row at a
        //    time, the way the inputs were loaded.
        SmallVector<Value, 2> inverse;
        for (int64_t half = 0; half < 2; ++half) {
          Value sum = state[2 + half];
          sum = fadd(sum, warp.shuffleXor(sum, 1));
          sum = fadd(sum, warp.shuffleXor(sum, 2));
          inverse.push_back(
              arith::DivFOp::create(b, warp.constant(1.0, f32), sum));
        }
        warp.sync();
        for (int64_t nt = 0; nt < channelTiles; ++nt)
          for (int64_t c = 0; c < 4; ++c) {
            Value row = add(group, index(8 * (c / 2)));
            Value column = add(twiceQuadLane, index(8 * nt + c % 2));
            warp.store(
                convertFloat(fmul(state[4 + 4 * nt + c], inverse[c / 2]),
                             element),
                scratch.queries,
                add(scratch.queryBase, add(mulConst(row, stride), column)));
          }
        warp.sync();
        // Rows past the window (or the map) store nothing.
        ChunkLayout layout(d);
        Value rowInStep = divConst(lane, layout.lanesPerRow);
        Value column =
            mulConst(remConst(lane, layout.lanesPerRow), layout.width);
        Value lastToken = add(first, arith::SubIOp::create(b, rows, index(1)));
        for (int64_t step = 0; step * layout.rowsPerStep < 16; ++step) {
          Value r =
              minConst(add(rowInStep, index(step * layout.rowsPerStep)), 15);
          Value isRow =
              compare(arith::CmpIPredicate::ult,
                      add(rowInStep, index(step * layout.rowsPerStep)), rows);
          if (layout.activeLanes < kWarpSize)
            isRow =
                arith::AndIOp::create(b, isRow,
                                      compare(arith::CmpIPredicate::ult, lane,
                                              index(layout.activeLanes)));
          RowAddress outRow =
              outputAddress(w, h, select(isRow, add(first, r), lastToken));
          if (outRow.valid)
            isRow = arith::AndIOp::create(b, isRow, outRow.valid);
          SmallVector<Value> chunk = warp.loadChunk(
              scratch.queries,
              add(scratch.queryBase, add(mulConst(r, stride), column)),
              layout.width);
          warp.storeChunk(chunk, flatOutput, add(outRow.offset, column), isRow);
        }
        warp.sync();
        return SmallVector<Value>{};
      });
}
