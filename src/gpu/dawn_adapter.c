/*
 * dawn_adapter.c - finding WebGPU adapters through Dawn, one Vulkan driver at a time.
 *
 * Dawn's C API returns one adapter per wgpuInstanceRequestAdapter and cannot
 * enumerate. To list every adapter we probe one Vulkan driver (ICD json) at a
 * time: make only its json visible to the Vulkan loader (VK_ICD_FILENAMES and
 * VK_DRIVER_FILES; VK_ADD_DRIVER_FILES unset), create a fresh instance, request
 * a Vulkan adapter, restore the environment.
 *
 * Measured (Dawn of June 2025 from npm bun-webgpu-linux-x64, Vulkan loader
 * 1.3.239): every new WGPUInstance re-reads these variables, because Dawn makes
 * a VkInstance per WGPUInstance and the loader scans drivers in vkCreateInstance.
 * Probing SwiftShader, lavapipe, SwiftShader in one process returns each in
 * turn, and an instance keeps the driver it was created with after the
 * variables are restored. So a device is opened by probing its driver again.
 *
 * Candidates, in order: the entries of VK_DRIVER_FILES (else VK_ICD_FILENAMES)
 * when the user set one, and then nothing else; otherwise $WGML_ICD_DIR or the
 * build's deps/icd (the software adapters setup-deps.sh prepares), then the
 * system ICD folders. Then one probe with the environment untouched
 * ("default": Dawn's own choice, which covers Metal and D3D12 elsewhere).
 * Drivers that reach the same device twice are listed once.
 *
 * Dawn's Null adapter, which it hands out when no driver works, is refused: its
 * results are garbage. Drivers without a device make Dawn print loader errors
 * to stderr; probes silence stderr unless WGML_GPU_DEBUG is set.
 *
 * The environment is process-wide: list and create adapters from one thread,
 * at startup, not while other threads read the environment.
 */
#include "core/alloc.h"
#include "core/error.h"
#include "gpu/dawn_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SOURCE_DEFAULT "default"

#ifdef WGML_DAWN_NPM_ABI
/* The header must speak the npm .so's ABI (shared/docs/PLATFORM.md; the
 * patched header from scripts/setup-deps.sh does): with an unpatched one,
 * asking for ShaderF16 asks for another feature and tests pass by luck. */
_Static_assert(WGPUFeatureName_TimestampQuery == 3, "webgpu.h: TimestampQuery is not the .so's 3");
_Static_assert(WGPUFeatureName_ShaderF16 == 10, "webgpu.h: ShaderF16 is not the .so's 10");
_Static_assert(WGPUFeatureName_Subgroups == 17, "webgpu.h: Subgroups is not the .so's 17");
_Static_assert(sizeof(WGPULimits) == 152, "webgpu.h: WGPULimits is not the .so's 152 bytes");
_Static_assert(sizeof(WGPUInstanceDescriptor) == 4 * sizeof(void *), "webgpu.h: not the .so's instance descriptor");
#endif

static const char *const system_icd_dirs[] = {
    "/usr/share/vulkan/icd.d",
    "/etc/vulkan/icd.d",
    "/usr/local/share/vulkan/icd.d",
    "/usr/local/nvidia/share/vulkan/icd.d",
};

/* ---- string views ---------------------------------------------------------- */

void wgml_dawn_sv_copy(char *dst, size_t cap, WGPUStringView sv) {
    size_t n = 0;
    if (sv.data) n = sv.length == WGPU_STRLEN ? strlen(sv.data) : sv.length;
    if (n >= cap) n = cap - 1;
    if (n) memcpy(dst, sv.data, n);
    dst[n] = '\0';
}

WGPUStringView wgml_dawn_sv(const char *s) {
    WGPUStringView v = {s, s ? strlen(s) : WGPU_STRLEN}; /* NULL: the "absent" view */
    return v;
}

/* ---- candidate ICD jsons ---------------------------------------------------- */

typedef struct icd_list {
    char **path;
    int n, cap;
} icd_list;

static void icd_list_free(icd_list *l) {
    for (int i = 0; i < l->n; i++)
        wgml_free(l->path[i]);
    wgml_free(l->path);
    l->path = NULL;
    l->n = l->cap = 0;
}

/* Whether the driver library a json names can be there: an absolute or
 * json-relative path must exist; a bare name is left to the loader's search. */
static int icd_library_present(const char *json) {
    FILE *f = fopen(json, "rb");
    if (!f) return 0;
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    const char *k = strstr(text, "\"library_path\"");
    if (!k) return 0;
    const char *q = strchr(k + 14, ':');
    if (q) q = strchr(q, '"');
    const char *end = q ? strchr(q + 1, '"') : NULL;
    if (!end) return 0;
    char lib[PATH_MAX];
    size_t len = (size_t)(end - q - 1);
    if (len == 0 || len >= sizeof lib) return 0;
    memcpy(lib, q + 1, len);
    lib[len] = '\0';
    if (!strchr(lib, '/')) return 1;
    if (lib[0] == '/') return access(lib, R_OK) == 0;
    char full[2 * PATH_MAX];
    const char *slash = strrchr(json, '/');
    int dirlen = slash ? (int)(slash - json) : 1;
    snprintf(full, sizeof full, "%.*s/%s", dirlen, slash ? json : ".", lib);
    return access(full, R_OK) == 0;
}

static wgml_status icd_list_add(icd_list *l, const char *path, wgml_error *err) {
    char real[PATH_MAX];
    const char *p = realpath(path, real) ? real : path;
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->path[i], p) == 0) return WGML_OK;
    if (!icd_library_present(p)) return WGML_OK;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **np = wgml_realloc(l->path, (size_t)cap * sizeof *np);
        if (!np) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "listing Vulkan drivers: out of memory");
        l->path = np;
        l->cap = cap;
    }
    if (!(l->path[l->n] = wgml_strdup(p)))
        return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "listing Vulkan drivers: out of memory");
    l->n++;
    return WGML_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Adds the *.json files of a folder, in name order. */
static wgml_status icd_scan_dir(icd_list *l, const char *dir, wgml_error *err) {
    DIR *d = opendir(dir);
    if (!d) return WGML_OK;
    icd_list names = {0};
    wgml_status st = WGML_OK;
    struct dirent *e;
    while (st == WGML_OK && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        if (names.n == names.cap) {
            int cap = names.cap ? 2 * names.cap : 16;
            char **np = wgml_realloc(names.path, (size_t)cap * sizeof *np);
            if (!np) {
                st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "listing Vulkan drivers: out of memory");
                break;
            }
            names.path = np;
            names.cap = cap;
        }
        if (!(names.path[names.n] = wgml_strdup(e->d_name))) {
            st = wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "listing Vulkan drivers: out of memory");
            break;
        }
        names.n++;
    }
    closedir(d);
    if (names.n) qsort(names.path, (size_t)names.n, sizeof *names.path, cmp_str);
    for (int i = 0; st == WGML_OK && i < names.n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names.path[i]);
        st = icd_list_add(l, path, err);
    }
    icd_list_free(&names);
    return st;
}

/* A ':'-separated list of json files and folders, as the Vulkan loader takes it. */
static wgml_status icd_add_env_list(icd_list *l, const char *value, wgml_error *err) {
    wgml_status st = WGML_OK;
    const char *p = value;
    while (st == WGML_OK && *p) {
        const char *q = strchr(p, ':');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n > 0 && n < PATH_MAX) {
            char path[PATH_MAX];
            memcpy(path, p, n);
            path[n] = '\0';
            struct stat sb;
            if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
                st = icd_scan_dir(l, path, err);
            else
                st = icd_list_add(l, path, err);
        }
        p += n + (q ? 1 : 0);
    }
    return st;
}

static wgml_status icd_candidates(icd_list *l, wgml_error *err) {
    const char *user = getenv("VK_DRIVER_FILES");
    if (!user || !*user) user = getenv("VK_ICD_FILENAMES");
    if (user && *user) {
        wgml_status st = icd_add_env_list(l, user, err);
        const char *add = getenv("VK_ADD_DRIVER_FILES");
        if (st == WGML_OK && add && *add) st = icd_add_env_list(l, add, err);
        return st;
    }
    const char *own = getenv("WGML_ICD_DIR");
#ifdef WGML_ICD_DIR
    if (!own || !*own) own = WGML_ICD_DIR;
#endif
    wgml_status st = WGML_OK;
    if (own && *own) st = icd_scan_dir(l, own, err);
    const char *add = getenv("VK_ADD_DRIVER_FILES");
    if (st == WGML_OK && add && *add) st = icd_add_env_list(l, add, err);
    for (size_t i = 0; st == WGML_OK && i < sizeof system_icd_dirs / sizeof *system_icd_dirs; i++)
        st = icd_scan_dir(l, system_icd_dirs[i], err);
    return st;
}

/* ---- the loader's environment ----------------------------------------------- */

static const char *const vk_env_names[3] = {"VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES"};

typedef struct vk_env {
    char *value[3]; /* NULL: unset */
} vk_env;

static wgml_status vk_env_save(vk_env *e, wgml_error *err) {
    memset(e, 0, sizeof *e);
    for (int i = 0; i < 3; i++) {
        const char *v = getenv(vk_env_names[i]);
        if (v && !(e->value[i] = wgml_strdup(v))) {
            for (int j = 0; j < i; j++)
                wgml_free(e->value[j]);
            return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "probing adapters: out of memory");
        }
    }
    return WGML_OK;
}

static void vk_env_restore_and_free(vk_env *e) {
    for (int i = 0; i < 3; i++) {
        if (e->value[i])
            setenv(vk_env_names[i], e->value[i], 1);
        else
            unsetenv(vk_env_names[i]);
        wgml_free(e->value[i]);
        e->value[i] = NULL;
    }
}

/* Points stderr at /dev/null; returns the saved descriptor, or -1. */
static int quiet_begin(void) {
    const char *dbg = getenv("WGML_GPU_DEBUG");
    if (dbg && *dbg && strcmp(dbg, "0") != 0) return -1;
    fflush(stderr);
    int saved = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (saved < 0) return -1;
    int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (nul < 0 || dup2(nul, STDERR_FILENO) < 0) {
        if (nul >= 0) close(nul);
        close(saved);
        return -1;
    }
    close(nul);
    return saved;
}

static void quiet_end(int saved) {
    if (saved < 0) return;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

/* ---- probing ------------------------------------------------------------------ */

typedef struct adapter_request {
    int done;
    WGPURequestAdapterStatus status;
    WGPUAdapter adapter;
    char message[256];
} adapter_request;

static void on_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message, void *u1,
                       void *u2) {
    adapter_request *r = u1;
    r->done = 1;
    r->status = status;
    r->adapter = adapter;
    wgml_dawn_sv_copy(r->message, sizeof r->message, message);
}

wgml_status wgml_dawn_open(const char *source, WGPUInstance *instance, WGPUAdapter *adapter, wgml_error *err) {
    *instance = NULL;
    *adapter = NULL;
    int is_default = strcmp(source, SOURCE_DEFAULT) == 0;
    vk_env saved;
    wgml_status st = vk_env_save(&saved, err);
    if (st != WGML_OK) return st;
    if (!is_default) {
        setenv("VK_ICD_FILENAMES", source, 1);
        setenv("VK_DRIVER_FILES", source, 1);
        unsetenv("VK_ADD_DRIVER_FILES");
    }
    int quiet = quiet_begin();

    /* Timed WaitAny (a wait with a timeout) must be asked for. */
    WGPUInstanceDescriptor idesc = WGPU_INSTANCE_DESCRIPTOR_INIT;
#ifdef WGML_DAWN_INSTANCE_CAPABILITIES
    idesc.capabilities.timedWaitAnyEnable = 1;
#else
    static const WGPUInstanceFeatureName timed_wait = WGPUInstanceFeatureName_TimedWaitAny;
    idesc.requiredFeatureCount = 1;
    idesc.requiredFeatures = &timed_wait;
#endif
    WGPUInstance inst = wgpuCreateInstance(&idesc);
    adapter_request req = {0};
    WGPUBackendType backend = WGPUBackendType_Undefined;
    if (!inst) {
        st = wgml_fail(err, WGML_ERR_GPU, "%s: could not create a WebGPU instance", source);
    } else {
        WGPURequestAdapterOptions opt = WGPU_REQUEST_ADAPTER_OPTIONS_INIT;
        opt.powerPreference = WGPUPowerPreference_HighPerformance;
        if (!is_default) opt.backendType = WGPUBackendType_Vulkan;
        WGPURequestAdapterCallbackInfo cb = WGPU_REQUEST_ADAPTER_CALLBACK_INFO_INIT;
        cb.mode = WGPUCallbackMode_WaitAnyOnly;
        cb.callback = on_adapter;
        cb.userdata1 = &req;
        WGPUFutureWaitInfo wait = {wgpuInstanceRequestAdapter(inst, &opt, cb), 0};
        WGPUWaitStatus ws = wgpuInstanceWaitAny(inst, 1, &wait, WGML_DAWN_REQUEST_TIMEOUT_NS);
        if (ws != WGPUWaitStatus_Success || !req.done)
            st = wgml_fail(err, WGML_ERR_GPU, "%s: adapter request did not complete (wait status %d)", source, (int)ws);
        else if (req.status != WGPURequestAdapterStatus_Success || !req.adapter)
            st = wgml_fail(err, WGML_ERR_NO_ADAPTER, "%s: no adapter%s%s", source, req.message[0] ? ": " : "",
                           req.message);
        if (st == WGML_OK) {
            WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
            if (wgpuAdapterGetInfo(req.adapter, &info) == WGPUStatus_Success) {
                backend = info.backendType;
                wgpuAdapterInfoFreeMembers(info);
            }
            if (backend == WGPUBackendType_Null || backend == WGPUBackendType_Undefined)
                st = wgml_fail(err, WGML_ERR_NO_ADAPTER, "%s: only Dawn's Null adapter (no working driver)", source);
        }
        if (st != WGML_OK) {
            if (req.adapter) wgpuAdapterRelease(req.adapter);
            wgpuInstanceRelease(inst); /* cancels a request still pending: req stays valid until here */
            inst = NULL;
        }
    }
    quiet_end(quiet);
    vk_env_restore_and_free(&saved);
    if (st != WGML_OK) return st;
    *instance = inst;
    *adapter = req.adapter;
    return WGML_OK;
}

static const char *backend_name(WGPUBackendType b) {
    switch (b) {
    case WGPUBackendType_Vulkan: return "vulkan";
    case WGPUBackendType_Metal: return "metal";
    case WGPUBackendType_D3D12: return "d3d12";
    case WGPUBackendType_D3D11: return "d3d11";
    case WGPUBackendType_OpenGL: return "opengl";
    case WGPUBackendType_OpenGLES: return "opengles";
    case WGPUBackendType_WebGPU: return "webgpu";
    case WGPUBackendType_Null: return "null";
    default: return "unknown";
    }
}

void wgml_dawn_adapter_info(WGPUAdapter adapter, const char *source, wgml_gpu_adapter_info *o) {
    memset(o, 0, sizeof *o);
    snprintf(o->source, sizeof o->source, "%s", source);
    WGPUAdapterInfo ai = WGPU_ADAPTER_INFO_INIT;
    if (wgpuAdapterGetInfo(adapter, &ai) == WGPUStatus_Success) {
        wgml_dawn_sv_copy(o->name, sizeof o->name, ai.device);
        wgml_dawn_sv_copy(o->vendor, sizeof o->vendor, ai.vendor);
        wgml_dawn_sv_copy(o->architecture, sizeof o->architecture, ai.architecture);
        wgml_dawn_sv_copy(o->driver, sizeof o->driver, ai.description);
        snprintf(o->backend, sizeof o->backend, "%s", backend_name(ai.backendType));
        switch (ai.adapterType) {
        case WGPUAdapterType_DiscreteGPU: o->type = WGML_GPU_DISCRETE; break;
        case WGPUAdapterType_IntegratedGPU: o->type = WGML_GPU_INTEGRATED; break;
        case WGPUAdapterType_CPU: o->type = WGML_GPU_CPU; break;
        default: o->type = WGML_GPU_UNKNOWN; break;
        }
        o->vendor_id = ai.vendorID;
        o->device_id = ai.deviceID;
        o->subgroup_min_size = ai.subgroupMinSize;
        o->subgroup_max_size = ai.subgroupMaxSize;
        wgpuAdapterInfoFreeMembers(ai);
    }
    if (!o->name[0]) snprintf(o->name, sizeof o->name, "%s", o->driver[0] ? o->driver : "unnamed adapter");
    o->has_f16 = wgpuAdapterHasFeature(adapter, WGPUFeatureName_ShaderF16) != 0;
    o->has_subgroups = wgpuAdapterHasFeature(adapter, WGPUFeatureName_Subgroups) != 0;
    o->has_timestamps = wgpuAdapterHasFeature(adapter, WGPUFeatureName_TimestampQuery) != 0;
    if (!o->has_subgroups) o->subgroup_min_size = o->subgroup_max_size = 0;
    WGPULimits l = WGPU_LIMITS_INIT;
    if (wgpuAdapterGetLimits(adapter, &l) == WGPUStatus_Success) {
        o->max_buffer_size = l.maxBufferSize;
        o->max_storage_binding_size = l.maxStorageBufferBindingSize;
        o->max_uniform_binding_size = l.maxUniformBufferBindingSize;
        o->max_storage_buffers_per_stage = l.maxStorageBuffersPerShaderStage;
        o->max_workgroup_invocations = l.maxComputeInvocationsPerWorkgroup;
        o->max_workgroup_size_x = l.maxComputeWorkgroupSizeX;
        o->max_workgroup_size_y = l.maxComputeWorkgroupSizeY;
        o->max_workgroup_size_z = l.maxComputeWorkgroupSizeZ;
        o->max_workgroup_storage = l.maxComputeWorkgroupStorageSize;
        o->max_workgroups_per_dimension = l.maxComputeWorkgroupsPerDimension;
        o->min_storage_offset_alignment = l.minStorageBufferOffsetAlignment;
        o->min_uniform_offset_alignment = l.minUniformBufferOffsetAlignment;
    }
}

/* ---- listing ------------------------------------------------------------------ */

typedef struct found_list {
    wgml_gpu_adapter_info *v;
    int n, cap;
    int probed; /* drivers tried */
} found_list;

static int same_device(const wgml_gpu_adapter_info *a, const wgml_gpu_adapter_info *b) {
    return strcmp(a->name, b->name) == 0 && strcmp(a->driver, b->driver) == 0 && strcmp(a->backend, b->backend) == 0 &&
           a->vendor_id == b->vendor_id && a->device_id == b->device_id;
}

/* Probes one source and appends its adapter unless already listed. A driver
 * without a usable device is not an error. */
static wgml_status probe_one(found_list *f, const char *source, wgml_error *err) {
    WGPUInstance inst;
    WGPUAdapter adapter;
    wgml_error perr;
    f->probed++;
    wgml_status st = wgml_dawn_open(source, &inst, &adapter, &perr);
    if (st == WGML_ERR_OUT_OF_MEMORY) return wgml_fail(err, st, "%s", perr.message);
    if (st != WGML_OK) return WGML_OK;
    wgml_gpu_adapter_info info;
    wgml_dawn_adapter_info(adapter, source, &info);
    wgpuAdapterRelease(adapter);
    wgpuInstanceRelease(inst);
    for (int i = 0; i < f->n; i++)
        if (same_device(&f->v[i], &info)) return WGML_OK;
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        wgml_gpu_adapter_info *nv = wgml_realloc(f->v, (size_t)cap * sizeof *nv);
        if (!nv) return wgml_fail(err, WGML_ERR_OUT_OF_MEMORY, "listing adapters: out of memory");
        f->v = nv;
        f->cap = cap;
    }
    f->v[f->n++] = info;
    return WGML_OK;
}

static wgml_status list_all(found_list *f, wgml_error *err) {
    memset(f, 0, sizeof *f);
    icd_list icds = {0};
    wgml_status st = icd_candidates(&icds, err);
    for (int i = 0; st == WGML_OK && i < icds.n; i++)
        st = probe_one(f, icds.path[i], err);
    if (st == WGML_OK) st = probe_one(f, SOURCE_DEFAULT, err);
    icd_list_free(&icds);
    if (st != WGML_OK) {
        wgml_free(f->v);
        memset(f, 0, sizeof *f);
    }
    return st;
}

int wgml_gpu_list_adapters(wgml_gpu_adapter_info *out, int cap, wgml_error *err) {
    found_list f;
    if (cap < 0 || (cap > 0 && !out)) {
        wgml_fail(err, WGML_ERR_INVALID_ARGUMENT, "wgml_gpu_list_adapters: bad output array");
        return -1;
    }
    if (list_all(&f, err) != WGML_OK) return -1;
    for (int i = 0; i < f.n && i < cap; i++)
        out[i] = f.v[i];
    int n = f.n;
    wgml_free(f.v);
    return n;
}

/* ---- choosing ----------------------------------------------------------------- */

static int contains_nocase(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    if (n == 0) return 1;
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return 1;
    }
    return 0;
}

static int type_rank(wgml_gpu_adapter_type t) {
    switch (t) {
    case WGML_GPU_DISCRETE: return 4;
    case WGML_GPU_INTEGRATED: return 3;
    case WGML_GPU_UNKNOWN: return 2;
    case WGML_GPU_CPU: return 1;
    }
    return 0;
}

static const char *type_name(wgml_gpu_adapter_type t) {
    switch (t) {
    case WGML_GPU_DISCRETE: return "discrete";
    case WGML_GPU_INTEGRATED: return "integrated";
    case WGML_GPU_CPU: return "software";
    case WGML_GPU_UNKNOWN: break;
    }
    return "unknown";
}

wgml_status wgml_dawn_choose(const wgml_gpu_options *opt, wgml_gpu_adapter_info *chosen, wgml_error *err) {
    found_list f;
    wgml_status st = list_all(&f, err);
    if (st != WGML_OK) return st;
    const char *want = opt->adapter && *opt->adapter ? opt->adapter : NULL;
    int best = -1, best_rank = 0;
    for (int i = 0; i < f.n; i++) {
        if (want ? !contains_nocase(f.v[i].name, want) : (f.v[i].type == WGML_GPU_CPU && !opt->allow_software))
            continue;
        int r = type_rank(f.v[i].type);
        if (r > best_rank) {
            best = i;
            best_rank = r;
        }
    }
    if (best >= 0) {
        *chosen = f.v[best];
        wgml_free(f.v);
        return WGML_OK;
    }
    char found[WGML_ERROR_MESSAGE_MAX] = "";
    size_t pos = 0;
    for (int i = 0; i < f.n && pos < sizeof found; i++) {
        int w = snprintf(found + pos, sizeof found - pos, "%s%s (%s, %s)", i ? "; " : "", f.v[i].name,
                         type_name(f.v[i].type), f.v[i].backend);
        if (w < 0) break;
        pos += (size_t)w;
    }
    int n = f.n;
    wgml_free(f.v);
    if (n == 0)
        return wgml_fail(err, WGML_ERR_NO_ADAPTER,
                         "no WebGPU adapter found (%d Vulkan drivers probed; scripts/setup-deps.sh installs the "
                         "software ones; WGML_GPU_DEBUG=1 shows driver messages)",
                         f.probed - 1);
    if (want) return wgml_fail(err, WGML_ERR_NO_ADAPTER, "no adapter matches '%s'; found: %s", want, found);
    return wgml_fail(err, WGML_ERR_NO_ADAPTER,
                     "no hardware adapter (software adapters need allow_software or a name); found: %s", found);
}
