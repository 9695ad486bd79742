/*
 * cli_json.c - the JSON pieces the commands share (json-c), apart from
 * cli_util.c so that the fuzzed subcommands (cmake/fuzz.cmake) need no json-c.
 */
#include <json-c/json.h>

#include "cli.h"

struct json_object *cli_kernels_json(const wgml_kernel_stat *kt, int n) {
    json_object *k = json_object_new_array();
    for (int i = 0; i < n; i++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "name", json_object_new_string(kt[i].name));
        json_object_object_add(e, "calls", json_object_new_int64((int64_t)kt[i].calls));
        json_object_object_add(e, "total_ms", json_object_new_double(kt[i].total_ms));
        json_object_array_add(k, e);
    }
    return k;
}
