/*
 * cmd_devices.c - `wgml devices`: every WebGPU adapter this machine offers,
 * with its backend, vendor, the features wgml uses and the limits that
 * matter (buffer and binding sizes, workgroup limits).
 */
#include <json-c/json.h>
#include <string.h>

#include "cli.h"
#include "tools_internal.h"

typedef struct {
    int json;
} devices_opts;

static const cli_opt options[] = {
    CLI_FLAG("--json", NULL, devices_opts, json, "print the adapters as a JSON array"),
    CLI_END,
};

static const cli_spec spec = {
    .usage = "usage: wgml devices [--json]\n",
    .about = "Lists the WebGPU adapters (hardware and software) with their features and limits.\n"
             "Software adapters (SwiftShader, lavapipe) are used only when named with --adapter.\n",
    .opts = options,
};

static const char *type_name(wgml_gpu_adapter_type t) {
    switch (t) {
    case WGML_GPU_DISCRETE: return "discrete GPU";
    case WGML_GPU_INTEGRATED: return "integrated GPU";
    case WGML_GPU_CPU: return "CPU (software)";
    default: return "unknown";
    }
}

static void mib(char *b, size_t n, uint64_t v) {
    if (v >= (1ull << 30)) snprintf(b, n, "%.1f GiB", v / 1073741824.0);
    else snprintf(b, n, "%.0f MiB", v / 1048576.0);
}

int cmd_devices(int argc, char **argv) {
    devices_opts opt = {0};
    int rc = cli_parse(&spec, &opt, argc, argv, NULL);
    if (rc >= 0) return rc;
    const int json = opt.json;
    wgml_gpu_adapter_info a[16];
    wgml_error err;
    int n = wgml_gpu_list_adapters(a, 16, &err);
    if (n < 0) return cli_fail_err(&err);
    if (n > 16) n = 16;
    if (json) {
        json_object *arr = json_object_new_array();
        for (int i = 0; i < n; i++) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "name", json_object_new_string(a[i].name));
            json_object_object_add(o, "vendor", json_object_new_string(a[i].vendor));
            json_object_object_add(o, "backend", json_object_new_string(a[i].backend));
            json_object_object_add(o, "type", json_object_new_string(type_name(a[i].type)));
            json_object_object_add(o, "driver", json_object_new_string(a[i].driver));
            json_object_object_add(o, "source", json_object_new_string(a[i].source));
            json_object_object_add(o, "shader_f16", json_object_new_boolean(a[i].has_f16));
            json_object_object_add(o, "subgroups", json_object_new_boolean(a[i].has_subgroups));
            json_object_object_add(o, "subgroup_min_size", json_object_new_int((int)a[i].subgroup_min_size));
            json_object_object_add(o, "subgroup_max_size", json_object_new_int((int)a[i].subgroup_max_size));
            json_object_object_add(o, "timestamp_query", json_object_new_boolean(a[i].has_timestamps));
            json_object_object_add(o, "max_buffer_size", json_object_new_int64((int64_t)a[i].max_buffer_size));
            json_object_object_add(o, "max_storage_binding_size",
                                   json_object_new_int64((int64_t)a[i].max_storage_binding_size));
            json_object_object_add(o, "max_storage_buffers_per_stage",
                                   json_object_new_int((int)a[i].max_storage_buffers_per_stage));
            json_object_object_add(o, "max_workgroup_invocations",
                                   json_object_new_int((int)a[i].max_workgroup_invocations));
            json_object_object_add(o, "max_workgroup_storage", json_object_new_int((int)a[i].max_workgroup_storage));
            json_object_object_add(o, "max_workgroups_per_dimension",
                                   json_object_new_int64(a[i].max_workgroups_per_dimension));
            json_object_array_add(arr, o);
        }
        printf("%s\n", json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(arr);
        return CLI_OK;
    }
    if (n == 0) {
        printf("no WebGPU adapter found (wgml runs on the CPU backend)\n");
        return CLI_OK;
    }
    for (int i = 0; i < n; i++) {
        char buf[32], bind[32];
        mib(buf, sizeof buf, a[i].max_buffer_size);
        mib(bind, sizeof bind, a[i].max_storage_binding_size);
        printf("%d  %s\n", i, a[i].name);
        printf("   %s, %s, vendor %s (0x%04x), device 0x%04x\n", a[i].backend, type_name(a[i].type),
               *a[i].vendor ? a[i].vendor : "?", a[i].vendor_id, a[i].device_id);
        if (*a[i].driver) printf("   driver: %s\n", a[i].driver);
        printf("   features: shader-f16 %s, subgroups %s", a[i].has_f16 ? "yes" : "no", a[i].has_subgroups ? "yes" : "no");
        if (a[i].has_subgroups) printf(" (size %u..%u)", a[i].subgroup_min_size, a[i].subgroup_max_size);
        printf(", timestamp-query %s\n", a[i].has_timestamps ? "yes" : "no");
        printf("   limits: buffer %s, storage binding %s, %u storage buffers/stage, workgroup %u invocations / %u KiB\n",
               buf, bind, a[i].max_storage_buffers_per_stage, a[i].max_workgroup_invocations,
               a[i].max_workgroup_storage / 1024);
        printf("   found via: %s\n", a[i].source);
    }
    return CLI_OK;
}
