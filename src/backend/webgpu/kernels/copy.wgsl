// copy.wgsl - data movement into contiguous f32 rows (wg_ops_copy.c):
//   copy:           o[i] = x at the strided position of element i (a
//                   transpose, column slice, permutation or broadcast view);
//   GATHER (get_rows from an activation table): o[t][c] = x[ids[t]][c], zeros
//                   for an id outside the table's rows (never read outside).
// One invocation per output element. Grid: P.rows rows of P.cols (x: columns;
// rows over y and z, row = gid.z * 65535 + gid.y), element i = row * cols +
// column < n: the output as flat rows of up to 2^21 elements, so any size fits
// the 65535 workgroups of a grid dimension. Strides and offsets are in
// elements. x in o's buffer (apart from the output: validate.c) is read
// through o (X_IS_OUT, out_x.wgsl). Tier: all.

struct CopyParams {
    n: u32, x_off: u32, o_off: u32, cols: u32,
    rows: u32, ne0: u32, ne1: u32, ne2: u32,
    nb0: u32, nb1: u32, nb2: u32, nb3: u32,
    i_off: u32, t_rows: u32, pad0: u32, pad1: u32,
}
@group(0) @binding(1) var<uniform> P: CopyParams;
#ifdef GATHER
@group(0) @binding(4) var<storage, read> ids: array<i32>;
#endif

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let row = gid.z * 65535u + gid.y;
    let i = row * P.cols + gid.x;
    if (gid.x >= P.cols || row >= P.rows || i >= P.n) { return; }
    let i0 = i % P.ne0;
    let r = i / P.ne0;
#ifdef GATHER
    // r: the output row; P.ne0: the table's row length
    let id = ids[P.i_off + r];
    var v = 0.0;
    if (id >= 0 && u32(id) < P.t_rows) { v = xv(P.x_off + u32(id) * P.ne0 + i0); }
    o[P.o_off + i] = v;
#else
    // r = i1 + ne1 (i2 + ne2 i3): x's row of this element
    let i1 = r % P.ne1;
    let r2 = r / P.ne1;
    let i2 = r2 % P.ne2;
    let i3 = r2 / P.ne2;
    o[P.o_off + i] = xv(P.x_off + i0 * P.nb0 + i1 * P.nb1 + i2 * P.nb2 + i3 * P.nb3);
#endif
}
