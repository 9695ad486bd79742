// pool.wgsl - pooling over sequences packed in one tensor (wgml_pool_args):
// out[s][c] = mean (P.mode 0), first (1) or last (2) x[r][c] over the rows
// seq[s] <= r < seq[s+1]. One invocation per (column, sequence), no barrier:
// grid (ceil(d / WG), sequences over y and z, s = gid.z * 65535 + gid.y).
// Offsets are clamped to x's rows, so that a bad table reads nothing outside
// x (an empty sequence gives 0). x in o's buffer (apart from out) is read
// through o (X_IS_OUT, out_x.wgsl). Tier: all.

struct PoolParams {
    d: u32, n_seq: u32, rows: u32, mode: u32,
    x_off: u32, o_off: u32, s_off: u32, pad0: u32,
}
@group(0) @binding(1) var<uniform> P: PoolParams;
@group(0) @binding(4) var<storage, read> seq: array<i32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let c = gid.x;
    let s = gid.z * 65535u + gid.y;
    if (c >= P.d || s >= P.n_seq) { return; }
    let r0 = u32(clamp(seq[P.s_off + s], 0, i32(P.rows)));
    let r1 = u32(clamp(seq[P.s_off + s + 1u], i32(r0), i32(P.rows)));
    var y = 0.0;
    if (r1 > r0) {
        if (P.mode == 1u) {
            y = xv(P.x_off + r0 * P.d + c);
        } else if (P.mode == 2u) {
            y = xv(P.x_off + (r1 - 1u) * P.d + c);
        } else {
            var sum = 0.0;
            for (var r = r0; r < r1; r++) { sum += xv(P.x_off + r * P.d + c); }
            y = sum / f32(r1 - r0);
        }
    }
    o[P.o_off + s * P.d + c] = y;
}
