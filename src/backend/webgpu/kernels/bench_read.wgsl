// bench_read.wgsl - the memory read bandwidth test of `wgml bench`.
// Invocations read consecutive u32 words (so a warp, or the SIMD lanes of a
// CPU adapter, loads one contiguous run), 8 words apart per step of a
// grid-stride loop, and each writes one word, so no read can be optimized
// away. Grid: (groups, 1, 1); P.stride is the total number of invocations.
// Tier: all.

struct BenchParams { n: u32, stride: u32, pad0: u32, pad1: u32 }
@group(0) @binding(1) var<uniform> P: BenchParams;
@group(0) @binding(2) var<storage, read> src: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    var a = 0u;
    var b = 0u;
    var i = gid.x;
    for (; i + P.stride < P.n; i += 2u * P.stride) {
        a += src[i];
        b ^= src[i + P.stride];
    }
    if (i < P.n) { a += src[i]; }
    dst[gid.x] = a ^ b;
}
