//===- Warp.h - the primitives of a warp program ----------------*- C++ -*-===//
//
// The GPU kernels that work a warp at a time (WarpKernel.cpp, the forward
// on tensor cores; GpuBackwardKernel.cpp, the gradient) are written once,
// on the primitives of the Warp class: a lane value is a scalar on the GPU
// and a vector of the warp's 32 lanes on the host, where the warp is
// emulated (SIMT as SIMD). Loads and stores, shuffles, the warp's barrier
// and mma.sync (with PTX's m16n8k16 fragment layouts, MmaLayout: the one
// place they are written) differ between the two; the kernels' code does
// not. Private to lib/Codegen.
//
//===----------------------------------------------------------------------===//

#ifndef RPE_CODEGEN_WARP_H
#define RPE_CODEGEN_WARP_H

#include "KernelEmitter.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <map>

namespace mlir::rpe::detail {

inline constexpr int64_t kWarpSize = 32;
/// Rows move between memories in chunks of this many bytes per lane.
inline constexpr int64_t kChunkBytes = 16;

/// A lane's elements of one mma.sync operand or accumulator.
using Fragment = SmallVector<Value, 8>;
/// An f32 operand fragment as the bf16 terms that stand for it on the
/// tensor cores (Warp::splitIntoTerms); one term: the fragment itself.
using OperandTerms = SmallVector<Fragment, 3>;

/// A row or column index within an mma fragment's matrix, as a lane
/// computes it: its group g = lane / 4 or its pair 2t = 2 (lane % 4), plus
/// a constant.
struct LaneCoordinate {
  enum class Term { Group, Pair } term;
  int64_t offset;

  int64_t at(int64_t lane) const {
    return (term == Term::Group ? lane / 4 : 2 * (lane % 4)) + offset;
  }
  bool operator==(const LaneCoordinate &other) const {
    return term == other.term && offset == other.offset;
  }
};

/// Where element i of a lane's fragment sits in its matrix.
struct FragmentElement {
  LaneCoordinate row, column;
};

/// PTX's fragment layouts of mma.m16n8k16 with f16/bf16 operands and f32
/// accumulators: A 16 x 16 (row major, 8 elements per lane), B 16 x 8 (k x
/// n, 4 per lane), C and D 16 x 8 (4 per lane).
struct MmaLayout {
  static constexpr int64_t aElements = 8, bElements = 4, cElements = 4;
  using Term = LaneCoordinate::Term;

  /// a_i = A[g + 8 ((i / 2) % 2), 2t + (i % 2) + 8 (i / 4)]
  static FragmentElement a(int64_t i) {
    return {{Term::Group, 8 * ((i / 2) % 2)},
            {Term::Pair, i % 2 + 8 * (i / 4)}};
  }
  /// b_i = B[2t + (i % 2) + 8 (i / 2), g]
  static FragmentElement b(int64_t i) {
    return {{Term::Pair, i % 2 + 8 * (i / 2)}, {Term::Group, 0}};
  }
  /// c_i = C[g + 8 (i / 2), 2t + (i % 2)]
  static FragmentElement c(int64_t i) {
    return {{Term::Group, 8 * (i / 2)}, {Term::Pair, i % 2}};
  }

  /// Which of the lane's two rows of C (g, g + 8) element i is in.
  static int64_t rowHalf(int64_t i) { return c(i).row.offset / 8; }

  /// The elements of C ordered by column: those of one column (key) in
  /// turn.
  static SmallVector<int64_t, cElements> cElementsByColumn() {
    SmallVector<int64_t, cElements> order;
    for (int64_t i = 0; i < cElements; ++i)
      for (int64_t j = 0; j < cElements; ++j)
        if (c(j).column == c(i).column && !llvm::is_contained(order, j))
          order.push_back(j);
    return order;
  }

  /// Whether the C fragments of two adjacent 8-column tiles, in order, are
  /// the A fragment of their 16 columns: then P goes from the scores'
  /// accumulators to the next mma's A operand without a shuffle.
  static bool cPairIsA() {
    for (int64_t i = 0; i < aElements; ++i) {
      FragmentElement fromA = a(i), fromC = c(i % cElements);
      fromC.column.offset += 8 * (i / cElements);
      if (!(fromA.row == fromC.row && fromA.column == fromC.column))
        return false;
    }
    return true;
  }
};

/// The primitives of a warp program. A lane value is a scalar on the GPU
/// (each thread holds its own) and a vector<32 x T> in the host emulation.
/// Uniform values (loop counters, token addresses) are scalars in both; the
/// lane-polymorphic index helpers of KernelEmitter mix the two.
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

  /// A uniform value as a lane value: the value itself on the GPU, where
  /// each lane holds its copy; a splat on the host.
  Value broadcast(Value uniform) { return emulated ? lanes(uniform) : uniform; }

  /// memref[index] at a uniform index, as a lane value: on the GPU each
  /// lane loads it (a broadcast from shared memory), on the host one scalar
  /// load.
  Value loadUniform(Value memref, Value index) {
    return broadcast(memref::LoadOp::create(b, memref, index));
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

  /// x = x0 + x1 (+ x2) for each f32 element x of `values`, xi =
  /// operand(x - x0 - .. - x(i-1)), `terms` of them: each difference is
  /// exact in f32 (x and the terms before agree in their leading bits), so
  /// bf16 terms hold x's leading 8 bits per term. One term: `values` as
  /// they are (f16, bf16).
  OperandTerms splitIntoTerms(const Fragment &values, Type operand,
                              int64_t terms) {
    if (terms == 1)
      return {values};
    OperandTerms result(terms);
    for (Value x : values) {
      Value rest = x;
      for (int64_t i = 0; i < terms; ++i) {
        result[i].push_back(
            arith::TruncFOp::create(b, laneType(operand), rest));
        if (i + 1 < terms)
          rest = arith::SubFOp::create(
              b, rest,
              arith::ExtFOp::create(b, rest.getType(), result[i].back()));
      }
    }
    return result;
  }

  /// acc + sum over i + j < terms of A_i B_j, one mma.sync each, from the
  /// highest order i + j (the smallest products) down, so that the largest
  /// are added last: with one term, acc + A B. B may have fewer terms than
  /// A (an operand exact in one term: its others are zero).
  Fragment mmaOfTerms(ArrayRef<Fragment> aTerms, ArrayRef<Fragment> bTerms,
                      Fragment acc) {
    int64_t terms = aTerms.size();
    int64_t bCount = bTerms.size();
    for (int64_t order = terms - 1; order >= 0; --order)
      for (int64_t i = order; i >= 0; --i) {
        if (order - i >= bCount)
          continue;
        SmallVector<Value, 4> d = mma(aTerms[i], bTerms[order - i], acc);
        acc.assign(d.begin(), d.end());
      }
    return acc;
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

  /// mma.sync by its definition: element i of D in lane L is c_i plus
  /// sum_k A(r, k) B(k, n) with (r, n) = MmaLayout::c(i) at L; A(r, k) and
  /// B(k, n) are shuffled in from the lane and register the A and B
  /// layouts put them in.
  SmallVector<Value, 4> emulatedMma(ArrayRef<Value> a, ArrayRef<Value> bOperand,
                                    ArrayRef<Value> c) {
    auto f32Type = VectorType::get({kWarpSize}, b.getF32Type());
    auto widen = [&](Value v) -> Value {
      return arith::ExtFOp::create(b, f32Type, v);
    };
    SmallVector<Value> aWide = llvm::map_to_vector(a, widen);
    SmallVector<Value> bWide = llvm::map_to_vector(bOperand, widen);
    // The lane and register of each element of A (16 x 16) and B (16 x 8).
    struct Source {
      int64_t lane = -1, element = -1;
    };
    Source aSource[16][16], bSource[16][8];
    for (int64_t lane = 0; lane < kWarpSize; ++lane) {
      for (int64_t i = 0; i < MmaLayout::aElements; ++i) {
        FragmentElement e = MmaLayout::a(i);
        aSource[e.row.at(lane)][e.column.at(lane)] = {lane, i};
      }
      for (int64_t i = 0; i < MmaLayout::bElements; ++i) {
        FragmentElement e = MmaLayout::b(i);
        bSource[e.row.at(lane)][e.column.at(lane)] = {lane, i};
      }
    }
    // One shuffle per register and permutation of lanes.
    using Shuffles = std::map<std::pair<int64_t, SmallVector<int64_t>>, Value>;
    Shuffles aShuffles, bShuffles;
    auto fetch = [&](ArrayRef<Value> wide, Shuffles &shuffles,
                     function_ref<Source(int64_t)> sourceOf) -> Value {
      SmallVector<int64_t> lanes;
      int64_t element = sourceOf(0).element;
      for (int64_t lane = 0; lane < kWarpSize; ++lane) {
        Source source = sourceOf(lane);
        assert(source.element == element &&
               "a fragment element comes from one register in every lane");
        lanes.push_back(source.lane);
      }
      Value &shuffled = shuffles[{element, lanes}];
      if (!shuffled)
        shuffled =
            vector::ShuffleOp::create(b, wide[element], wide[element], lanes);
      return shuffled;
    };
    SmallVector<Value, 4> result;
    for (int64_t i = 0; i < MmaLayout::cElements; ++i) {
      FragmentElement out = MmaLayout::c(i);
      Value sum = c[i];
      for (int64_t k = 0; k < 16; ++k) {
        Value aValue = fetch(aWide, aShuffles, [&](int64_t lane) {
          return aSource[out.row.at(lane)][k];
        });
        Value bValue = fetch(bWide, bShuffles, [&](int64_t lane) {
          return bSource[k][out.column.at(lane)];
        });
        sum = math::FmaOp::create(b, aValue, bValue, sum);
      }
      result.push_back(sum);
    }
    return result;
  }

  ImplicitLocOpBuilder &b;
  bool emulated;
};

} // namespace mlir::rpe::detail

#endif // RPE_CODEGEN_WARP_H
