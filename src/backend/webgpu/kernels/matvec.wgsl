// matvec.wgsl - y = W x for decode-sized steps (one or two tokens).
// Memory-bound: every weight byte is read once per token. Two layouts:
//
// LANE_ROWS (CPU adapters: lavapipe, SwiftShader, which run the invocations
//   of a workgroup as SIMD lanes): each invocation computes whole rows by
//   itself - WG rows per workgroup, no reduction, no barrier, and the input
//   loads are the same for every lane.
// otherwise (GPUs): each workgroup computes R rows of weight k for one token;
//   its invocations stride over the row's groups (consecutive invocations
//   read consecutive blocks: coalesced), then one reduction: subgroupAdd
//   alone when the workgroup is one subgroup (WG_IS_SUBGROUP), else partial
//   sums through workgroup memory and a single barrier.
// Grid: (ceil(max m / rows per workgroup), n, NW), or NW = 1 for SWIGLU,
// which computes rows of both weights. R comes from the composer.

#ifdef LANE_ROWS
@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wid: vec3<u32> SUBGROUP_ARGS) {
    KERNEL_INIT
    let t = wid.y;
    let k = wid.z;
    let row = wid.x * WG + li;
    let xb = P.x_off + t * P.x_stride;
#ifdef HAS_NORM
    var ss = 0.0;
    for (var c = 0u; c < P.K; c++) {
        let v = x[xb + c];
        ss += v * v;
    }
    let scale = inverseSqrt(ss / f32(P.K) + P.eps);
#endif
    // No early return for rows past the end: they compute row m - 1 again and
    // skip the store. Control flow stays uniform, so a JIT such as llvmpipe's can
    // load the input x (the same address in every lane) once per SIMD batch
    // instead of lane by lane.
    let live = row < P.m[k];
    let r = select(max(P.m[k], 1u) - 1u, row, live);
    var a = 0.0;
    var b = 0.0;
    for (var g = 0u; g < P.ngroups; g++) {
        let w = w_group(k, r, g);
#ifdef SWIGLU
        let u = w_group(1u, r, g);
#endif
        for (var i = 0u; i < GV; i++) {
            let c = g * GROUP + i * 4u;
#ifdef HAS_NORM
            let xv = x4(xb, c) * scale * nw4(c);
#else
            let xv = x4(xb, c);
#endif
            a += dot(w[i], xv);
#ifdef SWIGLU
            b += dot(u[i], xv);
#endif
        }
    }
    if (live) { epilogue(k, t, row, a, b); }
}
#else

#ifndef WG_IS_SUBGROUP
var<workgroup> part: array<f32, R * WG>;
#ifdef SWIGLU
var<workgroup> part2: array<f32, R * WG>;
#endif
#endif

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
#ifdef WG_IS_SUBGROUP
    let scale = inverseSqrt(subgroupAdd(ss) / f32(P.K) + P.eps);
#else
    let scale = inverseSqrt(wg_sum(ss, li) / f32(P.K) + P.eps);
#endif
#endif
    let M = P.m[k];
    var acc: array<f32, R>;
#ifdef SWIGLU
    var acc2: array<f32, R>;
#endif
    for (var g = li; g < P.ngroups; g += WG) {
        var xg: array<vec4<f32>, GV>;
        for (var i = 0u; i < GV; i++) {
            let c = g * GROUP + i * 4u;
#ifdef HAS_NORM
            xg[i] = x4(xb, c) * scale * nw4(c);
#else
            xg[i] = x4(xb, c);
#endif
        }
        for (var r = 0u; r < R; r++) {
            let row = r0 + r;
            if (row < M) {
                let w = w_group(k, row, g);
#ifdef SWIGLU
                let u = w_group(1u, row, g);
#endif
                for (var i = 0u; i < GV; i++) {
                    acc[r] += dot(w[i], xg[i]);
#ifdef SWIGLU
                    acc2[r] += dot(u[i], xg[i]);
#endif
                }
            }
        }
    }
#ifdef WG_IS_SUBGROUP
    for (var r = 0u; r < R; r++) {
        let a = subgroupAdd(acc[r]);
#ifdef SWIGLU
        let b = subgroupAdd(acc2[r]);
#else
        let b = 0.0;
#endif
        if (li == 0u && r0 + r < M) { epilogue(k, t, r0 + r, a, b); }
    }
#else
    // One reduction for all rows: partial sums (one per subgroup with
    // subgroups, else one per invocation) through workgroup memory, a single
    // barrier, then invocation r adds up row r.
#ifdef SUBGROUPS
    let nparts = max(WG / sg_size, 1u);
    let slot = li / sg_size;
    for (var r = 0u; r < R; r++) {
        let s = subgroupAdd(acc[r]);
#ifdef SWIGLU
        let s2 = subgroupAdd(acc2[r]);
#endif
        if (sg_lane == 0u) {
            part[r * WG + slot] = s;
#ifdef SWIGLU
            part2[r * WG + slot] = s2;
#endif
        }
    }
#else
    let nparts = WG;
    for (var r = 0u; r < R; r++) {
        part[r * WG + li] = acc[r];
#ifdef SWIGLU
        part2[r * WG + li] = acc2[r];
#endif
    }
#endif
    workgroupBarrier();
    if (li < R && r0 + li < M) {
        var a = 0.0;
        var b = 0.0;
        for (var i = 0u; i < nparts; i++) {
            a += part[li * WG + i];
#ifdef SWIGLU
            b += part2[li * WG + i];
#endif
        }
        epilogue(k, t, r0 + li, a, b);
    }
#endif
}
#endif
