//===- ModuleAbi.cpp - the C ABI of a module compiled ahead of time -------===//
//
// Reads the exported functions' signatures into the ABI table (before the
// module is lowered: the tensors' shapes and element types are the
// caller's view) and writes the table as JSON.
//
//===----------------------------------------------------------------------===//

#include "Rpe/Aot/ModuleAbi.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::rpe;

StringRef mlir::rpe::stringifyModuleValueRole(ModuleValueRole role) {
  switch (role) {
  case ModuleValueRole::Input:
    return "input";
  case ModuleValueRole::Result:
    return "result";
  case ModuleValueRole::Buffer:
    return "buffer";
  }
  llvm_unreachable("unknown role");
}

bool ModuleAbiValue::hasStaticShape() const {
  return !llvm::is_contained(shape, ShapedType::kDynamic);
}

int64_t ModuleAbiValue::getNumElements() const {
  int64_t elements = 1;
  for (int64_t extent : shape)
    elements *= extent;
  return elements;
}

std::string ModuleAbiValue::cType() const {
  return (role == ModuleValueRole::Input ? "const " : "") + cElementType + " *";
}

std::string ModuleFunctionAbi::getCInterfaceName() const {
  return "_mlir_ciface_" + function;
}

SmallVector<const ModuleAbiValue *> ModuleFunctionAbi::arguments() const {
  SmallVector<const ModuleAbiValue *> arguments;
  for (const ModuleAbiValue &value : values)
    if (value.role != ModuleValueRole::Result)
      arguments.push_back(&value);
  return arguments;
}

SmallVector<const ModuleAbiValue *> ModuleFunctionAbi::inputs() const {
  SmallVector<const ModuleAbiValue *> inputs;
  for (const ModuleAbiValue &value : values)
    if (value.role == ModuleValueRole::Input)
      inputs.push_back(&value);
  return inputs;
}

SmallVector<const ModuleAbiValue *> ModuleFunctionAbi::results() const {
  SmallVector<const ModuleAbiValue *> results;
  for (const ModuleAbiValue &value : values)
    if (value.role == ModuleValueRole::Result)
      results.push_back(&value);
  return results;
}

std::string ModuleFunctionAbi::cDeclaration() const {
  std::string declaration = "int " + entryPoint + "(";
  if (values.empty())
    return declaration + "void)";
  size_t numInputs = inputs().size();
  for (auto [i, value] : llvm::enumerate(values)) {
    // The results start on a line of their own.
    if (i > 0)
      declaration += i == numInputs ? ",\n    " : ", ";
    declaration += value.cType() + value.name;
  }
  return declaration + ")";
}

bool mlir::rpe::isCIdentifier(StringRef name) {
  return !name.empty() && !llvm::isDigit(name.front()) &&
         llvm::all_of(name,
                      [](char c) { return llvm::isAlnum(c) || c == '_'; });
}

/// The description of a value of `type` passed (`role` Input) or returned
/// (Result) as `name`: a ranked tensor, or, passed, a memref of the
/// identity layout (a Buffer); none for another type.
static std::optional<ModuleAbiValue> describeValue(Type type, std::string name,
                                                   ModuleValueRole role) {
  auto shaped = dyn_cast<ShapedType>(type);
  auto memref = dyn_cast<MemRefType>(type);
  if (memref && role == ModuleValueRole::Input &&
      memref.getLayout().isIdentity())
    role = ModuleValueRole::Buffer;
  else if (!isa<RankedTensorType>(type))
    return std::nullopt;
  ModuleAbiValue value;
  value.name = std::move(name);
  value.role = role;
  value.shape = llvm::to_vector(shaped.getShape());
  Type element = shaped.getElementType();
  auto set = [&](StringRef dtype, StringRef cType, int64_t bytes) {
    value.dtype = dtype.str();
    value.cElementType = cType.str();
    value.elementBytes = bytes;
  };
  // f16 and bf16 travel as their raw bits, as in the kernels' ABI.
  if (element.isF16())
    set("f16", "uint16_t", 2);
  else if (element.isBF16())
    set("bf16", "uint16_t", 2);
  else if (element.isF32())
    set("f32", "float", 4);
  else if (element.isF64())
    set("f64", "double", 8);
  else if (element.isSignlessInteger(8) || element.isSignlessInteger(16) ||
           element.isSignlessInteger(32) || element.isSignlessInteger(64)) {
    unsigned width = element.getIntOrFloatBitWidth();
    set(("i" + Twine(width)).str(), ("int" + Twine(width) + "_t").str(),
        width / 8);
  } else {
    return std::nullopt;
  }
  return value;
}

FailureOr<ModuleAbi> mlir::rpe::getModuleAbi(ModuleOp module,
                                             StringRef prefix) {
  ModuleAbi abi;
  abi.name = prefix.str();
  // A declaration is private (the verifier says so): its C interface would
  // be a declaration too, with nothing to export.
  auto isExported = [](func::FuncOp func) {
    return func.isPublic() && !func.isExternal();
  };
  // Every symbol the library will define: the module's, and MLIR's C
  // interfaces.
  llvm::StringSet<> taken;
  for (Operation &op : *module.getBody())
    if (auto symbol = dyn_cast<SymbolOpInterface>(op))
      taken.insert(symbol.getName());
  for (auto func : module.getOps<func::FuncOp>())
    if (isExported(func))
      taken.insert("_mlir_ciface_" + func.getName().str());

  for (auto func : module.getOps<func::FuncOp>()) {
    if (!isExported(func))
      continue;
    if (!isCIdentifier(func.getName()))
      return func.emitError("@\"")
             << func.getName()
             << "\" is public, but its name is not a C identifier (make it "
                "private, or rename it)";
    ModuleFunctionAbi function;
    function.function = func.getName().str();
    auto describe = [&](Type type, ModuleValueRole role,
                        unsigned index) -> LogicalResult {
      StringRef kind = role == ModuleValueRole::Input ? "arg" : "result";
      auto value = describeValue(type, (kind + Twine(index)).str(), role);
      if (!value)
        return func.emitError()
               << (role == ModuleValueRole::Input ? "argument " : "result ")
               << index << " of @" << func.getName() << " has type " << type
               << ": exported functions take ranked tensors or memrefs of "
                  "the identity layout and return ranked tensors, of f16, "
                  "bf16, f32, f64, i8, i16, i32 or i64";
      function.values.push_back(std::move(*value));
      return success();
    };
    for (auto [i, type] : llvm::enumerate(func.getArgumentTypes()))
      if (failed(describe(type, ModuleValueRole::Input, i)))
        return failure();
    for (auto [i, type] : llvm::enumerate(func.getResultTypes()))
      if (failed(describe(type, ModuleValueRole::Result, i)))
        return failure();
    // The plain entry point passes one pointer per tensor: the extents are
    // the function's, and it copies results out of the function's tensors.
    bool plain = llvm::all_of(function.values, [](const ModuleAbiValue &v) {
      return v.hasStaticShape() && v.role != ModuleValueRole::Buffer;
    });
    if (plain) {
      function.entryPoint = (prefix + "_" + func.getName()).str();
      if (taken.contains(function.entryPoint))
        return func.emitError("the C entry point of @")
               << func.getName() << ", " << function.entryPoint
               << ", would be a second definition of that symbol (choose "
                  "another --name)";
    }
    abi.functions.push_back(std::move(function));
  }
  if (abi.functions.empty())
    return module.emitError(
        "no public function with a body: the library would export nothing");
  return abi;
}

void mlir::rpe::writeModuleAbiDescription(const ModuleAbi &abi,
                                          llvm::raw_ostream &os) {
  llvm::json::Array functions;
  for (const ModuleFunctionAbi &function : abi.functions) {
    llvm::json::Array arguments;
    for (const ModuleAbiValue &value : function.values) {
      llvm::json::Array shape;
      for (int64_t extent : value.shape)
        shape.push_back(ShapedType::isDynamic(extent)
                            ? llvm::json::Value(nullptr)
                            : llvm::json::Value(extent));
      arguments.push_back(
          llvm::json::Object{{"name", value.name},
                             {"role", stringifyModuleValueRole(value.role)},
                             {"ctype", value.cType()},
                             {"dtype", value.dtype},
                             {"shape", std::move(shape)}});
    }
    // `entry_point` and what it `returns`: null without a plain entry point.
    auto plain = [&](llvm::json::Value value) {
      return function.hasEntryPoint() ? std::move(value)
                                      : llvm::json::Value(nullptr);
    };
    functions.push_back(
        llvm::json::Object{{"function", function.function},
                           {"entry_point", plain(function.entryPoint)},
                           {"c_interface", function.getCInterfaceName()},
                           {"returns", plain("int32")},
                           {"arguments", std::move(arguments)}});
  }
  llvm::json::Object description{{"format", "swin-opt-module-abi"},
                                 {"version", kModuleAbiVersion},
                                 {"name", abi.name},
                                 {"functions", std::move(functions)}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(description)))
     << "\n";
}
