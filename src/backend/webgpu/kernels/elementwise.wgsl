// elementwise.wgsl - out[i] = f(a[i], b[i]) for i < n:
//   ADD     a + b
//   SWIGLU  silu(a) * b
// One invocation per element. Grid: (ceil(n / WG), 1, 1), split in y when
// n / WG exceeds the dispatch limit (row = gid.y * P.row_len). Tier: all.

struct EwParams {
    n: u32, a_off: u32, b_off: u32, o_off: u32,
    row_len: u32, pad0: u32, pad1: u32, pad2: u32,
}
@group(0) @binding(1) var<uniform> P: EwParams;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let i = gid.y * P.row_len + gid.x;
    if (gid.x >= P.row_len || i >= P.n) { return; }
    let x = a[P.a_off + i];
    let y = b[P.b_off + i];
#ifdef ADD
    o[P.o_off + i] = x + y;
#endif
#ifdef SWIGLU
    o[P.o_off + i] = x / (1.0 + exp(-x)) * y;
#endif
}
