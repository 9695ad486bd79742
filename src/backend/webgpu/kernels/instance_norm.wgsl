// instance_norm.wgsl - each column of x [rows][n] normalized over the rows
// (ops.h: torch.nn.InstanceNorm1d on a [time][channels] signal):
//   o[t][c] = (x[t][c] - mean_c) / sqrt(var_c + eps) * w[c] + b[c]
// with the biased variance; P.flags: 1 = w, 2 = b (else 1 and 0).
// A workgroup takes P.cg columns (a power of two up to WG) and splits the
// rows into WG / cg stripes: invocation li owns column li % cg of its group
// and the rows li / cg, + WG / cg, ... Two passes over the rows as the CPU's
// reference: the mean (of x - x[0][c], so that a column far from 0 does not
// cancel), then the sum of squared deviations from it, each summed with
// Kahan's compensation in the invocation and the stripes' partial sums
// added through workgroup memory (two barriers in all); then a third pass
// writes. Grid: column groups over x and y (group = wid.y * 65535 + wid.x).
// Each element is read and written by one invocation only, so x may be out
// itself (in place); x, w, b in o's buffer are read through o (X_IS_OUT in
// out_x.wgsl, W_IS_OUT, B_IS_OUT). Tier: all.

struct InormParams {
    n: u32, rows: u32, x_off: u32, o_off: u32,
    w_off: u32, b_off: u32, flags: u32, cg: u32,
    groups: u32, pad0: u32, pad1: u32, eps: f32,
}
@group(0) @binding(1) var<uniform> P: InormParams;
#ifdef W_IS_OUT
fn wv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(4) var<storage, read> w: array<f32>;
fn wv(i: u32) -> f32 { return w[i]; }
#endif
#ifdef B_IS_OUT
fn bv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(5) var<storage, read> b: array<f32>;
fn bv(i: u32) -> f32 { return b[i]; }
#endif

var<workgroup> part_m: array<f32, WG>;
var<workgroup> part_v: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    KERNEL_INIT
    let group = wid.y * 65535u + wid.x;
    let stripes = WG / P.cg;
    let cl = li % P.cg;
    let c = group * P.cg + cl;
    let live = group < P.groups && c < P.n;
    let xb = P.x_off + c;
    var k = 0.0;
    if (live) { k = xv(xb); }
    let rf = f32(P.rows);

    // pass 1: sum of x - k over this invocation's rows
    var s = 0.0;
    var e = 0.0;
    if (live) {
        for (var r = li / P.cg; r < P.rows; r += stripes) {
            let y = (xv(xb + r * P.n) - k) - e;
            let t = s + y;
            e = (t - s) - y;
            s = t;
        }
    }
    part_m[li] = s;
    workgroupBarrier();
    var sum = 0.0;
    for (var i = 0u; i < stripes; i++) { sum += part_m[i * P.cg + cl]; }
    let m = sum / rf; // mean - k

    // pass 2: sum of squared deviations from the mean
    s = 0.0;
    e = 0.0;
    if (live) {
        for (var r = li / P.cg; r < P.rows; r += stripes) {
            let d = (xv(xb + r * P.n) - k) - m;
            let y = d * d - e;
            let t = s + y;
            e = (t - s) - y;
            s = t;
        }
    }
    part_v[li] = s;
    workgroupBarrier();
    var m2 = 0.0;
    for (var i = 0u; i < stripes; i++) { m2 += part_v[i * P.cg + cl]; }
    let inv = inverseSqrt(m2 / rf + P.eps);

    if (!live) { return; }
    var wc = 1.0;
    var bc = 0.0;
    if ((P.flags & 1u) != 0u) { wc = wv(P.w_off + c); }
    if ((P.flags & 2u) != 0u) { bc = bv(P.b_off + c); }
    for (var r = li / P.cg; r < P.rows; r += stripes) {
        o[P.o_off + r * P.n + c] = ((xv(xb + r * P.n) - k) - m) * inv * wc + bc;
    }
}
