//===- TileRows.cpp - rpe-tile-rows ---------------------------------------===//
//
// Outside the GEMMs and the attention, a Swin model is row-wise work on
// `[tokens, channels]` tensors: LayerNorms, residual adds, the gathers of
// rolls and window partitions, the mean pool. Each linalg op at a
// function's top level (on static tensors; not matmuls or convolutions) is
// tiled with upstream's scf::tileConsumerAndFuseProducersUsingSCF: a loop
// over every parallel dimension but the innermost, tile size 1, so that an
// iteration computes one row of the innermost dimension (reductions along
// it stay inside the row). The producers of the row fuse into the loop when
//
//  * they are linalg ops this pass tiles, in the same block;
//  * the row takes its own slice of them (its offsets depend on every
//    loop), not one that every row shares (a broadcast operand);
//  * they go away: each of their users is the root, a producer already
//    fused, or a tile inside the loop.
//
// Consumers are visited before producers, so that a LayerNorm (its
// reductions and the op that normalizes) becomes one loop whose iteration
// reads a row once and writes it once; a producer that does not fuse is
// tiled as a loop of its own afterwards. The loop is an scf.forall (OpenMP
// threads in rpe-cpu-pipeline) when `parallel` is set and the op has at
// least `min-parallel-elements` elements, else an scf.for. Inside the row,
// the loops of an op that are neither its last nor of extent 1 (a mean over
// the rows: a reduction over an outer dimension) are tiled to 1 with
// scf.for, so that every op inside works on a `1 x .. x 1 x C` slice for
// rpe-vectorize-rows.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/TilingInterface.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPETILEROWS
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

/// Whether `op` is a linalg op this pass tiles: static shapes on tensors,
/// and not a product (matmuls and convolutions are the GEMM lowering's or
/// stay loops).
static bool isRowTilable(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !isa<TilingInterface>(op) ||
      !linalgOp.hasPureTensorSemantics())
    return false;
  if (linalgOp.getNumLoops() == 0 || linalgOp.hasDynamicShape())
    return false;
  return !linalg::isaContractionOpInterface(linalgOp) &&
         !linalg::isaConvolutionOpInterface(linalgOp);
}

/// Whether `value` is `iv` or computed from it inside `scope`.
static bool dependsOn(Value value, Value iv, Operation *scope) {
  if (value == iv)
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || !scope->isAncestor(def))
    return false;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return dependsOn(operand, iv, scope);
  });
}

/// The induction variables of the loops (outermost `outer`) around `op`.
static SmallVector<Value> inductionVarsAround(Operation *op, Operation *outer) {
  SmallVector<Value> ivs;
  for (Operation *parent = op->getParentOp(); parent;
       parent = parent->getParentOp()) {
    if (auto loop = dyn_cast<LoopLikeOpInterface>(parent))
      if (std::optional<SmallVector<Value>> loopIvs =
              loop.getLoopInductionVars())
        llvm::append_range(ivs, *loopIvs);
    if (parent == outer)
      break;
  }
  return ivs;
}

/// The outermost op around `op` below `root`'s block.
static Operation *outermostBelow(Operation *op, Block *block) {
  while (op && op->getBlock() != block)
    op = op->getParentOp();
  return op;
}

namespace {
/// Tiles `root` to rows and fuses what produces its rows.
class RowTiler {
public:
  RowTiler(bool parallel, int64_t minParallelElements)
      : parallel(parallel), minParallelElements(minParallelElements) {}

  /// Tiles `root`, or leaves it (success, nothing done) where it has no
  /// outer dimension. Fills `tiledOps` with the ops inside the new loops
  /// and `fused` with the original producers it fused.
  LogicalResult tile(RewriterBase &rewriter, TilingInterface root,
                     SmallVectorImpl<Operation *> &tiledOps,
                     llvm::SetVector<Operation *> &fused);

private:
  bool parallel;
  int64_t minParallelElements;
};
} // namespace

/// The tile sizes of a row: 1 along every parallel loop but the last, the
/// whole extent along the last loop and the reductions (which stay in the
/// row's computation).
static SmallVector<int64_t> rowTileSizes(linalg::LinalgOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> sizes(iterators.size(), 0);
  for (size_t loop = 0; loop + 1 < iterators.size(); ++loop)
    if (iterators[loop] == utils::IteratorType::parallel)
      sizes[loop] = 1;
  return sizes;
}

LogicalResult RowTiler::tile(RewriterBase &rewriter, TilingInterface root,
                             SmallVectorImpl<Operation *> &tiledOps,
                             llvm::SetVector<Operation *> &fused) {
  auto linalgOp = cast<linalg::LinalgOp>(root.getOperation());
  SmallVector<int64_t> sizes = rowTileSizes(linalgOp);
  SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
  int64_t rows = 1;
  for (auto [size, range] : llvm::zip_equal(sizes, ranges))
    if (size != 0)
      rows *= range;
  if (rows == 1)
    return success();
  int64_t elements = rows * ranges.back();

  scf::SCFTilingOptions tiling;
  tiling.setTileSizes(getAsIndexOpFoldResult(rewriter.getContext(), sizes));
  // Threads pay for a fork and a join: small ops run on the caller's.
  bool threads = parallel && elements >= minParallelElements;
  tiling.setLoopType(threads ? scf::SCFTilingOptions::LoopType::ForallOp
                             : scf::SCFTilingOptions::LoopType::ForOp);

  Block *block = root->getBlock();
  llvm::SmallPtrSet<Operation *, 8> cluster = {root.getOperation()};
  scf::SCFTileAndFuseOptions options;
  options.setTilingOptions(tiling);
  options.setFusionControlFn(
      [&](tensor::ExtractSliceOp slice, OpResult producer,
          bool) -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
        Operation *op = producer.getOwner();
        if (op->getBlock() != block || !isRowTilable(op))
          return std::nullopt;
        // A row of the root must take its own slice of the producer, which
        // no other iteration computes: one that every iteration takes whole
        // (a broadcast operand) is computed once, as a root of its own.
        Operation *loops = outermostBelow(slice, block);
        for (Value iv : inductionVarsAround(slice, loops))
          if (llvm::none_of(slice.getMixedOffsets(), [&](OpFoldResult offset) {
                auto value = dyn_cast<Value>(offset);
                return value && dependsOn(value, iv, loops);
              }))
            return std::nullopt;
        // The producer goes away: every other user is in the cluster (the
        // root, producers fused before, their tiles inside the loops).
        for (Operation *user : op->getUsers())
          if (!cluster.contains(user) && !loops->isAncestor(user))
            return std::nullopt;
        cluster.insert(op);
        return scf::SCFTileAndFuseOptions::ControlFnResult{};
      });

  FailureOr<scf::SCFTileAndFuseResult> result =
      scf::tileConsumerAndFuseProducersUsingSCF(rewriter, root, options);
  if (failed(result))
    return failure();
  // The loop is named after the op it computes: its outlined body (a
  // profile's symbol) says which.
  for (LoopLikeOpInterface loop : result->loops)
    loop->setLoc(NameLoc::get(root->getName().getIdentifier(), loop->getLoc()));
  for (OpResult value : root->getResults())
    rewriter.replaceAllUsesWith(value, result->replacements.lookup(value));
  llvm::append_range(tiledOps, result->tiledAndFusedOps);
  fused.insert(result->fusedProducers.begin(), result->fusedProducers.end());
  return success();
}

/// Tiles the loops of `op` (inside a row) that are not its last and not
/// unit, with sequential loops of step 1: a reduction over outer dimensions
/// (a mean over the rows) becomes a loop of row reductions.
static LogicalResult tileOuterLoopsToOne(RewriterBase &rewriter,
                                         TilingInterface op) {
  auto linalgOp = cast<linalg::LinalgOp>(op.getOperation());
  SmallVector<int64_t> ranges = linalgOp.getStaticLoopRanges();
  SmallVector<int64_t> sizes(ranges.size(), 0);
  SmallVector<unsigned> reductions;
  SmallVector<utils::IteratorType> iterators = linalgOp.getIteratorTypesArray();
  bool any = false;
  for (size_t loop = 0; loop + 1 < ranges.size(); ++loop) {
    if (ranges[loop] == 1)
      continue;
    sizes[loop] = 1;
    any = true;
    if (iterators[loop] == utils::IteratorType::reduction)
      reductions.push_back(loop);
  }
  if (!any)
    return success();
  scf::SCFTilingOptions tiling;
  tiling.setTileSizes(getAsIndexOpFoldResult(rewriter.getContext(), sizes));
  tiling.setReductionDims(reductions);
  rewriter.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> result =
      scf::tileUsingSCF(rewriter, op, tiling);
  if (failed(result))
    return failure();
  rewriter.replaceOp(op, result->replacements);
  return success();
}

namespace {
struct RpeTileRowsPass : public rpe::impl::RpeTileRowsBase<RpeTileRowsPass> {
  using Base::Base;

  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    RowTiler tiler(parallel, minParallelElements);
    getOperation()->walk([&](func::FuncOp func) {
      if (func.isExternal())
        return;
      // Consumers first, so that each takes its producers along.
      SmallVector<Operation *> roots;
      for (Operation &op : func.getBody().front())
        if (isRowTilable(&op))
          roots.push_back(&op);
      llvm::SetVector<Operation *> fused;
      SmallVector<Operation *> inner;
      for (Operation *root : llvm::reverse(roots)) {
        if (fused.contains(root))
          continue;
        rewriter.setInsertionPoint(root);
        SmallVector<Operation *> tiled;
        if (failed(tiler.tile(rewriter, cast<TilingInterface>(root), tiled,
                              fused))) {
          root->emitWarning("rpe-tile-rows: not tiled, left to loops");
          continue;
        }
        if (tiled.empty()) {
          inner.push_back(root);
          continue;
        }
        llvm::append_range(inner, tiled);
        fused.insert(root);
      }
      // Fusion leaves the slices of the originals that it fused through
      // unused: they go first, then the originals, users before producers
      // (the last in the block first).
      SmallVector<tensor::ExtractSliceOp> slices;
      func.walk([&](tensor::ExtractSliceOp slice) { slices.push_back(slice); });
      for (tensor::ExtractSliceOp slice : llvm::reverse(slices))
        if (slice->use_empty())
          rewriter.eraseOp(slice);
      SmallVector<Operation *> originals = fused.takeVector();
      llvm::sort(originals, [](Operation *a, Operation *b) {
        return b->isBeforeInBlock(a);
      });
      for (Operation *op : originals)
        if (op->use_empty())
          rewriter.eraseOp(op);
      for (Operation *op : inner)
        if (failed(tileOuterLoopsToOne(rewriter, cast<TilingInterface>(op))))
          op->emitWarning("rpe-tile-rows: outer loops not tiled");
    });
  }
};
} // namespace
