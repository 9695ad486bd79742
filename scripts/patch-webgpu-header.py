#!/usr/bin/env python3
"""patch-webgpu-header.py - make react-native-wgpu's webgpu.h match the Dawn .so we link.

Usage: patch-webgpu-header.py IN_webgpu.h OUT_webgpu.h

The Dawn build we use (npm bun-webgpu-linux-x64@0.1.7, Dawn of June 2025) ships no
header. The closest one (npm react-native-wgpu@0.4.1, cpp/webgpu/webgpu.h) is a few
weeks newer and differs from the .so's ABI in the places listed in
shared/docs/PLATFORM.md. Each difference is one exact-text replacement below. Every
replacement must match exactly once: if the upstream text changed, we stop rather
than write a header that silently disagrees with the library.

Not patched (irrelevant to compute): texture-format numbers. The .so has the six
16-bit norm formats as extension values, so core texture-format numbers above R8Sint
differ; the banner in the output says so.
"""
import sys

BANNER = """\
// ---------------------------------------------------------------------------
// wgml: PATCHED copy of react-native-wgpu@0.4.1 cpp/webgpu/webgpu.h, made to
// match the ABI of npm bun-webgpu-linux-x64@0.1.7 (libwebgpu_wrapper.so).
// Written by scripts/patch-webgpu-header.py; do not edit. Patched: feature-name
// numbers, WGPUInstanceDescriptor/WGPUInstanceCapabilities and
// wgpuGetInstanceCapabilities, two return types, two WGSL language-feature
// numbers; declarations of functions the .so does not export are removed.
// NOT patched: WGPUTextureFormat numbers (wrong above R8Sint for this .so).
// ---------------------------------------------------------------------------
"""

# (description, old text, new text)
PATCHES = []


def patch(desc, old, new):
    PATCHES.append((desc, old, new))


# 1. WGPUFeatureName numbering (the header's is a newer renumbering).
patch("feature-name numbers",
      """\
    WGPUFeatureName_CoreFeaturesAndLimits = 0x00000001,
    WGPUFeatureName_DepthClipControl = 0x00000002,
    WGPUFeatureName_Depth32FloatStencil8 = 0x00000003,
    WGPUFeatureName_TextureCompressionBC = 0x00000004,
    WGPUFeatureName_TextureCompressionBCSliced3D = 0x00000005,
    WGPUFeatureName_TextureCompressionETC2 = 0x00000006,
    WGPUFeatureName_TextureCompressionASTC = 0x00000007,
    WGPUFeatureName_TextureCompressionASTCSliced3D = 0x00000008,
    WGPUFeatureName_TimestampQuery = 0x00000009,
    WGPUFeatureName_IndirectFirstInstance = 0x0000000A,
    WGPUFeatureName_ShaderF16 = 0x0000000B,
    WGPUFeatureName_RG11B10UfloatRenderable = 0x0000000C,
    WGPUFeatureName_BGRA8UnormStorage = 0x0000000D,
    WGPUFeatureName_Float32Filterable = 0x0000000E,
    WGPUFeatureName_Float32Blendable = 0x0000000F,
    WGPUFeatureName_ClipDistances = 0x00000010,
    WGPUFeatureName_DualSourceBlending = 0x00000011,
    WGPUFeatureName_Subgroups = 0x00000012,
    WGPUFeatureName_TextureFormatsTier1 = 0x00000013,
    WGPUFeatureName_TextureFormatsTier2 = 0x00000014,
    WGPUFeatureName_PrimitiveIndex = 0x00000015,
""",
      """\
    WGPUFeatureName_DepthClipControl = 0x00000001,
    WGPUFeatureName_Depth32FloatStencil8 = 0x00000002,
    WGPUFeatureName_TimestampQuery = 0x00000003,
    WGPUFeatureName_TextureCompressionBC = 0x00000004,
    WGPUFeatureName_TextureCompressionBCSliced3D = 0x00000005,
    WGPUFeatureName_TextureCompressionETC2 = 0x00000006,
    WGPUFeatureName_TextureCompressionASTC = 0x00000007,
    WGPUFeatureName_TextureCompressionASTCSliced3D = 0x00000008,
    WGPUFeatureName_IndirectFirstInstance = 0x00000009,
    WGPUFeatureName_ShaderF16 = 0x0000000A,
    WGPUFeatureName_RG11B10UfloatRenderable = 0x0000000B,
    WGPUFeatureName_BGRA8UnormStorage = 0x0000000C,
    WGPUFeatureName_Float32Filterable = 0x0000000D,
    WGPUFeatureName_Float32Blendable = 0x0000000E,
    WGPUFeatureName_ClipDistances = 0x0000000F,
    WGPUFeatureName_DualSourceBlending = 0x00000010,
    WGPUFeatureName_Subgroups = 0x00000011,
    WGPUFeatureName_CoreFeaturesAndLimits = 0x00000012,
""")

# 2. Instance creation: capabilities struct instead of features + limits.
patch("forward declaration of WGPUInstanceCapabilities",
      "struct WGPUInstanceLimits;\n",
      "struct WGPUInstanceLimits;\nstruct WGPUInstanceCapabilities;\n")

patch("WGPUInstanceCapabilities",
      """\
#define WGPU_INSTANCE_LIMITS_INIT _wgpu_MAKE_INIT_STRUCT(WGPUInstanceLimits, { \\
    /*.nextInChain=*/NULL _wgpu_COMMA \\
    /*.timedWaitAnyMaxCount=*/0 _wgpu_COMMA \\
})
""",
      """\
#define WGPU_INSTANCE_LIMITS_INIT _wgpu_MAKE_INIT_STRUCT(WGPUInstanceLimits, { \\
    /*.nextInChain=*/NULL _wgpu_COMMA \\
    /*.timedWaitAnyMaxCount=*/0 _wgpu_COMMA \\
})

typedef struct WGPUInstanceCapabilities {
    WGPUChainedStruct * nextInChain;
    WGPUBool timedWaitAnyEnable;
    size_t timedWaitAnyMaxCount;
} WGPUInstanceCapabilities WGPU_STRUCTURE_ATTRIBUTE;

#define WGPU_INSTANCE_CAPABILITIES_INIT _wgpu_MAKE_INIT_STRUCT(WGPUInstanceCapabilities, { \\
    /*.nextInChain=*/NULL _wgpu_COMMA \\
    /*.timedWaitAnyEnable=*/0 _wgpu_COMMA \\
    /*.timedWaitAnyMaxCount=*/0 _wgpu_COMMA \\
})
""")

patch("WGPUInstanceDescriptor",
      """\
typedef struct WGPUInstanceDescriptor {
    WGPUChainedStruct * nextInChain;
    size_t requiredFeatureCount;
    WGPUInstanceFeatureName const * requiredFeatures;
    WGPU_NULLABLE WGPUInstanceLimits const * requiredLimits;
} WGPUInstanceDescriptor WGPU_STRUCTURE_ATTRIBUTE;

#define WGPU_INSTANCE_DESCRIPTOR_INIT _wgpu_MAKE_INIT_STRUCT(WGPUInstanceDescriptor, { \\
    /*.nextInChain=*/NULL _wgpu_COMMA \\
    /*.requiredFeatureCount=*/0 _wgpu_COMMA \\
    /*.requiredFeatures=*/NULL _wgpu_COMMA \\
    /*.requiredLimits=*/NULL _wgpu_COMMA \\
})
""",
      """\
typedef struct WGPUInstanceDescriptor {
    WGPUChainedStruct * nextInChain;
    WGPUInstanceCapabilities capabilities;
} WGPUInstanceDescriptor WGPU_STRUCTURE_ATTRIBUTE;

#define WGPU_INSTANCE_DESCRIPTOR_INIT _wgpu_MAKE_INIT_STRUCT(WGPUInstanceDescriptor, { \\
    /*.nextInChain=*/NULL _wgpu_COMMA \\
    /*.capabilities=*/WGPU_INSTANCE_CAPABILITIES_INIT _wgpu_COMMA \\
})
""")

patch("proc typedefs of the instance-level getters",
      """\
typedef void (*WGPUProcGetInstanceFeatures)(WGPUSupportedInstanceFeatures * features) WGPU_FUNCTION_ATTRIBUTE;
typedef WGPUStatus (*WGPUProcGetInstanceLimits)(WGPUInstanceLimits * limits) WGPU_FUNCTION_ATTRIBUTE;
typedef WGPUBool (*WGPUProcHasInstanceFeature)(WGPUInstanceFeatureName feature) WGPU_FUNCTION_ATTRIBUTE;
""",
      """\
typedef WGPUStatus (*WGPUProcGetInstanceCapabilities)(WGPUInstanceCapabilities * capabilities) WGPU_FUNCTION_ATTRIBUTE;
""")

patch("instance-level getters",
      """\
WGPU_EXPORT void wgpuGetInstanceFeatures(WGPUSupportedInstanceFeatures * features) WGPU_FUNCTION_ATTRIBUTE;
WGPU_EXPORT WGPUStatus wgpuGetInstanceLimits(WGPUInstanceLimits * limits) WGPU_FUNCTION_ATTRIBUTE;
WGPU_EXPORT WGPUBool wgpuHasInstanceFeature(WGPUInstanceFeatureName feature) WGPU_FUNCTION_ATTRIBUTE;
""",
      """\
WGPU_EXPORT WGPUStatus wgpuGetInstanceCapabilities(WGPUInstanceCapabilities * capabilities) WGPU_FUNCTION_ATTRIBUTE;
""")

# 3. Return types and WGSL language-feature numbers.
patch("return type of WGPUProcInstanceGetWGSLLanguageFeatures",
      "typedef void (*WGPUProcInstanceGetWGSLLanguageFeatures)(",
      "typedef WGPUStatus (*WGPUProcInstanceGetWGSLLanguageFeatures)(")
patch("return type of wgpuInstanceGetWGSLLanguageFeatures",
      "WGPU_EXPORT void wgpuInstanceGetWGSLLanguageFeatures(",
      "WGPU_EXPORT WGPUStatus wgpuInstanceGetWGSLLanguageFeatures(")
patch("return type of WGPUProcSurfacePresent",
      "typedef WGPUStatus (*WGPUProcSurfacePresent)(",
      "typedef void (*WGPUProcSurfacePresent)(")
patch("return type of wgpuSurfacePresent",
      "WGPU_EXPORT WGPUStatus wgpuSurfacePresent(",
      "WGPU_EXPORT void wgpuSurfacePresent(")
patch("WGSL SizedBindingArray number",
      "WGPUWGSLLanguageFeatureName_SizedBindingArray = 0x00050005,",
      "WGPUWGSLLanguageFeatureName_SizedBindingArray = 0x00000005,")
patch("WGSL TexelBuffers number",
      "WGPUWGSLLanguageFeatureName_TexelBuffers = 0x00050006,",
      "WGPUWGSLLanguageFeatureName_TexelBuffers = 0x00000006,")

# 5. Functions the .so does not export: remove the declarations, so that a call
# is a compile error instead of a link error (or, through dlsym, a crash).
for decl in [
    "WGPU_EXPORT void wgpuBindGroupDestroy(WGPUBindGroup bindGroup) WGPU_FUNCTION_ATTRIBUTE;\n",
    "WGPU_EXPORT WGPUTexelBufferView wgpuBufferCreateTexelView(WGPUBuffer buffer, "
    "WGPUTexelBufferViewDescriptor const * descriptor) WGPU_FUNCTION_ATTRIBUTE;\n",
    "WGPU_EXPORT void wgpuSupportedInstanceFeaturesFreeMembers(WGPUSupportedInstanceFeatures "
    "supportedInstanceFeatures) WGPU_FUNCTION_ATTRIBUTE;\n",
    "WGPU_EXPORT void wgpuTexelBufferViewSetLabel(WGPUTexelBufferView texelBufferView, "
    "WGPUStringView label) WGPU_FUNCTION_ATTRIBUTE;\n",
    "WGPU_EXPORT void wgpuTexelBufferViewAddRef(WGPUTexelBufferView texelBufferView) WGPU_FUNCTION_ATTRIBUTE;\n",
    "WGPU_EXPORT void wgpuTexelBufferViewRelease(WGPUTexelBufferView texelBufferView) WGPU_FUNCTION_ATTRIBUTE;\n",
    "WGPU_EXPORT void wgpuTexturePin(WGPUTexture texture, WGPUTextureUsage usage) WGPU_FUNCTION_ATTRIBUTE;\n",
    "WGPU_EXPORT void wgpuTextureUnpin(WGPUTexture texture) WGPU_FUNCTION_ATTRIBUTE;\n",
]:
    name = decl.split("(")[0].split()[-1]
    patch("remove declaration of " + name, decl, "")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: patch-webgpu-header.py IN_webgpu.h OUT_webgpu.h")
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    failed = []
    for desc, old, new in PATCHES:
        n = text.count(old)
        if n != 1:
            failed.append("%s: expected text found %d times (want 1)" % (desc, n))
            continue
        text = text.replace(old, new)
    if failed:
        sys.exit("patch-webgpu-header: upstream header changed; not written:\n  " + "\n  ".join(failed))
    marker = "#ifndef WEBGPU_H_\n"
    if text.count(marker) != 1:
        sys.exit("patch-webgpu-header: include guard not found; not written")
    text = text.replace(marker, BANNER + marker)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
