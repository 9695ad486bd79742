// bench_read.wgsl - the memory read bandwidth test of `wgml bench`.
// Two access patterns; wg_measure.c times both and reports the faster, so the
// figure is the device's best and not one pattern's:
//   default: invocations read consecutive u32 words (a warp loads one
//     contiguous run: what GPUs coalesce), 8 words apart per step of a
//     grid-stride loop;
//   CHUNKED: each invocation reads its own contiguous run of vec4<u32>
//     (what CPU adapters such as lavapipe, whose SIMD lanes are invocations,
//     load fastest: one wide load per lane instead of a gather).
// Each invocation writes one word, so no read can be optimized away.
// Grid: (groups, 1, 1); P.n is the buffer's size in u32 words, P.stride the
// total number of invocations. Tier: all.

struct BenchParams { n: u32, stride: u32, pad0: u32, pad1: u32 }
@group(0) @binding(1) var<uniform> P: BenchParams;
#ifdef CHUNKED
@group(0) @binding(2) var<storage, read> src: array<vec4<u32>>;
#else
@group(0) @binding(2) var<storage, read> src: array<u32>;
#endif
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
#ifdef CHUNKED
    let nv = P.n / 4u;
    let per = (nv + P.stride - 1u) / P.stride;
    let lo = min(gid.x * per, nv);
    let hi = min(lo + per, nv);
    var a = vec4<u32>(0u);
    var b = vec4<u32>(0u);
    var i = lo;
    for (; i + 1u < hi; i += 2u) {
        a += src[i];
        b ^= src[i + 1u];
    }
    if (i < hi) { a += src[i]; }
    let s = a ^ b;
    dst[gid.x] = s.x ^ s.y ^ s.z ^ s.w;
#else
    var a = 0u;
    var b = 0u;
    var i = gid.x;
    for (; i + P.stride < P.n; i += 2u * P.stride) {
        a += src[i];
        b ^= src[i + P.stride];
    }
    if (i < P.n) { a += src[i]; }
    dst[gid.x] = a ^ b;
#endif
}
