// matvec.wgsl - y = W x for decode-sized steps (few tokens).
// Each workgroup computes R rows of weight k for one token: its WG
// invocations stride over the row's groups, then reduce. Memory-bound: every
// weight byte is read once per token. Grid: (ceil(max m / R), n, NW), or
// (ceil(m / R), n, 1) for SWIGLU, which computes rows of both weights.
// Tier: all (subgroup reductions when SUBGROUPS).
const R: u32 = 4u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
    let t = wid.y;
    let k = wid.z;
    let r0 = wid.x * R;
    let xb = P.x_off + t * P.x_stride;
#ifdef HAS_NORM
    var ss = 0.0;
    for (var c = li; c < P.K; c += WG) {
        let v = x[xb + c];
        ss += v * v;
    }
    let scale = inverseSqrt(wg_sum(ss, li) / f32(P.K) + P.eps);
#endif
    let M = P.m[k];
    var acc: array<f32, R>;
#ifdef SWIGLU
    var acc2: array<f32, R>;
#endif
    for (var g = li; g < P.ngroups; g += WG) {
        for (var i = 0u; i < GROUP / 4u; i++) {
            let c = g * GROUP + i * 4u;
#ifdef HAS_NORM
            let xv = x4(xb, c) * scale * nw4(c);
#else
            let xv = x4(xb, c);
#endif
            for (var r = 0u; r < R; r++) {
                let row = r0 + r;
                if (row < M) {
                    acc[r] += dot(w_vec4(k, row, g, i), xv);
#ifdef SWIGLU
                    acc2[r] += dot(w_vec4(1u, row, g, i), xv);
#endif
                }
            }
        }
    }
    for (var r = 0u; r < R; r++) {
        let a = wg_sum(acc[r], li);
#ifdef SWIGLU
        let b = wg_sum(acc2[r], li);
#else
        let b = 0.0;
#endif
        if (li == 0u && r0 + r < M) { epilogue(k, t, r0 + r, a, b); }
    }
}
