//===- Passes.h - rpe passes and pipelines ----------------------*- C++ -*-===//

#ifndef RPE_PASSES_H
#define RPE_PASSES_H

#include "Rpe/RpeOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::rpe {

#define GEN_PASS_DECL
#include "Rpe/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "Rpe/Passes.h.inc"

/// Replaces `op` (an rpe op with a folder) by the constant its folder
/// computes from its constant operands. Fails, leaving the IR untouched,
/// when the value is not known at compile time.
LogicalResult replaceWithFoldedConstant(RewriterBase &rewriter, Operation *op);

/// Options of `rpe-cpu-pipeline`.
struct CpuPipelineOptions : public PassPipelineOptions<CpuPipelineOptions> {
  PassOptions::Option<bool> fuse{
      *this, "fuse",
      llvm::cl::desc("Fuse the bias gather and the mask into the softmax "
                     "(false: the unfused reference path)"),
      llvm::cl::init(true)};
  PassOptions::Option<int64_t> vectorWidth{
      *this, "vector-width",
      llvm::cl::desc("f32 lanes per vector in the fused kernel"),
      llvm::cl::init(8)};
  PassOptions::Option<bool> parallel{
      *this, "parallel",
      llvm::cl::desc("Run windows x heads in parallel through OpenMP"),
      llvm::cl::init(true)};
};

/// Builds `rpe-cpu-pipeline`: rpe ops to the LLVM dialect.
void buildCpuPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

/// Registers the passes and the named pipelines of this project.
void registerRpePassesAndPipelines();

} // namespace mlir::rpe

#endif // RPE_PASSES_H
