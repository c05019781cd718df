// timm's Swin attention exported by torch-mlir 20261001 to linalg-on-tensors
// (python/swin_opt/export_mlir.py; weights as dense_resource blobs): raised
// into rpe ops, then fused. Execution against torch: test/Execution/raise-imported.test.

// RUN: swin-opt %S/Inputs/raise/timm_window_attention.mlir --rpe-raise-window-attention | FileCheck %s --check-prefix=WA
// WA-LABEL: func.func @forward
// WA: %[[T:.*]] = arith.constant dense_resource<torch_tensor_49_2_torch.float32> : tensor<49x2xf32>
// WA: %[[B:.*]] = rpe.lookup %[[T]] {window = array<i64: 4, 4>} : tensor<49x2xf32> -> tensor<2x16x16xf32>
// WA: rpe.window_attention ins({{.*}} : tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>, tensor<2x2x16x8xf32>) bias(%[[B]] : tensor<2x16x16xf32>) {scale = 0.353553385 : f32} -> tensor<2x2x16x8xf32>
// The importer's gather and products are gone once dead code is removed.
// RUN: swin-opt %S/Inputs/raise/timm_window_attention.mlir --rpe-raise-window-attention --rpe-fuse-bias-softmax --canonicalize | FileCheck %s --check-prefix=WA-FUSED
// WA-FUSED-LABEL: func.func @forward
// WA-FUSED-NOT: linalg.batch_matmul
// WA-FUSED-NOT: tensor.extract %
// WA-FUSED: rpe.fused_window_attention
// WA-FUSED-SAME: {scale = 0.353553385 : f32, window = array<i64: 4, 4>}
// WA-FUSED-NOT: linalg.batch_matmul
// WA-FUSED-NOT: tensor.extract %

// A non-square window (4x2: 8 tokens, 21 table rows).
// RUN: swin-opt %S/Inputs/raise/timm_window_attention_4x2.mlir --rpe-raise-window-attention --rpe-fuse-bias-softmax | FileCheck %s --check-prefix=RECT
// RECT-LABEL: func.func @forward
// RECT: rpe.fused_window_attention {{.*}} tensor<21x2xf32>)
// RECT-SAME: {scale = 0.353553385 : f32, window = array<i64: 4, 2>}

// WindowAttention.forward(x, mask): a run-time mask stays an operand of the
// raised attention, and of the fused kernel, which reads it as it is.
// RUN: swin-opt %S/Inputs/raise/timm_window_attention_mask.mlir --rpe-raise-window-attention | FileCheck %s --check-prefix=MASK
// RUN: swin-opt %S/Inputs/raise/timm_window_attention_mask.mlir --rpe-raise-window-attention --rpe-fuse-bias-softmax | FileCheck %s --check-prefix=FUSEDMASK
// MASK-LABEL: func.func @forward
// MASK-SAME: %[[MASK:[a-z0-9]*]]: tensor<2x16x16xf32>)
// MASK-NOT: rpe.shift_mask
// MASK: rpe.window_attention {{.*}} mask(%[[MASK]] : tensor<2x16x16xf32>)
// FUSEDMASK-LABEL: func.func @forward
// FUSEDMASK-SAME: %[[RUNTIME:[a-z0-9]*]]: tensor<2x16x16xf32>)
// FUSEDMASK: rpe.fused_window_attention {{.*}} mask(%[[RUNTIME]] : tensor<2x16x16xf32>)
// FUSEDMASK-NOT: rpe.window_attention

// A shifted SwinTransformerBlock (8x8 map, window 4, shift 2): its mask
// constant is proved to be Swin's mask and the attention fuses whole.
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_shifted.mlir --rpe-raise-window-attention | FileCheck %s --check-prefix=BLOCK
// BLOCK-LABEL: func.func @forward
// BLOCK: %[[B:.*]] = rpe.lookup %{{.*}} {window = array<i64: 4, 4>}
// BLOCK: %[[M:.*]] = rpe.shift_mask {resolution = array<i64: 8, 8>, shift = array<i64: 2, 2>, window = array<i64: 4, 4>} : tensor<4x16x16xf32>
// BLOCK: rpe.window_attention {{.*}} bias(%[[B]] : tensor<2x16x16xf32>) mask(%[[M]] : tensor<4x16x16xf32>)
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_shifted.mlir --rpe-raise-window-attention --rpe-fuse-bias-softmax | FileCheck %s --check-prefix=BLOCK-FUSED
// BLOCK-FUSED-LABEL: func.func @forward
// BLOCK-FUSED: rpe.fused_window_attention
// BLOCK-FUSED-SAME: resolution = array<i64: 8, 8>, scale = 0.353553385 : f32, shift = array<i64: 2, 2>, window = array<i64: 4, 4>

// Swin-T's stage 4 at batch 1 (map = window, no shift): one window, whose
// bias add the importer writes [1, H, N, N] + [1, H, N, N] with identity
// maps. Raised and fused; nothing of the importer's attention is left.
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_single_window.mlir --rpe-raise-window-attention | FileCheck %s --check-prefix=SINGLE
// SINGLE-LABEL: func.func @forward
// SINGLE: %[[B:.*]] = rpe.lookup %{{.*}} {window = array<i64: 4, 4>} : tensor<49x2xf32> -> tensor<2x16x16xf32>
// SINGLE: rpe.window_attention ins({{.*}} : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) bias(%[[B]] : tensor<2x16x16xf32>) {scale = 0.353553385 : f32} -> tensor<1x2x16x8xf32>
// SINGLE-NOT: mask(
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_single_window.mlir --rpe-raise-window-attention --rpe-fuse-bias-softmax --canonicalize | FileCheck %s --check-prefix=SINGLE-FUSED
// SINGLE-FUSED-LABEL: func.func @forward
// SINGLE-FUSED-NOT: linalg.batch_matmul
// SINGLE-FUSED-NOT: tensor.extract %
// SINGLE-FUSED: rpe.fused_window_attention
// SINGLE-FUSED-SAME: {scale = 0.353553385 : f32, window = array<i64: 4, 4>}
// SINGLE-FUSED-NOT: linalg.batch_matmul
// SINGLE-FUSED-NOT: tensor.extract %
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_single_window.mlir --mlir-print-ir-after=rpe-fuse-bias-softmax --rpe-cpu-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=SINGLE-PIPE
// SINGLE-PIPE: rpe.fused_window_attention

// rpe-cpu-pipeline raises first (raise=false: it does not), and the whole
// block, GELU's math.erf and LayerNorm included, reaches LLVM IR.
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_shifted.mlir --rpe-cpu-pipeline | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=LLVM
// LLVM: define void @_mlir_ciface_forward(
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_shifted.mlir --mlir-print-ir-after=rpe-fuse-bias-softmax --rpe-cpu-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPE
// PIPE: rpe.fused_window_attention
// RUN: swin-opt %S/Inputs/raise/timm_swin_block_shifted.mlir --mlir-print-ir-after=rpe-fuse-bias-softmax --rpe-cpu-pipeline=raise=false -o /dev/null 2>&1 | FileCheck %s --check-prefix=NO-RAISE
// NO-RAISE-NOT: rpe.
