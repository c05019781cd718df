//===- ProfileOps.cpp - rpe-profile-ops -----------------------------------===//
//
// Wraps each op that does work at the top level of a module's public
// functions in calls of the profiling runtime and writes the table of the
// ops (name, location) that the runtime reports with their times
// (lib/Aot/runtime/ProfileRuntime.c). The contract between the two is the
// pass's description (include/Rpe/Passes.td).
//
//===----------------------------------------------------------------------===//

#include "Rpe/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Path.h"

namespace mlir::rpe {
#define GEN_PASS_DEF_RPEPROFILEOPS
#include "Rpe/Passes.h.inc"
} // namespace mlir::rpe

using namespace mlir;

namespace {
// The runtime's functions and the table it reads.
constexpr StringLiteral kBegin = "swin_prof_begin";
constexpr StringLiteral kEnd = "swin_prof_end";
constexpr StringLiteral kFunction = "swin_prof_function";
constexpr StringLiteral kOps = "swin_prof_ops";
constexpr StringLiteral kOpCount = "swin_prof_op_count";
constexpr StringLiteral kCounters = "swin_prof_counters";

/// A timed op's entry in the table.
struct ProfiledOp {
  std::string name;
  std::string location;
};

/// The name of a loop nest that holds no linalg op (the row passes
/// vectorized it) after what its body does.
std::string getVectorLoopName(Operation *loop) {
  bool reduces = false, computes = false;
  loop->walk([&](Operation *op) {
    if (isa<vector::ReductionOp, vector::MultiDimReductionOp>(op))
      reduces = true;
    // Float arithmetic, not the index arithmetic and selects of addressing.
    bool arithmetic =
        isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) &&
        !op->hasTrait<OpTrait::ConstantLike>() && !isa<arith::SelectOp>(op);
    if (arithmetic && llvm::any_of(op->getResultTypes(), [](Type type) {
          return isa<FloatType>(getElementTypeOrSelf(type));
        }))
      computes = true;
  });
  if (reduces)
    return "rows.reduction";
  return computes ? "rows.elementwise" : "rows.gather";
}

/// A loop nest's name: the linalg op it holds (a contraction, else the
/// last: the row passes fuse producers in before their consumer), else
/// what its vector code does.
std::string getLoopNestName(Operation *loop) {
  linalg::LinalgOp main;
  loop->walk([&](linalg::LinalgOp op) {
    if (!main || !linalg::isaContractionOpInterface(main))
      main = op;
  });
  if (main)
    return main->getName().getStringRef().str();
  return getVectorLoopName(loop);
}

/// The table's name of `op`, or nothing for an op that is not timed.
std::optional<std::string> getProfiledName(Operation *op) {
  if (isa<scf::ForOp, scf::ForallOp, scf::ParallelOp>(op))
    return getLoopNestName(op);
  if (isa<linalg::LinalgOp, memref::CopyOp>(op) ||
      isa<rpe::RpeDialect>(op->getDialect()))
    return op->getName().getStringRef().str();
  return std::nullopt;
}

/// `file:line:col` (`file:line` without `column`), without the directory.
std::string formatFileLocation(FileLineColLoc loc, bool column) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::sys::path::filename(loc.getFilename().getValue()) << ":"
     << loc.getLine();
  if (column)
    os << ":" << loc.getColumn();
  return text;
}

/// The innermost file location of `loc` (its first, in walk order), as
/// `file:line`; empty when it has none.
std::string formatFrame(Location loc) {
  auto file = loc->findInstanceOf<FileLineColLoc>();
  return file ? formatFileLocation(file, /*column=*/false) : "";
}

/// A location as the table gives it: short, one line.
std::string formatLocation(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return formatFileLocation(file, /*column=*/true);
  // torch-mlir's FX importer writes an op's Python stack as nested call
  // sites, the innermost frame (torch's linear.py) the callee: its caller
  // (timm's mlp.py:48 or :52) tells fc1 from fc2.
  if (auto callSite = dyn_cast<CallSiteLoc>(loc)) {
    std::string callee = formatFrame(callSite.getCallee());
    std::string caller = formatFrame(callSite.getCaller());
    return caller.empty() ? callee : callee + " at " + caller;
  }
  // A loop named after the op it computes (rpe-tile-rows, the kernels'
  // lowerings) keeps the op's location inside: that says where it is.
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string child = formatLocation(name.getChildLoc());
    return child.empty() ? name.getName().str() : child;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations()) {
      std::string text = formatLocation(part);
      if (!text.empty())
        return text;
    }
    return "";
  }
  if (isa<UnknownLoc>(loc))
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

struct RpeProfileOpsPass
    : public rpe::impl::RpeProfileOpsBase<RpeProfileOpsPass> {
  void runOnOperation() override;

private:
  /// Wraps each timed op at the top level of `func` in begin/end calls and
  /// appends it to `table`.
  void wrapOps(func::FuncOp func, SmallVectorImpl<ProfiledOp> &table);
  /// Declares the runtime's functions and writes the table as globals.
  void emitRuntimeInterface(StringRef function, ArrayRef<ProfiledOp> table);
};
} // namespace

void RpeProfileOpsPass::wrapOps(func::FuncOp func,
                                SmallVectorImpl<ProfiledOp> &table) {
  OpBuilder b(func.getContext());
  for (Operation &op : llvm::make_early_inc_range(func.getOps())) {
    std::optional<std::string> name = getProfiledName(&op);
    if (!name)
      continue;
    Location loc = op.getLoc();
    b.setInsertionPoint(&op);
    Value id = arith::ConstantIntOp::create(b, loc, table.size(), 32);
    func::CallOp::create(b, loc, kBegin, TypeRange(), id);
    b.setInsertionPointAfter(&op);
    func::CallOp::create(b, loc, kEnd, TypeRange(), id);
    table.push_back({std::move(*name), formatLocation(loc)});
  }
}

void RpeProfileOpsPass::emitRuntimeInterface(StringRef function,
                                             ArrayRef<ProfiledOp> table) {
  ModuleOp module = getOperation();
  MLIRContext *context = module.getContext();
  Location loc = module.getLoc();
  auto b = OpBuilder::atBlockEnd(module.getBody());
  auto i8 = b.getI8Type(), i32 = b.getI32Type(), i64 = b.getI64Type();
  for (StringRef callee : {kBegin, kEnd}) {
    auto declaration =
        func::FuncOp::create(b, loc, callee, b.getFunctionType({i32}, {}));
    declaration.setPrivate();
  }
  // Hidden: the library's own table, never bound to another library's.
  auto createGlobal = [&](StringRef name, Type type, bool isConstant,
                          Attribute value) {
    auto global = LLVM::GlobalOp::create(b, loc, type, isConstant,
                                         LLVM::Linkage::External, name, value);
    global.setVisibility_(LLVM::Visibility::Hidden);
  };
  auto createString = [&](StringRef name, StringRef bytes) {
    createGlobal(name, LLVM::LLVMArrayType::get(i8, bytes.size()),
                 /*isConstant=*/true, b.getStringAttr(bytes));
  };
  createString(kFunction, (function + Twine('\0')).str());
  std::string ops;
  for (const ProfiledOp &op : table)
    ops += op.name + '\0' + op.location + '\0';
  createString(kOps, ops);
  createGlobal(kOpCount, i32, /*isConstant=*/true,
               b.getI32IntegerAttr(table.size()));
  auto counter = LLVM::LLVMStructType::getLiteral(context, {i64, i64});
  createGlobal(kCounters, LLVM::LLVMArrayType::get(counter, table.size()),
               /*isConstant=*/false, LLVM::ZeroAttr::get(context));
}

void RpeProfileOpsPass::runOnOperation() {
  ModuleOp module = getOperation();
  for (StringRef name : {kBegin, kEnd, kFunction, kOps, kOpCount, kCounters})
    if (Operation *symbol = SymbolTable::lookupSymbolIn(module, name)) {
      symbol->emitError("@")
          << name << " is the profiling runtime's: the module cannot be "
          << "profiled";
      return signalPassFailure();
    }

  SmallVector<ProfiledOp> table;
  std::string first;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal() || !func.isPublic())
      continue;
    size_t before = table.size();
    wrapOps(func, table);
    if (first.empty() && table.size() > before)
      first = func.getName().str();
  }
  emitRuntimeInterface(first, table);
}
