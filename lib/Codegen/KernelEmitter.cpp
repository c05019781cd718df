//===- KernelEmitter.cpp - what the fused kernels share -------------------===//
//
// The context every kernel is emitted in: flat views of the operands,
// vector loads and stores in the element type, loops, the loop or launch
// over the (window, head) items, and the addressing of token rows, table
// offsets and region labels that every kernel (tiles, rows, warps)
// computes the same way.
//
//===----------------------------------------------------------------------===//

#include "KernelEmitter.h"

#include "Rpe/FeatureMapAddressing.h"
#include "Rpe/WindowGeometry.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::rpe;
using namespace mlir::rpe::detail;

namespace mlir::rpe::detail {

Value flatten(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  Value flat = memref::CollapseShapeOp::create(
      b, loc, memref, ArrayRef<ReassociationIndices>{all});
  auto dynamic = MemRefType::get(
      {ShapedType::kDynamic}, type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, {1}));
  return memref::CastOp::create(b, loc, dynamic, flat);
}

KernelEmitter::KernelEmitter(ImplicitLocOpBuilder &b,
                             FusedAttentionOpInterface op,
                             const KernelGeometry &g)
    : b(b), op(op), g(g), f32(b.getF32Type()),
      vecType(VectorType::get({g.lanes}, b.getF32Type())),
      computeType(VectorType::get({g.computeLanes}, b.getF32Type())) {
  if (op.hasTokenLayout())
    featureMap.emplace(*op.getImage(), g.window, *op.getShift(),
                       op.getPadding(), op.getPartition());
}

Value KernelEmitter::convertFloat(Value value, Type element) {
  Type type = value.getType();
  Type target = element;
  if (auto vector = dyn_cast<VectorType>(type))
    target = vector.clone(element);
  Type from = getElementTypeOrSelf(type);
  if (from == element)
    return value;
  if (from.getIntOrFloatBitWidth() < element.getIntOrFloatBitWidth())
    return arith::ExtFOp::create(b, target, value);
  return arith::TruncFOp::create(b, target, value);
}

Value KernelEmitter::toI32(Value v) {
  Type type = b.getI32Type();
  if (auto lanes = dyn_cast<VectorType>(v.getType()))
    type = lanes.clone(type);
  return arith::IndexCastOp::create(b, type, v);
}

void KernelEmitter::emitFlatViews() {
  emitOperandViews(/*withPaddingRows=*/false);
  if (!featureMap || !featureMap->isPadded())
    return;
  if (!op.getPaddingValues().empty()) {
    for (Value pad : op.getPaddingValues())
      paddingRows.push_back(flatten(b, b.getLoc(), pad));
    return;
  }
  // No padding values: padded tokens are zeros.
  Type element = getElementTypeOrSelf(op.getQuery().getType());
  int64_t channels = g.heads * g.headDim;
  Value zeros =
      memref::AllocaOp::create(b, MemRefType::get({channels}, element));
  Value zero = arith::ConstantOp::create(b, b.getFloatAttr(element, 0.0));
  forLoop(index(0), index(channels), 1, {}, [&](Value c, ValueRange) {
    memref::StoreOp::create(b, zero, zeros, ValueRange{c});
    return SmallVector<Value>{};
  });
  Value row = flatten(b, b.getLoc(), zeros);
  paddingRows.assign(3, row);
}

KernelEmitter::Row KernelEmitter::inputRow(Input which, Value w,
                                                     Value h, Value token) {
  Value flat = flatInputs[static_cast<int>(which)];
  RowAddress address = rowAddress(w, h, token, which);
  if (!address.valid)
    return {flat, address.offset};
  // Padding tokens read their padding row.
  return {arith::SelectOp::create(b, address.valid, flat,
                                  paddingRows[static_cast<int>(which)]),
          arith::SelectOp::create(b, address.valid, address.offset,
                                  mulConst(h, g.headDim))};
}

KernelEmitter::Row KernelEmitter::outputRow(Value w, Value h,
                                                      Value token,
                                                      Value discard,
                                                      Value flat) {
  if (!flat)
    flat = flatOutput;
  RowAddress address = outputAddress(w, h, token);
  if (!address.valid)
    return {flat, address.offset};
  // Padding tokens are cropped: their rows go to a scratch row.
  return {arith::SelectOp::create(b, address.valid, flat, discard),
          arith::SelectOp::create(b, address.valid, address.offset, index(0))};
}

Value KernelEmitter::loadVector(Value memref, ValueRange indices,
                                     int64_t validLanes, int64_t width) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  auto type = VectorType::get({width}, element);
  if (validLanes >= width)
    return toF32(vector::LoadOp::create(b, type, memref, indices));
  Value mask =
      vector::CreateMaskOp::create(b, VectorType::get({width}, b.getI1Type()),
                                   ValueRange{index(validLanes)});
  Value zero = arith::ConstantOp::create(
      b, DenseElementsAttr::get(type, b.getFloatAttr(element, 0.0)));
  return toF32(
      vector::MaskedLoadOp::create(b, type, memref, indices, mask, zero));
}

void KernelEmitter::storeVector(Value value, Value memref,
                                     ValueRange indices, int64_t validLanes,
                                     int64_t width) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  if (!element.isF32())
    value =
        arith::TruncFOp::create(b, VectorType::get({width}, element), value);
  if (validLanes >= width) {
    vector::StoreOp::create(b, value, memref, indices);
    return;
  }
  Value mask =
      vector::CreateMaskOp::create(b, VectorType::get({width}, b.getI1Type()),
                                   ValueRange{index(validLanes)});
  vector::MaskedStoreOp::create(b, memref, indices, mask, value);
}

ValueRange KernelEmitter::forLoop(
    Value lb, Value ub, int64_t step, ValueRange init,
    function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  auto loop = scf::ForOp::create(b, lb, ub, index(step), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  SmallVector<Value> next =
      body(loop.getInductionVar(), loop.getRegionIterArgs());
  if (loop.getBody()->mightHaveTerminator())
    loop.getBody()->getTerminator()->erase();
  b.setInsertionPointToEnd(loop.getBody());
  scf::YieldOp::create(b, next);
  return loop.getResults();
}

void KernelEmitter::forRowBlocks(Value count, int64_t blockRows,
                                      function_ref<void(Value, int64_t)> body) {
  Value zero = index(0);
  Value full = count;
  std::optional<int64_t> known = getConstantIntValue(count);
  // A known count is split into blocks of even size: 49 rows in blocks of
  // at most 8 are 7 x 7, not 6 x 8 and a single row, whose micro-kernel
  // would be one long chain of dependent FMAs.
  if (known && *known > 0)
    blockRows = llvm::divideCeil(*known, llvm::divideCeil(*known, blockRows));
  if (blockRows > 1)
    full = known ? index(*known - *known % blockRows)
                 : arith::SubIOp::create(b, count, remConst(count, blockRows));
  forLoop(zero, full, blockRows, {}, [&](Value row, ValueRange) {
    body(row, blockRows);
    return SmallVector<Value>{};
  });
  if (blockRows == 1)
    return;
  // A known count's remainder is one block of its own size (a micro-kernel
  // of fewer rows, not that many single rows).
  if (known) {
    if (*known % blockRows)
      body(full, *known % blockRows);
    return;
  }
  forLoop(full, count, 1, {}, [&](Value row, ValueRange) {
    body(row, 1);
    return SmallVector<Value>{};
  });
}

Value KernelEmitter::cosineHeadScale(Value h) {
  if (!op.isCosine())
    return nullptr;
  // Swin clamps the learned scale at ln(1 / 0.01) before the exponential:
  // the scores' factor never exceeds 100. minimumf keeps a NaN scale NaN,
  // as torch.clamp does.
  Value logitScale = loadScalar(op.getLogitScale(), {h});
  Value clamped = arith::MinimumFOp::create(
      b, logitScale,
      arith::ConstantOp::create(b, b.getF32FloatAttr(std::log(100.0))));
  return math::ExpOp::create(b, clamped);
}

Value KernelEmitter::reciprocalNorm(Value sumOfSquares) {
  // F.normalize divides by max(|x|, eps): a zero row (a padding token
  // without padding values, say) stays zero instead of becoming NaN.
  // Lane-polymorphic: a warp's lanes are a vector on the host.
  Value norm = math::SqrtOp::create(b, sumOfSquares);
  Value eps = arith::ConstantOp::create(b, b.getF32FloatAttr(1e-12));
  matchLanes(norm, eps);
  norm = arith::MaximumFOp::create(b, norm, eps);
  Value one = arith::ConstantOp::create(b, b.getF32FloatAttr(1.0));
  matchLanes(one, norm);
  return arith::DivFOp::create(b, one, norm);
}

Value KernelEmitter::tableOffset(Value token) {
  Value offset = index(0);
  for (int64_t a = g.window.size() - 1; a >= 0; --a) {
    Value coord = a == 0 ? token : remConst(token, g.window[a]);
    offset = add(offset, mulConst(coord, g.tableStrides[a]));
    if (a > 0)
      token = divConst(token, g.window[a]);
  }
  return offset;
}

Value KernelEmitter::gridTableOffset(Value token) {
  if (!g.classToken)
    return tableOffset(token);
  Value one = index(1);
  matchLanes(token, one);
  return tableOffset(
      arith::SubIOp::create(b, arith::MaxUIOp::create(b, token, one), one));
}

Value KernelEmitter::classTokenEntry(Value rowIsClass, Value keyIsClass,
                                     Value grid, Value base) {
  if (!g.classToken)
    return grid;
  Value classToToken = add(base, index(g.gridTableRows));
  Value classRow =
      select(keyIsClass, add(classToToken, index(2)), classToToken);
  Value tokenRow = select(keyIsClass, add(classToToken, index(1)), grid);
  return select(rowIsClass, classRow, tokenRow);
}

KernelEmitter::RowAddress
KernelEmitter::rowAddress(Value w, Value h, Value token, Input which) {
  if (!featureMap) // [b, h, t, e]
    return {
        mulConst(add(mulConst(add(mulConst(w, g.heads), h), g.tokens), token),
                 g.headDim),
        Value()};
  bool packed = op.getPackedQkv();
  return mapRowAddress(w, h, token, packed ? 3 : 1,
                       packed ? static_cast<int64_t>(which) : 0);
}

KernelEmitter::RowAddress
KernelEmitter::mapRowAddress(Value w, Value h, Value token, int64_t parts,
                                  int64_t part) {
  // [image, position, (part, h, e)]: `parts` rows of C channels per token.
  TokenSource source;
  if (tokenPositionTable) {
    int64_t perImage = featureMap->windowsPerImage();
    source.image = divConst(w, perImage);
    Value position = memref::LoadOp::create(
        b, tokenPositionTable, ValueRange{remConst(w, perImage), token});
    if (featureMap->isPadded()) {
      Value zero = arith::ConstantOp::create(b, b.getI32IntegerAttr(0));
      source.valid = arith::CmpIOp::create(b, arith::CmpIPredicate::sge,
                                           position, zero);
      position = select(source.valid, position, zero);
    }
    source.position =
        arith::IndexCastOp::create(b, b.getIndexType(), position);
  } else {
    source = locateToken(b, b.getLoc(), *featureMap, w, token);
  }
  int64_t channels = g.heads * g.headDim;
  Value offset =
      add(mulConst(add(mulConst(source.image, featureMap->tokensPerImage()),
                       source.position),
                   parts * channels),
          add(mulConst(h, g.headDim), index(part * channels)));
  return {offset, source.valid};
}

KernelEmitter::RowAddress
KernelEmitter::outputAddress(Value w, Value h, Value token) {
  if (featureMap)
    return mapRowAddress(w, h, token, /*parts=*/1, /*part=*/0);
  if (!op.hasMergedHeadsResult())
    return rowAddress(w, h, token);
  // [b, t, h * d + e]
  return {add(mulConst(add(mulConst(w, g.tokens), token), g.heads * g.headDim),
              mulConst(h, g.headDim)),
          Value()};
}

Value KernelEmitter::loadInputElement(Input which, RowAddress row, Value h,
                                           int64_t e) {
  auto loadAt = [&](Value memref, Value offset) {
    return toF32(memref::LoadOp::create(b, memref, offset));
  };
  Value value =
      loadAt(flatInputs[static_cast<int>(which)], add(row.offset, index(e)));
  if (!row.valid)
    return value;
  Value padding = arith::ConstantOp::create(b, b.getF32FloatAttr(0.0));
  if (!paddingRows.empty())
    padding = loadAt(paddingRows[static_cast<int>(which)],
                     add(mulConst(h, g.headDim), index(e)));
  return select(row.valid, value, padding);
}

Value KernelEmitter::countWindows() {
  Value windows = memref::DimOp::create(b, op.getQuery(), 0);
  if (!featureMap)
    return windows;
  return mulConst(windows, getNumWindows(*op.getResolution(), g.window));
}

Value KernelEmitter::holdsOneRegion(Value wi) {
  return compare(arith::CmpIPredicate::eq, regionLabel(wi, index(0)),
                 regionLabel(wi, index(g.tokens - 1)));
}

SmallVector<Value> KernelEmitter::maskedUnlessOneRegion(
    Value oneRegion, ValueRange scores,
    function_ref<SmallVector<Value>(ValueRange)> addMask) {
  auto ifOneRegion = scf::IfOp::create(b, scores.getTypes(), oneRegion,
                                       /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&ifOneRegion.getThenRegion().front());
  scf::YieldOp::create(b, scores);
  b.setInsertionPointToStart(&ifOneRegion.getElseRegion().front());
  scf::YieldOp::create(b, addMask(scores));
  return SmallVector<Value>(ifOneRegion.getResults());
}

Value KernelEmitter::maskWindow(Value w) {
  // The shift's labels repeat per image; an explicit mask per its first
  // extent.
  if (Value mask = op.getMask())
    return remConst(w, cast<ShapedType>(mask.getType()).getDimSize(0));
  if (op.hasShiftMask())
    return remConst(w, getNumWindows(*op.getResolution(), g.window));
  return Value();
}

void KernelEmitter::emitItemLoop(ItemLoop kind,
                                 function_ref<void()> allocateScratch,
                                 function_ref<void(Value, Value)> body) {
  Value items = countItems();
  OpBuilder::InsertionGuard guard(b);
  if (kind == ItemLoop::Sequential) {
    if (allocateScratch)
      allocateScratch();
    auto loop = scf::ForOp::create(b, index(0), items, index(1));
    RpeDialect::ItemLoopAttrHelper(b.getContext())
        .setAttr(loop, b.getUnitAttr());
    b.setInsertionPoint(loop.getBody()->getTerminator());
    body(loop.getInductionVar(), items);
    return;
  }
  if (kind == ItemLoop::ParallelHoistedScratch && allocateScratch)
    allocateScratch();
  auto loop = scf::ParallelOp::create(b, ValueRange{index(0)},
                                      ValueRange{items}, ValueRange{index(1)});
  RpeDialect::ItemLoopAttrHelper(b.getContext()).setAttr(loop, b.getUnitAttr());
  b.setInsertionPointToStart(loop.getBody());
  if (kind == ItemLoop::ParallelHoistedScratch || !allocateScratch) {
    body(loop.getInductionVars()[0], items);
    return;
  }
  // Each iteration's scratch lives in its own scope, released at its end.
  auto scope = memref::AllocaScopeOp::create(b, TypeRange{});
  scope.getBodyRegion().push_back(new Block());
  b.setInsertionPointToStart(&scope.getBodyRegion().front());
  allocateScratch();
  body(loop.getInductionVars()[0], items);
  memref::AllocaScopeReturnOp::create(b, ValueRange{});
}

void KernelEmitter::emitItemLaunch(int64_t itemsPerBlock,
                                   int64_t threadsPerItem,
                                   function_ref<void(Value)> inBlock,
                                   function_ref<void(Value, Value)> body,
                                   int64_t dynamicSharedBytes) {
  Value items = countItems();
  Value one = index(1);
  Value blocks =
      itemsPerBlock == 1
          ? items
          : divConst(add(items, index(itemsPerBlock - 1)), itemsPerBlock);
  Value dynamicShared =
      dynamicSharedBytes
          ? arith::ConstantOp::create(
                b,
                b.getI32IntegerAttr(static_cast<int32_t>(dynamicSharedBytes)))
                .getResult()
          : Value();
  auto launch = gpu::LaunchOp::create(b, blocks, one, one,
                                      index(itemsPerBlock * threadsPerItem),
                                      one, one, dynamicShared);
  // Hosts that launch the kernel themselves (swin-aot's runtime) size the
  // grid from the items per block.
  RpeDialect::ItemsPerBlockAttrHelper(b.getContext())
      .setAttr(op->getParentOfType<FunctionOpInterface>(),
               b.getI64IntegerAttr(itemsPerBlock));
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&launch.getBody().front());
  Value thread = launch.getThreadIds().x;
  if (itemsPerBlock == 1) {
    // As many blocks as items: every block has its item, in slot 0.
    if (inBlock)
      inBlock(index(0));
    body(launch.getBlockIds().x, thread);
  } else {
    // Counted again inside, so that the outlined kernel captures the
    // query, not a count.
    items = countItems();
    Value slot = divConst(thread, threadsPerItem);
    Value item = add(mulConst(launch.getBlockIds().x, itemsPerBlock), slot);
    if (inBlock)
      inBlock(slot);
    auto isItem = scf::IfOp::create(
        b, compare(arith::CmpIPredicate::ult, item, items), /*withElse=*/false);
    OpBuilder::InsertionGuard inItem(b);
    b.setInsertionPointToStart(&isItem.getThenRegion().front());
    body(item, thread);
  }
  b.setInsertionPointToEnd(&launch.getBody().front());
  gpu::TerminatorOp::create(b);
}

SharedLayout layoutSharedBuffers(ArrayRef<SharedBuffer> buffers) {
  SharedLayout layout;
  for (const SharedBuffer &buffer : buffers) {
    int64_t offset = llvm::alignTo(layout.bytes, buffer.alignment);
    layout.offsets.push_back(offset);
    layout.bytes =
        offset + buffer.elements * buffer.element.getIntOrFloatBitWidth() / 8;
  }
  return layout;
}

SharedMemory
KernelEmitter::createSharedBuffers(ArrayRef<SharedBuffer> buffers) {
  SharedMemory shared;
  shared.buffers.assign(buffers.begin(), buffers.end());
  shared.layout = layoutSharedBuffers(buffers);
  if (shared.layout.bytes > kStaticSharedBytesPerBlock) {
    shared.dynamicBytes = shared.layout.bytes;
    return shared;
  }
  auto workgroup =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto module = op->getParentOfType<ModuleOp>();
  SymbolTable symbols(module);
  for (const SharedBuffer &buffer : buffers) {
    auto type = MemRefType::get({buffer.elements}, buffer.element,
                                MemRefLayoutAttrInterface(), workgroup);
    OpBuilder::InsertionGuard guard(b);
    if (shared.globals.empty())
      b.setInsertionPointToStart(module.getBody());
    else
      b.setInsertionPointAfter(shared.globals.back());
    auto global = memref::GlobalOp::create(
        b, (Twine("__rpe_shared_") + buffer.name).str(),
        b.getStringAttr("private"), type, /*initial_value=*/Attribute(),
        /*constant=*/false, b.getI64IntegerAttr(buffer.alignment));
    symbols.insert(global); // renamed if the name is taken
    shared.globals.push_back(global);
  }
  return shared;
}

SmallVector<Value> KernelEmitter::getSharedBuffers(const SharedMemory &shared) {
  if (!shared.dynamicBytes)
    return llvm::map_to_vector(shared.globals,
                               [&](memref::GlobalOp global) -> Value {
                                 return memref::GetGlobalOp::create(
                                     b, global.getType(), global.getSymName());
                               });
  // The block's dynamic shared memory is aligned to 16 bytes (as the
  // NVVM lowering declares it), the most a buffer asks for.
  auto workgroup =
      gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value bytes = gpu::DynamicSharedMemoryOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                         MemRefLayoutAttrInterface(), workgroup));
  SmallVector<Value> views;
  for (auto [buffer, offset] :
       llvm::zip_equal(shared.buffers, shared.layout.offsets)) {
    assert(buffer.alignment <= 16 && "dynamic shared memory is 16-aligned");
    auto type = MemRefType::get({buffer.elements}, buffer.element,
                                MemRefLayoutAttrInterface(), workgroup);
    views.push_back(
        memref::ViewOp::create(b, type, bytes, index(offset), ValueRange{}));
  }
  return views;
}

/// A constant i32 table as a private global of the module (one per
/// distinct table, found again by its contents), read by memref.get_global.
Value KernelEmitter::constantTable(StringRef prefix,
                                        ArrayRef<int64_t> shape,
                                        ArrayRef<int32_t> values) {
  auto module = op->getParentOfType<ModuleOp>();
  auto type = MemRefType::get(shape, b.getI32Type());
  auto tensorType =
      RankedTensorType::get(type.getShape(), type.getElementType());
  auto value = DenseElementsAttr::get(tensorType, values);
  for (auto global : module.getOps<memref::GlobalOp>())
    if (global.getType() == type && global.getConstant() &&
        global.getInitialValueAttr() == value)
      return memref::GetGlobalOp::create(b, type, global.getSymName());
  std::string name = prefix.str();
  for (int suffix = 1; module.lookupSymbol(name); ++suffix)
    name = (prefix + "_" + Twine(suffix)).str();
  memref::GlobalOp global;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    global = memref::GlobalOp::create(b, name, b.getStringAttr("private"), type,
                                      value, /*constant=*/true,
                                      b.getI64IntegerAttr(64));
  }
  return memref::GetGlobalOp::create(b, type, global.getSymName());
}

/// The image position of every window token of a feature map, a constant
/// [windows per image, N] table (-1: padding), so that the many row
/// addresses of the kernel (q's rows in the products, four prefetched rows
/// and the output row per query row, the packed k and v) are a load, not
/// the shift, padding and partition arithmetic; that arithmetic where the
/// table would be too large.
void KernelEmitter::emitTokenPositions() {
  if (!featureMap ||
      featureMap->windowsPerImage() * g.tokens > kMaxConstantElements)
    return;
  SmallVector<int32_t> positions =
      tokenPositions(b.getContext(), *featureMap);
  if (positions.empty())
    return;
  tokenPositionTable =
      constantTable("__rpe_token_positions",
                    {featureMap->windowsPerImage(), g.tokens}, positions);
}

void KernelEmitter::emitOperandViews(bool withPaddingRows) {
  for (Value input : {op.getQuery(), op.getKey(), op.getValue()})
    flatInputs.push_back(flatten(b, b.getLoc(), input));
  flatOutput = flatten(b, b.getLoc(), op.getAttentionOutput());
  if (withPaddingRows)
    for (Value pad : op.getPaddingValues())
      paddingRows.push_back(flatten(b, b.getLoc(), pad));
}

Value KernelEmitter::regionLabel(Value wi, Value token) {
  ArrayRef<int64_t> resolution = *op.getResolution();
  ArrayRef<int64_t> shift = *op.getShift();
  int64_t rank = g.window.size();
  Value label = index(0);
  Value windowRest = wi, tokenRest = token;
  int64_t weight = 1;
  for (int64_t a = rank - 1; a >= 0; --a) {
    int64_t grid = resolution[a] / g.window[a];
    Value windowCoord = a == 0 ? windowRest : remConst(windowRest, grid);
    Value tokenCoord = a == 0 ? tokenRest : remConst(tokenRest, g.window[a]);
    if (a > 0) {
      windowRest = divConst(windowRest, grid);
      tokenRest = divConst(tokenRest, g.window[a]);
    }
    Value p = add(mulConst(windowCoord, g.window[a]), tokenCoord);
    auto below = [&](int64_t bound) {
      return compare(arith::CmpIPredicate::ult, p, index(bound));
    };
    Value axisLabel =
        select(below(resolution[a] - g.window[a]), index(0),
               select(below(resolution[a] - shift[a]), index(1), index(2)));
    label = add(label, mulConst(axisLabel, weight));
    weight *= 3;
  }
  return label;
}

} // namespace mlir::rpe::detail
