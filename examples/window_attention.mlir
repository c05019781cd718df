// Swin-T stage-1 window attention (7x7 windows, 3 heads, head_dim 32) of a
// shifted block on a 56x56 feature map, written with the rpe dialect.
//
//   build/bin/swin-opt examples/window_attention.mlir --rpe-cpu-pipeline \
//     | mlir-translate-22 --mlir-to-llvmir
func.func @swin_block_attention(%q: tensor<?x3x49x32xf32>, %k: tensor<?x3x49x32xf32>,
                                %v: tensor<?x3x49x32xf32>,
                                %table: tensor<169x3xf32>) -> tensor<?x49x96xf32> {
  %bias = rpe.lookup %table {window = array<i64: 7, 7>} : tensor<169x3xf32> -> tensor<3x49x49xf32>
  %mask = rpe.shift_mask {resolution = array<i64: 56, 56>, window = array<i64: 7, 7>,
                          shift = array<i64: 3, 3>} : tensor<64x49x49xf32>
  %out = rpe.window_attention ins(%q, %k, %v : tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>, tensor<?x3x49x32xf32>)
           bias(%bias : tensor<3x49x49xf32>) mask(%mask : tensor<64x49x49xf32>)
           -> tensor<?x49x96xf32>
  return %out : tensor<?x49x96xf32>
}
