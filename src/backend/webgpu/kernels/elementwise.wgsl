// elementwise.wgsl - out[i] = f(a[i], b[j]) for i < n:
//   ADD     a + b
//   MUL     a * b
//   SWIGLU  silu(a) * b
// One invocation per element. Grid: (ceil(n / WG), 1, 1), split in y when
// n / WG exceeds the dispatch limit (row = gid.y * P.row_len); j = i.
// ROWS (add and mul with a one-row b, a weight b, or in place; wg_ops_nn.c):
// a grid of P.rows rows of P.row_len (x: columns; rows over y and z, row =
// gid.z * 65535 + gid.y), j = row * P.b_stride + column (b_stride 0: b is one
// row for all rows). a or b in o's buffer is read through o (A_IS_OUT,
// B_IS_OUT: WebGPU forbids binding a written buffer twice). Tier: all.

struct EwParams {
    n: u32, a_off: u32, b_off: u32, o_off: u32,
    row_len: u32, rows: u32, b_stride: u32, pad2: u32,
}
@group(0) @binding(1) var<uniform> P: EwParams;
#ifndef A_IS_OUT
@group(0) @binding(2) var<storage, read> a: array<f32>;
#endif
#ifndef B_IS_OUT
@group(0) @binding(3) var<storage, read> b: array<f32>;
#endif
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
#ifdef ROWS
    let row = gid.z * 65535u + gid.y;
    let i = row * P.row_len + gid.x;
    if (gid.x >= P.row_len || row >= P.rows || i >= P.n) { return; }
    let j = row * P.b_stride + gid.x;
#else
    let i = gid.y * P.row_len + gid.x;
    if (gid.x >= P.row_len || i >= P.n) { return; }
    let j = i;
#endif
#ifdef A_IS_OUT
    let x = o[P.a_off + i];
#else
    let x = a[P.a_off + i];
#endif
#ifdef B_IS_OUT
    let y = o[P.b_off + j];
#else
    let y = b[P.b_off + j];
#endif
#ifdef ADD
    o[P.o_off + i] = x + y;
#endif
#ifdef MUL
    o[P.o_off + i] = x * y;
#endif
#ifdef SWIGLU
    o[P.o_off + i] = x / (1.0 + exp(-x)) * y;
#endif
}
