// unary.wgsl - out = f(x) elementwise, f chosen by P.kind: the values of
// wgml_unary_kind (ops.h), in its order; a new kind is one case here. One
// pipeline serves every kind (the switch on a uniform costs a scalar branch).
// Grid: P.rows rows of P.cols (x: columns; rows over y and z, row = gid.z *
// 65535 + gid.y), element i = row * cols + column < n: the tensor as flat rows
// of 2^21 elements, or, for a kind with a per-column parameter v (SNAKE), as
// its own rows. x and v in o's buffer are read through o (X_IS_OUT, out_x.wgsl: in place,
// each element read and then written by one invocation; V_IS_OUT). Tier: all.

struct UnaryParams {
    n: u32, x_off: u32, o_off: u32, v_off: u32,
    cols: u32, rows: u32, kind: u32, pad0: u32,
    a: f32, b: f32, pad1: u32, pad2: u32,
}
@group(0) @binding(1) var<uniform> P: UnaryParams;
#ifdef V_IS_OUT
fn vv(i: u32) -> f32 { return o[i]; }
#else
@group(0) @binding(4) var<storage, read> v: array<f32>;
fn vv(i: u32) -> f32 { return v[i]; }
#endif

// tanh without overflow (WGSL's may compute exp(2x) / ...): |error| < 1e-7.
fn tanh_s(t: f32) -> f32 {
    let e = exp(-2.0 * abs(t));
    return sign(t) * (1.0 - e) / (1.0 + e);
}

// sin with its own range reduction (the adapters' sin may err by 1e-4 off
// [-pi, pi], as WGSL allows): x = k pi/2 + r, pi/2 split in three (8 and 12
// significant bits, so that k times the first two is exact for |k| < 4096),
// then Taylor series of sin or cos on |r| <= pi/4 by k mod 4. Measured in f32
// against libm's double sin: |error| <= 8.5e-8 on [-2000, 2000].
fn sin_s(t: f32) -> f32 {
    let k = round(t * 0.6366197723675813);
    let r = ((t - k * 1.5703125) - k * 0.0004838705062866211) + k * 4.371138828673793e-8;
    let u = r * r;
    let s = r + r * u * (-0.16666666666666666 + u * (0.008333333333333333 + u * (-0.0001984126984126984 +
                                                                                  u * 2.7557319223985893e-6)));
    let c = 1.0 + u * (-0.5 + u * (0.041666666666666664 + u * (-0.001388888888888889 + u * (2.48015873015873e-5 +
                                                                                            u * -2.755731922398589e-7))));
    let q = u32(i32(k)) & 3u;
    let y = select(s, c, (q & 1u) != 0u);
    return select(y, -y, (q & 2u) != 0u);
}

// erf (WGSL has none): |x| < 1: x P(x^2); 1 <= |x| < 4: 1 - exp(-x^2) Q(1/|x|)
// (P, Q: Chebyshev fits of erf(x)/x and erfc(x) exp(x^2), errors 1.2e-9 and
// 2.3e-8); erf(4) rounds to 1 in f32. Measured in f32 against libm's double
// erf over [-8, 8] in steps of 3e-6: |error| <= 1.4e-7 (2.3 ulp of erf(1)),
// relative error <= 1.8e-7.
fn erf_w(t: f32) -> f32 {
    let a = min(abs(t), 4.0);
    let u = a * a;
    var p = 7.87587506269e-5;
    p = p * u - 0.000801686428717;
    p = p * u + 0.00518908742343;
    p = p * u - 0.0268542120106;
    p = p * u + 0.112835947152;
    p = p * u - 0.376126266667;
    p = p * u + 1.12837916585;
    let r = 1.0 / max(a, 1.0);
    var q = -0.00593402249446;
    q = q * r + 0.0109451334491;
    q = q * r + 0.0613541496131;
    q = q * r - 0.286535607605;
    q = q * r + 0.529070574634;
    q = q * r - 0.485939507572;
    q = q * r + 0.045837909139;
    q = q * r + 0.558479920466;
    q = q * r + 0.000305017748552;
    let y = select(1.0 - exp(-u) * q, a * p, a < 1.0);
    return select(y, -y, t < 0.0);
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    KERNEL_INIT
    let row = gid.z * 65535u + gid.y;
    let i = row * P.cols + gid.x;
    if (gid.x >= P.cols || row >= P.rows || i >= P.n) { return; }
    let t = xv(P.x_off + i);
    var y = t;
    switch P.kind {
        case 0u: { y = 0.5 * t * (1.0 + tanh_s(0.7978845608028654 * (t + 0.044715 * t * t * t))); } // GELU (tanh)
        case 1u: { y = 0.5 * t * (1.0 + erf_w(t * 0.7071067811865476)); }                          // GELU_ERF
        case 2u: { y = tanh_s(t); }                                                               // TANH
        case 3u: { y = P.a * t + P.b; }                                                           // SCALE
        case 4u: {                                                                                // SIGMOID
            let e = exp(-abs(t));
            let s = 1.0 / (1.0 + e);
            y = select(e * s, s, t >= 0.0);
        }
        case 5u: { y = select(P.a * t, t, t > 0.0); }                                             // LEAKY_RELU
        case 6u: { y = sin_s(t); }                                                                // SIN
        case 7u: { y = exp(t); }                                                                  // EXP
        case 8u: {                                                                                // SNAKE
            let al = vv(P.v_off + gid.x);
            let s = sin_s(al * t);
            y = t + s * s / al;
        }
        case 9u: {                                                                                // GELU_QUICK
            let e = exp(-abs(1.702 * t));
            let s = 1.0 / (1.0 + e);
            y = t * select(e * s, s, t >= 0.0);
        }
        default: {}
    }
    o[P.o_off + i] = y;
}
