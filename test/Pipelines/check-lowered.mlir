// RUN: swin-opt %s --rpe-check-lowered=dialects=llvm -split-input-file -verify-diagnostics

// rpe-check-lowered: ops of the listed dialects and of builtin may remain.
llvm.func @lowered(%x: i32) -> i32 {
  llvm.return %x : i32
}

// -----

// Any other op is reported at its location, once per name, and the pass
// fails.
// expected-error @below {{'func.func' remains after lowering to the builtin, llvm dialects}}
func.func @unlowered(%x: i32) -> i32 {
  // expected-error @below {{'arith.addi' remains after lowering to the builtin, llvm dialects}}
  %0 = arith.addi %x, %x : i32
  %1 = arith.addi %0, %0 : i32
  // expected-error @below {{'func.return' remains after lowering}}
  return %1 : i32
}

// -----

// So is a cast that a conversion left: translation rejects it too.
llvm.func @unresolved(%x: i64) -> i64 {
  // expected-error @below {{'builtin.unrealized_conversion_cast' remains after lowering: a conversion left its types unresolved}}
  %0 = builtin.unrealized_conversion_cast %x : i64 to index
  %1 = builtin.unrealized_conversion_cast %0 : index to i64
  llvm.return %1 : i64
}
