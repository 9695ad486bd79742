/*
 * test_chat_template.c - chat templates (src/chat/): every case of the shared
 * test vectors (../shared/chat: 46 real templates, 276 conversations, the
 * prompt Hugging Face's apply_chat_template makes) byte for byte through
 * wgml_chat_render; the Jinja language statement by statement, filter by
 * filter (expected texts from Jinja2 3.1 in HF's configuration); errors with
 * their line and column; raise_exception; hostile templates (deep nesting,
 * runaway recursion, huge ranges and strings, endless loops) ending in a clean
 * error within the budgets; out-of-memory at every allocation; the JSON
 * reader; the built-in fallbacks and how a model's template is chosen.
 */
#include "chat/chat_template.h"
#include "chat/jinja.h"
#include "core/alloc.h"
#include "format/gguf.h"
#include "model/family.h"
#include "testutil.h"
#include "wgml.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The variables of the language cases (extra_json) and their messages. */
static const char *k_vars =
    "{\"x\": 3, \"f\": 2.5, \"s\": \"Hello World\", \"l\": [3, 1, 2], \"d\": {\"b\": 1, \"a\": 2, \"C\": 3}, "
    "\"n\": null, \"t\": true, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": "
    "\"d\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, \"required\": "
    "[\"a\"]}}}]}";
static const char *k_messages = "[{\"role\": \"system\", \"content\": \"Sys\"}, {\"role\": \"user\", \"content\": "
                                "\"Hi \\u00dcn\\u00ef\"}, {\"role\": \"assistant\", \"content\": \"Yo\"}]";

static wgml_chat_params lang_params(void) {
    wgml_chat_params p = wgml_chat_default_params();
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.now = "2026-11-24 09:30:00";
    p.extra_json = k_vars;
    return p;
}

/* Renders tmpl with the language variables; returns the prompt (caller frees) or NULL with err set. */
static char *render(const char *tmpl, wgml_error *err) {
    wgml_chat_params p = lang_params();
    char *out = NULL;
    err->code = WGML_OK;
    err->message[0] = '\0';
    wgml_status st = wgml_chat_render(tmpl, k_messages, &p, &out, err);
    if (st) {
        assert_null(out);
        assert_int_equal(err->code, st);
        return NULL;
    }
    assert_non_null(out);
    return out;
}

/* ---- the shared vectors ------------------------------------------------------ */

static void test_shared_cases(void **state) {
    (void)state;
    size_t n;
    char *all = (char *)tu_read_file(tu_shared("chat/cases.jsonl"), &n);
    assert_non_null(all);
    int total = 0, passed = 0;
    for (char *line = all, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (!*line) continue;
        json_object *c = json_tokener_parse(line);
        assert_non_null(c);
        json_object *name, *messages, *agp, *bos, *eos, *expected = NULL, *error = NULL, *conv;
        assert_true(json_object_object_get_ex(c, "template", &name));
        assert_true(json_object_object_get_ex(c, "conversation", &conv));
        assert_true(json_object_object_get_ex(c, "messages", &messages));
        assert_true(json_object_object_get_ex(c, "add_generation_prompt", &agp));
        assert_true(json_object_object_get_ex(c, "bos_token", &bos));
        assert_true(json_object_object_get_ex(c, "eos_token", &eos));
        json_object_object_get_ex(c, "expected", &expected);
        json_object_object_get_ex(c, "error", &error);
        assert_true(expected || error);
        char rel[512];
        snprintf(rel, sizeof rel, "chat/templates/%s.jinja", json_object_get_string(name));
        size_t tn;
        char *tmpl = (char *)tu_read_file(tu_shared(rel), &tn);
        assert_non_null(tmpl);
        wgml_chat_params p = wgml_chat_default_params();
        p.add_generation_prompt = json_object_get_boolean(agp);
        p.bos_token = json_object_get_string(bos);
        p.eos_token = json_object_get_string(eos);
        p.now = "2026-11-24 09:30:00";
        const char *mj =
            json_object_to_json_string_ext(messages, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        char *out = NULL;
        wgml_error err;
        wgml_status st = wgml_chat_render(tmpl, mj, &p, &out, &err);
        int ok;
        if (expected)
            ok = st == WGML_OK && strcmp(out, json_object_get_string(expected)) == 0;
        else
            ok = st == WGML_ERR_TEMPLATE && strcmp(err.message, json_object_get_string(error)) == 0;
        if (!ok)
            print_error("chat case %s/%s differs: %s\n--- got\n%s\n--- expected\n%s\n", json_object_get_string(name),
                        json_object_get_string(conv), st ? err.message : "ok", out ? out : "",
                        expected ? json_object_get_string(expected) : json_object_get_string(error));
        passed += ok;
        total++;
        free(out);
        free(tmpl);
        json_object_put(c);
    }
    free(all);
    printf("chat template cases: %d of %d reproduce byte for byte\n", passed, total);
    assert_int_equal(total, 276);
    assert_int_equal(passed, total);
}

/* Real templates down their tool paths (tools given, an assistant's tool call, a tool's
 * answer): expected texts from Jinja2 3.1 in HF's configuration, including its quirks
 * (functionary's "..."|safe + tojson escapes the JSON; Hermes looks a list's .type up in a
 * dict; Mistral Nemo refuses a tool call id that is not 9 alphanumerics). */
typedef struct {
    const char *tmpl, *messages, *extra, *expected, *error;
} tool_case;

static const tool_case k_tool_cases[] = {
    {"meta-llama-Llama-3.1-8B-Instruct",
     "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", "
     "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
     "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", "
     "\"name\": \"get_weather\", \"content\": \"{\\\"temp\\\": 21}\"}, {\"role\": \"assistant\", \"content\": \"It is "
     "21 C.\"}, {\"role\": \"user\", \"content\": \"Thanks!\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     "<s><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December "
     "2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following "
     "functions, please respond with a JSON for a function call with its proper arguments that best answers the given "
     "prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
     "value}.Do not use variables.\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
     "\"get_weather\",\n        \"description\": \"Get the weather for a city.\",\n        \"parameters\": {\n         "
     "   \"type\": \"object\",\n            \"properties\": {\n                \"city\": {\n                    "
     "\"type\": \"string\",\n                    \"description\": \"City name\"\n                },\n                "
     "\"unit\": {\n                    \"type\": \"string\",\n                    \"enum\": [\n                        "
     "\"c\",\n                        \"f\"\n                    ],\n                    \"description\": \"Unit\"\n   "
     "             },\n                \"days\": {\n                    \"type\": \"integer\",\n                    "
     "\"default\": 1\n                }\n            },\n            \"required\": [\n                \"city\"\n       "
     "     ]\n        }\n    }\n}\n\n{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
     "\"search\",\n        \"description\": \"Search the web\",\n        \"parameters\": {\n            \"type\": "
     "\"object\",\n            \"properties\": {\n                \"q\": {\n                    \"type\": \"string\"\n "
     "               },\n                \"n\": {\n                    \"type\": \"array\",\n                    "
     "\"items\": {\n                        \"type\": \"number\"\n                    }\n                }\n           "
     " },\n            \"required\": [\n                \"q\"\n            ]\n        }\n    }\n}\n\nWeather in "
     "Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
     "{\"city\": \"Paris\", \"unit\": \"c\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": "
     "21}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nIt is 21 "
     "C.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nThanks!<|eot_id|><|start_header_id|>assistant<|end_"
     "header_id|>\n\n",
     NULL},
    {"Qwen-Qwen2.5-7B-Instruct",
     "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", "
     "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
     "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", "
     "\"name\": \"get_weather\", \"content\": \"{\\\"temp\\\": 21}\"}, {\"role\": \"assistant\", \"content\": \"It is "
     "21 C.\"}, {\"role\": \"user\", \"content\": \"Thanks!\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n# Tools\n\nYou may "
     "call one or more functions to assist with the user query.\n\nYou are provided with function signatures within "
     "<tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
     "\"description\": \"Get the weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": "
     "{\"city\": {\"type\": \"string\", \"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": "
     "[\"c\", \"f\"], \"description\": \"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": "
     "[\"city\"]}}}\n{\"type\": \"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the "
     "web\", \"parameters\": {\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": "
     "\"array\", \"items\": {\"type\": \"number\"}}}, \"required\": [\"q\"]}}}\n</tools>\n\nFor each function call, "
     "return a json object with function name and arguments within <tool_call></tool_call> XML "
     "tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
     "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in "
     "Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
     "\"Paris\", \"unit\": \"c\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": "
     "21}\n</tool_response><|im_end|>\n<|im_start|>assistant\nIt is 21 "
     "C.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n",
     NULL},
    {"meetkai-functionary-medium-v3.1",
     "[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\": \"Weather in "
     "Paris?\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     "<s><|start_header_id|>system<|end_header_id|>\n\n\nCutting Knowledge Date: December 2023\n\n\nYou have access to "
     "the following functions:\n\nUse the function 'get_weather' to 'Get the weather for a city.'\n{&#34;name&#34;: "
     "&#34;get_weather&#34;, &#34;description&#34;: &#34;Get the weather for a city.&#34;, &#34;parameters&#34;: "
     "{&#34;type&#34;: &#34;object&#34;, &#34;properties&#34;: {&#34;city&#34;: {&#34;type&#34;: &#34;string&#34;, "
     "&#34;description&#34;: &#34;City name&#34;}, &#34;unit&#34;: {&#34;type&#34;: &#34;string&#34;, &#34;enum&#34;: "
     "[&#34;c&#34;, &#34;f&#34;], &#34;description&#34;: &#34;Unit&#34;}, &#34;days&#34;: {&#34;type&#34;: "
     "&#34;integer&#34;, &#34;default&#34;: 1}}, &#34;required&#34;: [&#34;city&#34;]}}\n\nUse the function 'search' "
     "to 'Search the web'\n{&#34;name&#34;: &#34;search&#34;, &#34;description&#34;: &#34;Search the web&#34;, "
     "&#34;parameters&#34;: {&#34;type&#34;: &#34;object&#34;, &#34;properties&#34;: {&#34;q&#34;: {&#34;type&#34;: "
     "&#34;string&#34;}, &#34;n&#34;: {&#34;type&#34;: &#34;array&#34;, &#34;items&#34;: {&#34;type&#34;: "
     "&#34;number&#34;}}}, &#34;required&#34;: [&#34;q&#34;]}}\n\n\nThink very carefully before calling functions.\nIf "
     "a you choose to call a function ONLY reply in the following "
     "format:\n<{start_tag}={function_name}>{parameters}{end_tag}\nwhere\n\nstart_tag => `<function`\nparameters => a "
     "JSON dict with the function argument name as key and function argument value as value.\nend_tag => "
     "`</function>`\n\nHere is an example,\n<function=example_function_name>{\"example_name\": "
     "\"example_value\"}</function>\n\nReminder:\n- If looking for real time information use relevant functions before "
     "falling back to brave_search\n- Function calls MUST follow the specified format, start with <function= and end "
     "with </function>\n- Required parameters MUST be specified\n- Only call one function at a time\n- Put the entire "
     "function call reply on one line\n\n<|eot_id|><|start_header_id|>system<|end_header_id|>\n\nYou are "
     "helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWeather in "
     "Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
     NULL},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
     "[{\"role\": \"system\", \"content\": \"You are helpful.\"}, {\"role\": \"user\", \"content\": \"Weather in "
     "Paris?\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     "<s><|im_start|>system\nYou are a function calling AI model. You are provided with function signatures within "
     "<tools></tools> XML tags. You may call one or more functions to assist with the user query. Don't make "
     "assumptions about what values to plug into functions. Here are the available tools: <tools> {\"type\": "
     "\"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"get_weather(city: str, unit: str, "
     "days: int) - Get the weather for a city.\n\n    Args:\n        city(str): City name        unit(str): Unit       "
     " days(int): \", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}\n{\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"search(q: str, n: list[Union[]]) - Search "
     "the web\n\n    Args:\n        q(str):         n(list[Union[]]): \", \"parameters\": {\"type\": \"object\", "
     "\"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": {\"type\": "
     "\"number\"}}}, \"required\": [\"q\"]}} </tools>Use the following pydantic model json schema for each tool call "
     "you will make: {\"properties\": {\"name\": {\"title\": \"Name\", \"type\": \"string\"}, \"arguments\": "
     "{\"title\": \"Arguments\", \"type\": \"object\"}}, \"required\": [\"name\", \"arguments\"], \"title\": "
     "\"FunctionCall\", \"type\": \"object\"}}\nFor each function call return a json object with function name and "
     "arguments within <tool_call></tool_call> XML tags as follows:\n<tool_call>\n{\"name\": <function-name>, "
     "\"arguments\": <args-dict>}\n</tool_call><|im_end|>\n<|im_start|>system\nYou are "
     "helpful.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n",
     NULL},
    {"google-gemma-4-31B-it",
     "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", "
     "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
     "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", "
     "\"name\": \"get_weather\", \"content\": \"{\\\"temp\\\": 21}\"}, {\"role\": \"assistant\", \"content\": \"It is "
     "21 C.\"}, {\"role\": \"user\", \"content\": \"Thanks!\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     "<s><|turn>system\n<|tool>declaration:get_weather{description:<|\"|>Get the weather for a "
     "city.<|\"|>,parameters:{properties:{city:{description:<|\"|>City "
     "name<|\"|>,type:<|\"|>STRING<|\"|>},days:{type:<|\"|>INTEGER<|\"|>},unit:{description:<|\"|>Unit<|\"|>,enum:[<|"
     "\"|>c<|\"|>,<|\"|>f<|\"|>],type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|>"
     "<|tool>declaration:search{description:<|\"|>Search the "
     "web<|\"|>,parameters:{properties:{n:{items:{type:<|\"|>NUMBER<|\"|>},type:<|\"|>ARRAY<|\"|>},q:{type:<|\"|>"
     "STRING<|\"|>}},required:[<|\"|>q<|\"|>],type:<|\"|>OBJECT<|\"|>}}<tool|><turn|>\n<|turn>user\nWeather in "
     "Paris?<turn|>\n<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,unit:<|\"|>c<|\"|>}<tool_call|><"
     "|tool_response>response:get_weather{value:<|\"|>{\"temp\": 21}<|\"|>}<tool_response|>It is 21 "
     "C.<turn|>\n<|turn>user\nThanks!<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
     NULL},
    {"mistralai-Mistral-Nemo-Instruct-2407",
     "[{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": "
     "[{\"id\": \"call_2\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
     "\"{\\\"city\\\": \\\"Oslo\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_2\", \"content\": \"cold\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     NULL, "Tool call IDs should be alphanumeric strings with length 9!"},
    {"Qwen3-Coder",
     "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", "
     "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
     "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", "
     "\"name\": \"get_weather\", \"content\": \"{\\\"temp\\\": 21}\"}, {\"role\": \"assistant\", \"content\": \"It is "
     "21 C.\"}, {\"role\": \"user\", \"content\": \"Thanks!\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     "<|im_start|>system\nYou are Qwen, a helpful AI assistant that can interact with a computer to solve tasks.\n\n# "
     "Tools\n\nYou have access to the following "
     "tools:\n\n<tools>\n<function>\n<name>get_weather</name>\n<description>Get the weather for a "
     "city.</description>\n<parameters>\n<parameter>\n<name>city</name>\n<type>string</type>\n<description>City "
     "name</description>\n</parameter>\n<parameter>\n<name>unit</name>\n<type>string</type>\n<description>Unit</"
     "description>\n<enum>[\"c\", "
     "\"f\"]</enum>\n</parameter>\n<parameter>\n<name>days</name>\n<type>integer</type>\n<default>1</default>\n</"
     "parameter>\n<required>[\"city\"]</required>\n</parameters>\n</function>\n<function>\n<name>search</"
     "name>\n<description>Search the "
     "web</description>\n<parameters>\n<parameter>\n<name>q</name>\n<type>string</type>\n</"
     "parameter>\n<parameter>\n<name>n</name>\n<type>array</type>\n<items>{\"type\": "
     "\"number\"}</items>\n</parameter>\n<required>[\"q\"]</required>\n</parameters>\n</function>\n</tools>\n\nIf you "
     "choose to call a tool ONLY reply in the following format with NO "
     "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</"
     "parameter>\n<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n</"
     "tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: the tool calling block "
     "MUST begin with an opening <tool_call> tag and end with a closing </tool_call> tag.\n- Required parameters MUST "
     "be specified\n- You may provide optional reasoning for your function call in natural language BEFORE the "
     "function call, but NOT after\n- If there is no function call available, answer the question like normal with "
     "your current knowledge and do not tell the user about function "
     "calls\n</IMPORTANT><|im_end|>\n<|im_start|>user\nWeather in "
     "Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</"
     "parameter>\n<parameter=unit>\nc\n</parameter>\n</function>\n</"
     "tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temp\": "
     "21}\n</tool_response>\n<|im_end|>\n<|im_start|>assistant\nIt is 21 "
     "C.<|im_end|>\n<|im_start|>user\nThanks!<|im_end|>\n<|im_start|>assistant\n",
     NULL},
    {"ibm-granite-granite-3.3-2B-Instruct",
     "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": \"\", "
     "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
     "\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1\", "
     "\"name\": \"get_weather\", \"content\": \"{\\\"temp\\\": 21}\"}, {\"role\": \"assistant\", \"content\": \"It is "
     "21 C.\"}, {\"role\": \"user\", \"content\": \"Thanks!\"}]",
     "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Get the "
     "weather for a city.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
     "\"description\": \"City name\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"], \"description\": "
     "\"Unit\"}, \"days\": {\"type\": \"integer\", \"default\": 1}}, \"required\": [\"city\"]}}}, {\"type\": "
     "\"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"parameters\": "
     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"array\", \"items\": "
     "{\"type\": \"number\"}}}, \"required\": [\"q\"]}}}]}",
     "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: November 24, 2026. You "
     "are Granite, developed by IBM. You are a helpful assistant with access to the following tools. When a tool is "
     "required to answer the user's query, respond only with <|tool_call|> followed by a JSON list of tools used. If a "
     "tool does not exist in the provided list of tools, notify the user that you do not have the ability to fulfill "
     "the request.<|end_of_text|>\n<|start_of_role|>available_tools<|end_of_role|>[\n    {\n        \"type\": "
     "\"function\",\n        \"function\": {\n            \"name\": \"get_weather\",\n            \"description\": "
     "\"Get the weather for a city.\",\n            \"parameters\": {\n                \"type\": \"object\",\n         "
     "       \"properties\": {\n                    \"city\": {\n                        \"type\": \"string\",\n       "
     "                 \"description\": \"City name\"\n                    },\n                    \"unit\": {\n       "
     "                 \"type\": \"string\",\n                        \"enum\": [\n                            "
     "\"c\",\n                            \"f\"\n                        ],\n                        \"description\": "
     "\"Unit\"\n                    },\n                    \"days\": {\n                        \"type\": "
     "\"integer\",\n                        \"default\": 1\n                    }\n                },\n                "
     "\"required\": [\n                    \"city\"\n                ]\n            }\n        }\n    },\n    {\n      "
     "  \"type\": \"function\",\n        \"function\": {\n            \"name\": \"search\",\n            "
     "\"description\": \"Search the web\",\n            \"parameters\": {\n                \"type\": \"object\",\n     "
     "           \"properties\": {\n                    \"q\": {\n                        \"type\": \"string\"\n       "
     "             },\n                    \"n\": {\n                        \"type\": \"array\",\n                    "
     "    \"items\": {\n                            \"type\": \"number\"\n                        }\n                  "
     "  }\n                },\n                \"required\": [\n                    \"q\"\n                ]\n         "
     "   }\n        }\n    }\n]<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Weather in "
     "Paris?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><|end_of_text|>\n<|start_of_role|>tool<|end_of_"
     "role|>{\"temp\": 21}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>It is 21 "
     "C.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Thanks!<|end_of_text|>\n<|start_of_role|>assistant<|end_"
     "of_role|>",
     NULL},
};

static void test_tool_paths(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_tool_cases / sizeof k_tool_cases[0]; i++) {
        char rel[512];
        snprintf(rel, sizeof rel, "chat/templates/%s.jinja", k_tool_cases[i].tmpl);
        size_t n;
        char *tmpl = (char *)tu_read_file(tu_shared(rel), &n);
        assert_non_null(tmpl);
        wgml_chat_params p = wgml_chat_default_params();
        p.bos_token = "<s>";
        p.eos_token = "</s>";
        p.now = "2026-11-24 09:30:00";
        p.extra_json = k_tool_cases[i].extra;
        char *out = NULL;
        wgml_error err;
        wgml_status st = wgml_chat_render(tmpl, k_tool_cases[i].messages, &p, &out, &err);
        if (k_tool_cases[i].expected) {
            if (st || strcmp(out, k_tool_cases[i].expected))
                print_error("%s:\n--- got\n%s\n--- expected\n%s\n", k_tool_cases[i].tmpl, st ? err.message : out,
                            k_tool_cases[i].expected);
            assert_int_equal(st, WGML_OK);
            assert_string_equal(out, k_tool_cases[i].expected);
        } else {
            assert_int_equal(st, WGML_ERR_TEMPLATE);
            assert_string_equal(err.message, k_tool_cases[i].error);
        }
        free(out);
        free(tmpl);
    }
}

/* ---- the language ---------------------------------------------------------------- */

typedef struct {
    const char *tmpl, *expected;
} lang_case;

static const lang_case k_lang[] = {
    {"{{ 1.0 }} {{ 10**18 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 0.1+0.2 }} {{ 3/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % "
     "3 }} {{ 2**-1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
     "1.0 1000000000000000000 1e+16 1.5e-05 0.30000000000000004 1.5 2.0 3 -4 2 0.5 3.0 0.5"},
    {"{{ [1, \"a\", none, true, 1.5, {\"k\": [1,2]}, (1,), (1,2), ()] }}",
     "[1, 'a', None, True, 1.5, {'k': [1, 2]}, (1,), (1, 2), ()]"},
    {"{{ \"it's\" }} {{ [\"it's\", 'a\"b', \"x\\ny\", \"tab\\t\", \"\303\274\", \"\\x01\"] }}",
     "it's [\"it's\", 'a\"b', 'x\\ny', 'tab\\t', '\303\274', '\\x01']"},
    {"{{ x.y }}", ""},
    {"{% macro m(a, b=2) %}{{a}}{{b}}{{varargs}}{{kwargs}}{% endmacro %}{{ m(1) }}{{ m(1,2,3,c=4) }}",
     "12(){}12(3,){'c': 4}"},
    {"{{ \"abc\"[::-1] }} {{ [1,2,3][1:] }} {{ \"abc\"[5:] }} {{ l[-1] }} {{ l[::2] }} {{ s[1:-1:2] }} {{ "
     "\"h\303\251llo\"[1:3] }}",
     "cba [2, 3]  2 [3, 2] el ol \303\251l"},
    {"{% for i in range(3) %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ "
     "loop.revindex }}{{ loop.revindex0 }}|{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a','b') }};{% endfor "
     "%}",
     "10TrueFalse332||1|a;21FalseFalse321|0|2|b;32FalseTrue310|1||a;"},
    {"{% for i in [] %}x{% else %}empty{% endfor %}", "empty"},
    {"{% for i in range(10) if i is odd %}{{ i }}{% if loop.last %}L{{ loop.length }}{% endif %}{% endfor %}",
     "13579L5"},
    {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% "
     "endfor %}",
     "0134"},
    {"{% set ns = namespace(a=1, b=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}", "4"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", "12(1, 2)"},
    {"{% set x %}  inner {{ s }} {% endset %}[{{ x }}]{% set y | upper | trim %} abc {% endset %}[{{ y }}]",
     "[  inner Hello World ][ABC]"},
    {"{{ s | upper }} {{ s | lower }} {{ \"hello world\" | capitalize }} {{ \"hello wORLD-foo bar(x\" | title }} {{ "
     "s.title() }} {{ \"a-b c_d e1f\".title() }}",
     "HELLO WORLD hello world Hello world Hello World-Foo Bar(X Hello World A-B C_D E1F"},
    {"{{ \"  x y  \" | trim }}|{{ \"xxhixx\" | trim(\"x\") }}|{{ \"  a b \".strip() }}|{{ \"..a..\".strip(\".\") }}|{{ "
     "\" a \".lstrip() }}|{{ \" a \".rstrip() }}|",
     "x y|hi|a b|a|a | a|"},
    {"{{ \" a  b c \".split() }} {{ \"a,b,,c\".split(\",\") }} {{ \"a b c\".split(\" \", 1) }} {{ "
     "\"a,b,c\".rsplit(\",\", 1) }} {{ \" a b  c \".split(None, 1) }} {{ \"\".split() }} {{ \"\".split(\",\") }}",
     "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b c'] ['a,b', 'c'] ['a', 'b  c '] [] ['']"},
    {"{{ s.startswith(\"He\") }} {{ s.endswith((\"x\", \"ld\")) }} {{ s.replace(\"o\", \"0\") }} {{ s.replace(\"o\", "
     "\"0\", 1) }} {{ s.find(\"o\") }} {{ s.rfind(\"o\") }} {{ s.find(\"z\") }} {{ s.count(\"o\") }}",
     "True True Hell0 W0rld Hell0 World 4 7 -1 2"},
    {"{{ \"{} and {}\".format(1, \"b\") }} {{ \"{0}{0}{1}\".format(\"a\", 2) }} {{ \"{name}!\".format(name=\"x\") }} "
     "{{ \"{{}}\".format() }}",
     "1 and b aa2 x! {}"},
    {"{{ d.get(\"a\") }} {{ d.get(\"z\") }} {{ d.get(\"z\", 5) }} {{ d.items() }} {{ d.keys() }} {{ d.values() }} {{ d "
     "| items | list }}",
     "2 None 5 dict_items([('b', 1), ('a', 2), ('C', 3)]) dict_keys(['b', 'a', 'C']) dict_values([1, 2, 3]) [('b', 1), "
     "('a', 2), ('C', 3)]"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k, v in d | dictsort %}{{ k }}={{ v }};{% endfor "
     "%}{% for k, v in d | dictsort(true) %}{{ k }}{% endfor %}{% for k, v in d | dictsort(by='value', reverse=true) "
     "%}{{ k }}{% endfor %}",
     "b=1;a=2;C=3;a=2;b=1;C=3;CabCab"},
    {"{{ tools | tojson }}",
     "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\", \"parameters\": {\"type\": "
     "\"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, \"required\": [\"a\"]}}}]"},
    {"{{ tools[0].function.parameters | tojson(indent=4) }}",
     "{\n    \"type\": \"object\",\n    \"properties\": {\n        \"a\": {\n            \"type\": \"string\"\n        "
     "}\n    },\n    \"required\": [\n        \"a\"\n    ]\n}"},
    {"{{ l | length }} {{ s | length }} {{ d | count }} {{ \"\303\274n\303\257\" | length }} {{ l | join(\",\") }} {{ "
     "l | join }} {{ messages | map(attribute=\"role\") | join(\"|\") }} {{ messages | map(attribute=\"role\") | list "
     "}}",
     "3 11 3 3 3,1,2 312 system|user|assistant ['system', 'user', 'assistant']"},
    {"{{ messages | selectattr(\"role\", \"equalto\", \"user\") | list | length }} {{ messages | rejectattr(\"role\", "
     "\"eq\", \"user\") | map(attribute=\"content\") | list }} {{ l | select(\"odd\") | list }} {{ l | reject(\"odd\") "
     "| list }} {{ [0, 1, \"\", \"a\", none] | select | list }}",
     "1 ['Sys', 'Yo'] [3, 1] [2] [1, 'a']"},
    {"{{ l | first }} {{ l | last }} {{ s | first }} {{ [] | first }}|{{ l | sort }} {{ l | sort(reverse=true) }} {{ "
     "[\"b\", \"A\", \"c\"] | sort }} {{ [\"b\", \"A\", \"c\"] | sort(case_sensitive=true) }} {{ messages | "
     "sort(attribute=\"role\") | map(attribute=\"role\") | list }}",
     "3 2 H |[1, 2, 3] [3, 2, 1] ['A', 'b', 'c'] ['A', 'b', 'c'] ['assistant', 'system', 'user']"},
    {"{{ undefined_var | default(\"dflt\") }} {{ \"\" | default(\"e\") }} {{ \"\" | default(\"e\", true) }} {{ none | "
     "default(\"n\") }} {{ none | d(\"n\", true) }} {{ x | d(1) }}",
     "dflt  e None n 3"},
    {"{{ \"12\" | int }} {{ \"1.7\" | int }} {{ \"abc\" | int }} {{ \"abc\" | int(5) }} {{ 3.9 | int }} {{ \"2.5\" | "
     "float }} {{ 3 | float }} {{ -3 | abs }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 3.5 | round }} {{ -2.5 | "
     "round }} {{ 2.1 | round(0, 'ceil') }}",
     "12 1 0 5 3 2.5 3.0 3 2.57 2.0 4.0 -2.0 3.0"},
    {"{{ [1, 2, 1, 3] | unique | list }} {{ [\"a\", \"A\", \"b\"] | unique | list }} {{ l | reverse | list }} {{ s | "
     "reverse }} {{ range(7) | batch(3) | list }} {{ range(7) | batch(3, 0) | list }} {{ \"a b  c\" | wordcount }} {{ "
     "\"<a href='x'>&\" | e }} {{ s | safe }} {{ [1, 2] | string }}",
     "[1, 2, 3] ['a', 'b'] [2, 1, 3] dlroW olleH [[0, 1, 2], [3, 4, 5], [6]] [[0, 1, 2], [3, 4, 5], [6, 0, 0]] 3 &lt;a "
     "href=&#39;x&#39;&gt;&amp; Hello World [1, 2]"},
    {"{{ \"line1\\nline2\\n\\nline4\" | indent(2) }}|{{ \"a\\nb\" | indent(2, true) }}|{{ \"a\\n\\nb\" | indent(2, "
     "blank=true) }}|{{ \"a\\nb\" | indent(\"> \") }}",
     "line1\n  line2\n\n  line4|  a\n  b|a\n  \n  b|a\n> b"},
    {"{{ x is defined }} {{ nope is defined }} {{ nope is undefined }} {{ n is none }} {{ x is number }} {{ f is float "
     "}} {{ x is integer }} {{ t is boolean }} {{ t is true }} {{ t is false }} {{ s is string }} {{ d is mapping }} "
     "{{ l is iterable }} {{ s is iterable }} {{ x is iterable }} {{ l is sequence }} {{ x is odd }} {{ x is even }} "
     "{{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ x is eq 3 }} {{ x is ne 3 }} {{ x is lt 4 }} {{ x is ge 3 "
     "}} {{ x is in [1, 3] }} {{ \"abc\" is lower }} {{ none is sameas none }} {{ x is not none }} {{ d.get is "
     "callable }}",
     "True False True True True True True True True False True True True True False True True False True False True "
     "False True True True True True True True"},
    {"{{ 1 in l }} {{ 9 not in l }} {{ \"ell\" in s }} {{ \"a\" in d }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} "
     "{{ \"a\" ~ 1 ~ none ~ [1] }} {{ \"a\" + \"b\" }} {{ [1] + [2] }} {{ \"ab\" * 3 }} {{ 2 * \"x\" }} {{ not x }} {{ "
     "x and s }} {{ n or \"alt\" }} {{ 0 or \"\" }} {{ -x }} {{ +f }}",
     "True True True True True False True a1None[1] ab [1, 2] ababab xx False Hello World alt  -3 2.5"},
    {"{{ \"yes\" if x > 2 else \"no\" }} {{ \"yes\" if x > 5 }}| {{ (1 if n else 2) * 3 }}", "yes | 6"},
    {"{{ strftime_now(\"%Y-%m-%d %H:%M:%S %b %B %a %A %j %p %I %y %e %-d %-m\") }}",
     "2026-11-24 09:30:00 Nov November Tue Tuesday 328 AM 09 26 24 24 11"},
    {"{% if x == 1 %}a{% elif x == 3 %}b{% elif x == 3 %}c{% else %}d{% endif %}", "b"},
    {"{% macro outer(v) %}<{{ caller(v ~ \"!\") }}>{% endmacro %}{% call(arg) outer(\"z\") %}[{{ arg }}|{{ s }}]{% "
     "endcall %}",
     "<[z!|Hello World]>"},
    {"{% macro rec(n) %}{{ n }}{% if n > 0 %}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}", "543210"},
    {"{% filter upper %}abc {{ s }}{% endfilter %}", "ABC HELLO WORLD"},
    {"{% with a = 1, b = x %}{{ a + b }}{% endwith %}{{ a }}", "4"},
    {"{% raw %}{{ not rendered }} {% if %}{% endraw %}", "{{ not rendered }} {% if %}"},
    {"a  {%- if true -%}  b  {%- endif -%}  c {{- \"d\" -}} e {# c #} f", "abcde  f"},
    {"{{ '\\u00e9\\x41\\n\\101' }} {{ \"a\" \"b\" }} {{ 1_000 }} {{ 1e3 }} {{ 0.5e-2 }}",
     "\303\251A\nA ab 1000 1000.0 0.005"},
    {"{{ d.a }} {{ d[\"b\"] }} {{ messages[0].role }} {{ messages[0][\"content\"] }} {{ messages[-1].content }} {{ "
     "messages[10] }}| {{ messages.0.role }}",
     "2 1 system Sys Yo | system"},
    {"{{ n.x }}|{{ (d.zzz is defined) }}|{{ d.items is defined }}", "|False|True"},
    {"{{ [3, 1, 2] | max }} {{ [3, 1, 2] | min }} {{ [\"b\", \"A\"] | max }} {{ [1, 2.5] | sum }} {{ messages | length "
     "}} {{ messages[1:] | map(attribute=\"role\") | join(\",\") }}",
     "3 1 b 3.5 3 user,assistant"},
    {"{{ \"%s\" }} {{ \"100%\" }} {{ x % 2 }} {{ (\"a\", \"b\") | join(\"-\") }} {{ (1, 2)[0] }} {{ {\"a\": 1}[\"a\"] "
     "}} {{ {1: \"int key\"}[1] }}",
     "%s 100% 1 a-b 1 1 int key"},
    {"{%- for m in messages -%}\n{%- if loop.first and m.role == 'system' -%}{{ '[SYS]' + m.content }}{%- continue "
     "-%}{%- endif -%}\n{{ m.role | upper }}: {{ m.content }}\n{% endfor %}",
     "[SYS]SysUSER: Hi \303\234n\303\257\nASSISTANT: Yo\n"},
    {"{{ x ~ f ~ t ~ n }} {{ 10 / 4 }} {{ 10 // 4 }} {{ 2 ** 10 }} {{ 2.0 ** 0.5 }} {{ 1 - 0.9 }} {{ 100.0 }} {{ 1e100 "
     "}} {{ 123456789.123 }} {{ 1/3 }} {{ -0.0 }} {{ 5e-324 }}",
     "32.5TrueNone 2.5 2 1024 1.4142135623730951 0.09999999999999998 100.0 1e+100 123456789.123 0.3333333333333333 "
     "-0.0 5e-324"},
    {"{{ \"x\" | tojson(ensure_ascii=true) }} {{ \"\303\251\360\237\230\200\" | tojson(ensure_ascii=true) }} {{ "
     "{\"a\":1,\"b\":[1,2]} | tojson(separators=(\",\", \":\")) }}",
     "\"x\" \"\\u00e9\\ud83d\\ude00\" {\"a\":1,\"b\":[1,2]}"},
    {"{{ s.split() | length }} {{ s.upper().lower() }} {{ s[0] }} {{ s[-1] }} {{ \"\303\251a\"[0] }} {{ s | list | "
     "length }}\n",
     "2 hello world H d \303\251 11"},
    {"a\n  {% if true %}\n  b\n  {% endif %}\nc", "a\n  b\nc"},
    {"  {%- if true %}\nx  {% endif %}  y", "x    y"},
    {"{% for i in range(2) %}\n  - {{ i }}\n{% endfor %}", "  - 0\n  - 1\n"},
    {"{# only a comment #}\n  {# indented comment #}\ntext {# inline #} more", "text  more"},
    {"{%- set x = 1 -%}\n  {{ x }}\n  {{- x }}", "11"},
    {"{{ \"a\" }}\n{{ \"b\" }}\n\n{{ \"c\" }}", "a\nb\n\nc"},
    {"x {%+ if true %} y {% endif %}\n  {%+ if true %}z{% endif %}", "x  y   z"},
    {"{% if true %}   \nafter-spaces-line\n{% endif %}", "   \nafter-spaces-line\n"},
    {"{% raw %}\n  {{ raw }}\n{% endraw %}\nafter", "\n  {{ raw }}\nafter"},
    {"{%- raw -%}   padded   {%- endraw -%}  |", "padded|"},
    {"line1\n\n{%- if true %}\n\nline3\n{% endif -%}\n\nend", "line1\nline3\nend"},
    {"\t{% if true %}tab{% endif %}", "tab"},
    {"{% set a = [1, 2, 3] %}{% for x in a %}{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}", "1, 2, 3"},
    {"{% for a, b in [(1, 2), (3, 4)] %}{{ a }}{{ b }}{% endfor %}{% for k in {\"x\": 1, \"y\": 2} %}{{ k }}{% endfor "
     "%}{% for ch in \"h\303\251\" %}[{{ ch }}]{% endfor %}",
     "1234xy[h][\303\251]"},
    {"{% for x in [1,2] %}{% for y in [3,4] %}{{ loop.index }}{{ x }}{{ y }}{% if y == 3 %}{% continue %}{% endif "
     "%}!{% endfor %}{% endfor %}",
     "113214!123224!"},
    {"{% set outer = 'o' %}{% for i in [1] %}{% set outer = 'i' %}{{ outer }}{% endfor %}{{ outer }}", "io"},
    {"{% macro m() %}{{ outer }}{% endmacro %}{% set outer = 'late' %}{{ m() }}", "late"},
    {"{% macro m(a, b) %}{{ a }}|{{ b }}|{{ b is defined }}{% endmacro %}{{ m(1) }} {{ m(b=2, a=3) }}",
     "1||False 3|2|True"},
    {"{% macro m() %}{{ caller() }}{{ caller() }}{% endmacro %}{% call m() %}X{% endcall %}", "XX"},
    {"{{ messages[0] }}", "{'role': 'system', 'content': 'Sys'}"},
    {"{{ d }} {{ namespace(a=1) }}", "{'b': 1, 'a': 2, 'C': 3} <Namespace {'a': 1}>"},
    {"{{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ {\"a\": 1} == {\"a\": 1} }} {{ none == none }} {{ nope == nope2 "
     "}} {{ \"1\" == 1 }} {{ true == 1 }}",
     "True False True True True False True"},
    {"{{ \"abc\" < \"abd\" }} {{ [1, 2] < [1, 3] }} {{ 1 < 2.5 }}", "True True True"},
    {"{{ nope | length }} {{ nope | list }} {{ nope | join }} {{ nope | upper }} {{ nope | string }} {{ nope ~ \"x\" "
     "}} {% for a in nope %}no{% endfor %} {{ nope is iterable }}",
     "0 []    x  True"},
    {"{{ d.x | default(\"d\") }} {{ d[\"x\"] | default(\"e\") }} {{ messages[9] | default(\"f\") }}", "d e f"},
    {"{% set m = messages[0] %}{{ m.content if m.content is string else m.content | map(attribute='text') | join }}",
     "Sys"},
    {"{{ \"x\" if true else undefined_thing.zzz }}", "x"},
    {"{{ (messages | last).role }} {{ messages[-1]['role'] == 'assistant' }}", "assistant True"},
    {"{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = "
     "messages %}{% endif %}{{ loop_messages | length }}",
     "2"},
    {"{%- set ns = namespace(found=false) -%}{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.found = "
     "true -%}{%- endif -%}{%- endfor -%}{{ ns.found }}",
     "True"},
    {"{{ messages | selectattr('role', 'in', ['user', 'system']) | list | length }} {{ messages | map('string') | list "
     "| length }} {{ ['a', 'b'] | map('upper') | join }}",
     "2 3 AB"},
    {"{{ \"x\"|e }}{{ 2 | string | length }}{{ 3|string + \"a\" }}", "x13a"},
    {"{{ \"multi\nline\" }}", "multi\nline"},
    {"{{ x\n   + 1 }}", "4"},
    {"{{ {\"b\": 1, \"a\": {\"c\": [1, 2.0, \"\303\251\", none, true]}} | tojson(indent=2) }}",
     "{\n  \"b\": 1,\n  \"a\": {\n    \"c\": [\n      1,\n      2.0,\n      \"\303\251\",\n      null,\n      true\n   "
     " ]\n  }\n}"},
    {"{{ \"\\\\\" }} {{ '\\'' }} {{ \"\\\"\" }} {{ \"\\q\" }}", "\\ ' \" \\q"},
    {"{{ 12345678901234567 * 10 }} {{ 2 ** 62 }} {{ 2 ** 0 }} {{ 3 ** 2 }}",
     "123456789012345670 4611686018427387904 1 9"},
    {"{{ dict(a=1, b=\"x\") }} {{ dict(a=1)[\"a\"] }}", "{'a': 1, 'b': 'x'} 1"},
    {"{{ loop }}", ""},
    {"{% for i in range(3) %}{{ loop.cycle(\"x\", \"y\") }}{{ loop.depth }}{% endfor %}", "x1y1x1"},
    {"{{ s[100] }}|{{ l[5] }}|{{ l[\"x\"] }}|", "|||"},
    {"{{ \"%\" ~ \"d\" }}{{ \"{}\".format(none) }}{{ \"{}\".format([1]) }}", "%dNone[1]"},
    {"{% if true %}\n{% set x = 5 %}\n{% endif %}\n{{ x }}", "5"},
    {"{% set a = {\"k\": [1]} %}{{ a.k[0] }}{{ a[\"k\"][0] }}{{ a.get(\"k\")[0] }}", "111"},
    {"{%- for message in messages %}\n{{- message.role }}\n{%- endfor %}", "systemuserassistant"},
    {"{{ 'x' * 0 }}|{{ [1] * 3 }}|{{ 3 * [0] }}", "|[1, 1, 1]|[0, 0, 0]"},
    {"{{ true and 0 }} {{ false or none }} {{ not none }} {{ not \"\" }} {{ 1 if [] else 2 }} {{ 1 if {} else 2 }}\n",
     "0 None True True 2 2"},
    {"{{ \"<a>\"|safe + \"<b>\" }} {{ \"<b>\" + \"<a>\"|safe }} {{ \"<a>\"|safe ~ \"<b>\" }} {{ \"<x>\"|e|e }} {{ "
     "(\"<a>\"|safe).upper() + \"&\" }} {{ \"<a>\"|safe|trim + \"<\" }} {{ (\"a<\"|safe) * 2 + \"'\" }} {{ "
     "\"x\"|escape is escaped }} {{ \"x\" is escaped }} {{ \"<q>\"|forceescape }}",
     "<a>&lt;b&gt; &lt;b&gt;<a> <a><b> &lt;x&gt; <A>&amp; <a>&lt; a<a<&#39; True False &lt;q&gt;"},
    {"{{ d[nope] }}|{{ d[nope] is defined }}|{{ {\"a\": 1}[none] is defined }}|{{ l[nope] is defined }}",
     "|False|False|False"},
    {"{% set m = {\"string\": \"str\"} %}{% set spec = [1, 2] %}{{ m[spec.type] is defined }}{{ spec.type is defined "
     "}}\n",
     "FalseFalse"},
};

static void test_language(void **state) {
    (void)state;
    int failed = 0;
    for (size_t i = 0; i < sizeof k_lang / sizeof k_lang[0]; i++) {
        wgml_error err;
        char *out = render(k_lang[i].tmpl, &err);
        if (!out || strcmp(out, k_lang[i].expected) != 0) {
            print_error("language case %zu:\n%s\n--- got\n%s\n--- expected\n%s\n", i, k_lang[i].tmpl,
                        out ? out : err.message, k_lang[i].expected);
            failed++;
        }
        free(out);
    }
    assert_int_equal(failed, 0);
}

/* Where wgml differs from HF on purpose: list.append and list.pop work (HF's
 * immutable sandbox refuses them, which breaks Kimi's tool-call templates). */
static void test_mutating_methods(void **state) {
    (void)state;
    wgml_error err;
    char *out = render("{% set q = namespace(ids=[]) %}{% set _ = q.ids.append('a') %}{% set _ = q.ids.append('b') %}"
                       "{{ q.ids.pop(0) }}{{ q.ids }}{% set l = [1] %}{% for x in l %}{% set _ = l.append(x) %}"
                       "{% endfor %}{{ l | length }}",
                       &err);
    assert_non_null(out);
    assert_string_equal(out, "a['b']2");
    free(out);
    /* a loop's condition that appends to the list: the items there at the start are filtered (this wrote
     * past the filtered list's end before) */
    out = render("{% set l = [1, 2] %}{% for x in l if l.append(x) or true %}{{ x }}{% endfor %}{{ l }}", &err);
    assert_non_null(out);
    assert_string_equal(out, "12[1, 2, 1, 2]");
    free(out);
}

/* ---- errors ---------------------------------------------------------------------- */

static const struct {
    const char *tmpl, *message;
} k_errors[] = {
    {"a\n{{ nope.attr }}", "line 2, column 8: 'nope' is undefined"},
    {"a\nb\n  {{ 1 < \"a\" }}", "line 3, column 8: '<' not supported between instances of 'int' and 'str'"},
    {"{% if %}{% endif %}", "line 1, column 7: expected an expression, got '%}'"},
    {"{% for x in l %}", "unexpected end of template: 'endfor' expected"},
    {"\n{% endfor %}", "line 2, column 4: unknown or misplaced tag 'endfor'"},
    {"{{ x | nosuchfilter }}", "line 1, column 8: no filter named 'nosuchfilter'"},
    {"{{ x is nosuchtest }}", "no test named 'nosuchtest'"},
    {"{% include \"other.j2\" %}", "'include' is not supported"},
    {"{% extends \"base\" %}", "'extends' is not supported"},
    {"{{ \"unterminated }}", "line 1, column 4: unterminated string"},
    {"{{ 1 / 0 }}", "division by zero"},
    {"{{ 1 // 0 }}", "integer division or modulo by zero"},
    {"{% for i in 3 %}{% endfor %}", "'int' object is not iterable"},
    {"{{ x.y.z }}", "'int object' has no attribute 'y'"},
    {"{{ {'a': 1} }", "unbalanced bracket"},
    {"{% set q.x = 1 %}", "cannot assign attribute on non-namespace object"},
    {"{{ }}", "expected an expression, got '}}'"},
    {"{{ nope + 1 }}", "'nope' is undefined"},
    {"{{ 'a' + 1 }}", "unsupported operand type(s) for +: 'str' and 'int'"},
    {"{{ none | length }}", "object of type 'NoneType' has no len()"},
    {"{{ nope | tojson }}", "Object of type Undefined is not JSON serializable"},
    {"{{ 2 ** 64 }}", "integer overflow"},
    {"{% set a, b = [1] %}", "not enough values to unpack (expected 2, got 1)"},
    {"{{ 'x'[::0] }}", "slice step cannot be zero"},
    {"{{ '{}'.format() }}", "format: replacement index 0 out of range"},
    {"{% raw %} never closed", "'{% endraw %}' expected"},
    {"{# never closed", "unterminated comment"},
    {"{{ x", "unexpected end of template: '}}' expected"},
    {"{% for x in l recursive %}{% endfor %}", "recursive for loops are not supported"},
    {"{{ l.pop(9) }}", "pop index out of range"},
    {"{{ d.clear() }}", "access to attribute 'clear' of 'dict' object is unsafe"},
    {"{{ range(1, 2, 0) }}", "range() arg 3 must not be zero"},
    {"{{ strftime_now(1) }}", "strftime_now: expected a string"},
    {"{% macro m() %}{% endmacro %}{% call nope() %}{% endcall %}", "a call block must call a macro"},
    {"{{ 99999999999999999999 }}", "integer literal too large"},
    {"{{ s | indent(1000) }}", "indent: width must be"},
    {"{{ s | batch(0) }}", "batch: the count must be a positive integer"},
};

static void test_errors(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++) {
        wgml_error err;
        char *out = render(k_errors[i].tmpl, &err);
        if (out || err.code != WGML_ERR_TEMPLATE || !strstr(err.message, k_errors[i].message))
            print_error("error case %zu: %s\n--- got (%s) %s\n--- expected %s\n", i, k_errors[i].tmpl,
                        wgml_status_name(err.code), out ? out : err.message, k_errors[i].message);
        assert_null(out);
        assert_int_equal(err.code, WGML_ERR_TEMPLATE);
        assert_non_null(strstr(err.message, k_errors[i].message));
        assert_true(strncmp(err.message, "chat template", 13) == 0);
    }
}

static void test_raise_exception(void **state) {
    (void)state;
    wgml_error err;
    const char *t = "{% for m in messages %}{% if m.role == 'assistant' %}"
                    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
                    "{% endif %}{{ m.content }}{% endfor %}";
    char *out = render(t, &err);
    assert_null(out);
    assert_int_equal(err.code, WGML_ERR_TEMPLATE);
    /* the template's own message, as HF's TemplateError carries it */
    assert_string_equal(err.message, "Conversation roles must alternate user/assistant/user/assistant/...");
    out = render("{{ raise_exception('x' ~ 1 ~ none) }}", &err);
    assert_null(out);
    assert_string_equal(err.message, "x1None");
}

/* ---- hostile templates --------------------------------------------------------------- */

static char *repeat(const char *a, int n, const char *mid, const char *b) {
    size_t la = strlen(a), lm = strlen(mid), lb = strlen(b);
    char *s = malloc(la * (size_t)n + lm + lb * (size_t)n + 1);
    assert_non_null(s);
    char *p = s;
    for (int i = 0; i < n; i++, p += la)
        memcpy(p, a, la);
    memcpy(p, mid, lm);
    p += lm;
    for (int i = 0; i < n; i++, p += lb)
        memcpy(p, b, lb);
    *p = '\0';
    return s;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void expect_clean_error(const char *tmpl, const char *what) {
    wgml_error err;
    double t0 = now_s();
    char *out = render(tmpl, &err);
    double dt = now_s() - t0;
    if (out || !strstr(err.message, what))
        print_error("hostile template: expected '%s', got %s\n", what, out ? "a prompt" : err.message);
    assert_null(out);
    assert_int_equal(err.code, WGML_ERR_TEMPLATE);
    assert_non_null(strstr(err.message, what));
    /* within the budgets: seconds at most (the step budget takes about one in a release build) */
    assert_true(dt < 30.0);
}

static void test_hostile(void **state) {
    (void)state;
    char *s = repeat("(", 5000, "1", ")");
    char *t = malloc(strlen(s) + 8);
    sprintf(t, "{{ %s }}", s);
    expect_clean_error(t, "nested too deeply");
    free(s);
    free(t);
    t = repeat("{% if true %}", 5000, "x", "{% endif %}");
    expect_clean_error(t, "nests too deeply");
    free(t);
    s = repeat("-", 100000, "1", "");
    t = malloc(strlen(s) + 8);
    sprintf(t, "{{ %s }}", s);
    expect_clean_error(t, "nests too deeply");
    free(s);
    free(t);
    t = repeat("[", 3000, "", "]");
    s = malloc(strlen(t) + 8);
    sprintf(s, "{{ %s }}", t);
    expect_clean_error(s, "nested too deeply");
    free(s);
    free(t);
    expect_clean_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "runaway recursion");
    expect_clean_error("{% macro f(n) %}{% for i in range(10) %}{{ f(n) }}{% endfor %}{% endmacro %}{{ f(0) }}",
                       "runaway recursion");
    expect_clean_error("{{ range(1000000000) | length }}", "over the template's budget");
    expect_clean_error("{{ ('a' * 10000000000) | length }}", "over the limit");
    expect_clean_error("{{ [1, 2, 3] * 1000000000 }}", "over the memory budget");
    expect_clean_error("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
                       "{% endfor %}{{ ns.s | length }}",
                       "budget");
    expect_clean_error("{% set r = range(1000) %}{% for i in r %}{% for j in r %}{% for k in r %}{% endfor %}"
                       "{% endfor %}{% endfor %}",
                       "step budget");
    expect_clean_error(
        "{% for i in range(1000000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' }}{% endfor %}",
        "output is over its limit");
    expect_clean_error("{{ 'x' | indent('y' * 100000000) }}", "over the limit");
}

/* The budgets of jinja.h, made small. */
static void test_limits(void **state) {
    (void)state;
    jinja_limits lim = jinja_default_limits();
    lim.max_steps = 1000;
    lim.max_output = 100;
    lim.max_depth = 20;
    const struct {
        const char *tmpl, *what;
    } cases[] = {
        {"{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", "step budget"},
        {"{% for i in range(200) %}x{% endfor %}", "output is over its limit of 100 bytes"},
        {"{{ ((((((((((((((((((((((1)))))))))))))))))))))) }}", "nests too deeply (limit 20)"},
        {"{{ 'x' * 101 }}", "over the limit of 100"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jinja_env *e;
        wgml_error err;
        char *out;
        assert_int_equal(jinja_env_create(&lim, &e, &err), WGML_OK);
        wgml_status st = jinja_render(e, cases[i].tmpl, strlen(cases[i].tmpl), &out, NULL, &err);
        if (st == WGML_OK) free(out);
        if (st != WGML_ERR_TEMPLATE || !strstr(err.message, cases[i].what))
            print_error("limits case %zu: %s\n", i, st ? err.message : "ok");
        assert_int_equal(st, WGML_ERR_TEMPLATE);
        assert_non_null(strstr(err.message, cases[i].what));
        jinja_env_free(e);
    }
    /* the memory budget (at least 1 MiB) */
    lim = jinja_default_limits();
    lim.max_memory = 1u << 20;
    jinja_env *e;
    wgml_error err;
    char *out;
    assert_int_equal(jinja_env_create(&lim, &e, &err), WGML_OK);
    const char *t = "{{ (('x' * 600000) ~ ('y' * 600000)) | length }}";
    assert_int_equal(jinja_render(e, t, strlen(t), &out, NULL, &err), WGML_ERR_TEMPLATE);
    assert_non_null(strstr(err.message, "memory budget"));
    jinja_env_free(e);
    /* an env renders once */
    assert_int_equal(jinja_env_create(NULL, &e, &err), WGML_OK);
    assert_int_equal(jinja_render(e, "a", 1, &out, NULL, &err), WGML_OK);
    assert_string_equal(out, "a");
    free(out);
    assert_int_equal(jinja_render(e, "a", 1, &out, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    jinja_env_free(e);
}

/* ---- walks over values: self-reference and depth ----------------------------------------- */

typedef struct {
    const char *tmpl, *expected; /* expected: the text, or (error) a part of the message */
    int error;
} value_case;

static void check_value_cases(const value_case *cases, size_t n, const char *what) {
    for (size_t i = 0; i < n; i++) {
        wgml_error err;
        double t0 = now_s();
        char *out = render(cases[i].tmpl, &err);
        double dt = now_s() - t0;
        int ok = cases[i].error ? !out && err.code == WGML_ERR_TEMPLATE && strstr(err.message, cases[i].expected)
                                : out && !strcmp(out, cases[i].expected);
        if (!ok)
            print_error("%s case %zu:\n%s\n--- got (%s)\n%s\n--- expected %s\n%s\n", what, i, cases[i].tmpl,
                        out ? "a prompt" : wgml_status_name(err.code), out ? out : err.message,
                        cases[i].error ? "an error with" : "", cases[i].expected);
        assert_true(ok);
        assert_true(dt < 10.0); /* milliseconds in fact: a walk that ran away would take the step budget's second */
        free(out);
    }
}

#define SELF     "{% set l = [] %}{% set _ = l.append(l) %}"
#define TWO      "{% set a = [] %}{% set _ = a.append(a) %}{% set b = [] %}{% set _ = b.append(b) %}"
#define DICT     "{% set l = [] %}{% set d = {'k': l} %}{% set _ = l.append(d) %}"
#define TOO_DEEP "a value nests too deeply (limit 400): a list or dict that contains itself?"

/* A list or dict that contains itself: every walk over it ends. Where Python has an answer (its
 * comparisons take an item that is the same object as equal without looking inside; its repr prints
 * a container met again inside itself as [...]), that answer; where Python recurses until its
 * RecursionError (two such lists compared), a clean error at the depth limit. These crashed on the C
 * stack before. */
static void test_self_referential_values(void **state) {
    (void)state;
    static const value_case cases[] = {
        {SELF "{% if l == l %}x{% endif %}", "x", 0},
        {SELF "{{ l != l }} {{ l < l }} {{ l <= l }} {{ l in l }} {{ l in [1, l] }} {{ l is eq l }}",
         "False False True True True True", 0},
        {SELF "{{ l }} {{ l | string }} {{ [l, 1] }} {{ l | length }}", "[[...]] [[...]] [[[...]], 1] 1", 0},
        {SELF "{{ [l, l] | sort }} {{ [l, l] | max }} {{ [l, l] | min }} {{ l.count(l) }} {{ l.index(l) }}",
         "[[[...]], [[...]]] [[...]] [[...]] 1 0", 0},
        {SELF "{{ [l, l] | select('equalto', l) | list }} {{ [l] | reject('ne', l) | list }}",
         "[[[...]], [[...]]] [[[...]]]", 0},
        /* Python's set refuses a list (unhashable); wgml compares lists by value */
        {SELF "{{ [l, l, 1] | unique | list }}", "[[[...]], 1]", 0},
        {SELF "{{ l | tojson }}", "tojson: Circular reference detected", 1},
        {DICT "{{ d }} {{ d == d }} {{ d | dictsort }} {{ d.items() }}",
         "{'k': [{...}]} True [('k', [{'k': [...]}])] dict_items([('k', [{'k': [...]}])])", 0},
        {DICT "{{ d | tojson }}", "tojson: Circular reference detected", 1},
        {DICT "{{ d | tojson(sort_keys=true, indent=1) }}", "tojson: Circular reference detected", 1},
        {"{% set ns = namespace() %}{% set ns.x = ns %}{{ ns }} {{ ns == ns }} {{ ns.x.x.x is sameas ns }}",
         "<Namespace {'x': <Namespace {...}>}> True True", 0},
        /* two lists that contain themselves: equal all the way down, as far as one looks */
        {TWO "{{ a == b }}", TOO_DEEP, 1},
        {TWO "{{ a != b }}", TOO_DEEP, 1},
        {TWO "{{ a < b }}", TOO_DEEP, 1},
        {TWO "{{ a in [b] }}", TOO_DEEP, 1},
        {TWO "{{ a is in [b] }}", TOO_DEEP, 1},
        {TWO "{{ [a, b] | sort }}", TOO_DEEP, 1},
        {TWO "{{ [a, b] | unique | list }}", TOO_DEEP, 1},
        {TWO "{{ [a, b] | max }}", TOO_DEEP, 1},
        {TWO "{{ [a, b] | min }}", TOO_DEEP, 1},
        {TWO "{{ [b].count(a) }}", TOO_DEEP, 1},
        {TWO "{{ [b].index(a) }}", TOO_DEEP, 1},
        {TWO "{{ [b] | select('equalto', a) | list }}", TOO_DEEP, 1},
        {TWO "{{ {'x': a} | dictsort(by='value') }}{{ {'x': a, 'y': b} | dictsort(by='value') }}", TOO_DEEP, 1},
        /* a dict key found by equality (a small dict) and by hash (past 8 keys, indexed) */
        {TWO "{{ {a: 1}[b] }}", TOO_DEEP, 1},
        {TWO "{{ b in {a: 1} }}", TOO_DEEP, 1},
        {TWO "{% set d = dict(k1=1, k2=2, k3=3, k4=4, k5=5, k6=6, k7=7, k8=8, k9=9) %}{{ d.get(b) }}", TOO_DEEP, 1},
        {TWO "{% set d = dict(k1=1, k2=2, k3=3, k4=4, k5=5, k6=6, k7=7, k8=8, k9=9) %}"
             "{{ dict(d, x=a)[b] }}",
         TOO_DEEP, 1},
        /* through dicts */
        {"{% set x = [] %}{% set y = [] %}{% set dx = {'k': x} %}{% set dy = {'k': y} %}{% set _ = x.append(dx) %}"
         "{% set _ = y.append(dy) %}{{ dx == dy }}",
         TOO_DEEP, 1},
        /* a tuple can hold itself here (append works on tuples too): no [...] for it, the depth limit */
        {"{% set t = (1,) %}{% set _ = t.append(t) %}{{ t }}", TOO_DEEP, 1},
        {"{% set t = (1,) %}{% set _ = t.append(t) %}{{ t | tojson }}", "Circular reference detected", 1},
    };
    check_value_cases(cases, sizeof cases / sizeof cases[0], "self-referential");
}

#define DEEP1                                                                                                          \
    "{% set ns = namespace(l=[], m=[], d={}) %}{% for i in range(200000) %}{% set ns.l = [ns.l] %}{% endfor %}"
#define DEEP2 "{% for i in range(200000) %}{% set ns.m = [ns.m] %}{% endfor %}"

/* Values nested 200,000 deep, built in a loop (each turn a step, well within the budget): every walk
 * stops at the depth limit with a clean error. */
static void test_deep_values(void **state) {
    (void)state;
    static const value_case cases[] = {
        {DEEP1 "{{ ns.l == ns.l }} {{ ns.l | length }}", "True 1", 0}, /* one object: equal without a walk */
        {DEEP1 DEEP2 "{{ ns.l == ns.m }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ ns.l < ns.m }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ ns.l in [ns.m] }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ [ns.l, ns.m] | sort }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ [ns.l, ns.m] | unique | list | length }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ [ns.l, ns.m] | max | length }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ [ns.m].count(ns.l) }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ [ns.m] | select('equalto', ns.l) | list | length }}", TOO_DEEP, 1},
        {DEEP1 DEEP2 "{{ {ns.m: 1}.get(ns.l) }}", TOO_DEEP, 1},
        {DEEP1 "{{ ns.l }}", TOO_DEEP, 1},
        {DEEP1 "{{ ns.l | string | length }}", TOO_DEEP, 1},
        {DEEP1 "{{ ns.l | tojson }}", TOO_DEEP, 1},
        {DEEP1 "{{ 'x' ~ ns.l }}", TOO_DEEP, 1},
        {DEEP1 "{% set d = dict(k1=1, k2=2, k3=3, k4=4, k5=5, k6=6, k7=7, k8=8, k9=9) %}{{ d[ns.l] }}", TOO_DEEP, 1},
        {"{% set ns = namespace(d={}, e={}) %}{% for i in range(200000) %}{% set ns.d = {'k': ns.d} %}"
         "{% set ns.e = {'k': ns.e} %}{% endfor %}{{ ns.d == ns.e }}",
         TOO_DEEP, 1},
        {"{% set ns = namespace(d={}) %}{% for i in range(200000) %}{% set ns.d = {'k': ns.d} %}{% endfor %}"
         "{{ ns.d | dictsort }}",
         TOO_DEEP, 1},
        /* as deep as the limit allows: fine */
        {"{% set ns = namespace(l=1, m=1) %}{% for i in range(400) %}{% set ns.l = [ns.l] %}{% set ns.m = [ns.m] %}"
         "{% endfor %}{{ ns.l == ns.m }} {{ (ns.l | tojson | length) }} {{ ns.l | string | length }}",
         "True 801 801", 0},
        {"{% set ns = namespace(l=1) %}{% for i in range(401) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
         TOO_DEEP, 1},
    };
    check_value_cases(cases, sizeof cases / sizeof cases[0], "deep value");

    /* the limit is the env's max_depth; the items a walk visits are steps */
    jinja_limits lim = jinja_default_limits();
    lim.max_depth = 20;
    lim.max_steps = 200000;
    const struct {
        const char *tmpl, *what;
    } small[] = {
        {TWO "{{ a == b }}", "a value nests too deeply (limit 20)"},
        {"{% set ns = namespace(l=1) %}{% for i in range(30) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
         "a value nests too deeply (limit 20)"},
        /* 1000 x 1000 items compared: a million steps (uncounted before, however many) */
        {"{% set a = range(1000) | list %}{% set b = range(1000) | list %}{{ [a] * 1000 == [b] * 1000 }}",
         "step budget"},
        {"{% set a = range(1000) | list %}{{ ([a] * 1000) | tojson | length }}", "step budget"},
        {"{% set a = range(1000) | list %}{% set ns = namespace(l=[]) %}{% for i in range(300) %}"
         "{% set _ = ns.l.append(a[:]) %}{% endfor %}{{ ns.l | unique | list | length }}",
         "step budget"},
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        jinja_env *e;
        wgml_error err;
        char *out = NULL;
        assert_int_equal(jinja_env_create(&lim, &e, &err), WGML_OK);
        wgml_status st = jinja_render(e, small[i].tmpl, strlen(small[i].tmpl), &out, NULL, &err);
        if (st != WGML_ERR_TEMPLATE || !strstr(err.message, small[i].what))
            print_error("small limits case %zu: %s\n", i, st ? err.message : out);
        assert_int_equal(st, WGML_ERR_TEMPLATE);
        assert_non_null(strstr(err.message, small[i].what));
        jinja_env_free(e);
    }
}

/* Integers read from a template or a value: range-checked, never atoi and never a signed overflow. */
static void test_integer_bounds(void **state) {
    (void)state;
    static const value_case cases[] = {
        /* format's field indexes: read with a bound (these read pos[-1] or crashed before) */
        {"{{ '{2147483648}'.format('a') }}", "format: replacement index 2147483648 out of range", 1},
        {"{{ '{4294967295}'.format('a') }}", "format: replacement index 4294967295 out of range", 1},
        {"{{ '{99999999999999999999999999}'.format('a') }}", "format: replacement index 9999", 1},
        {"{{ '{1}'.format('a') }}", "format: replacement index 1 out of range", 1},
        {"{{ '{1}{0}{1}'.format('a', 'b') }} {{ '{}{}'.format(1, 2) }} {{ '{00}'.format('z') }}", "bab 12 z", 0},
        {"{{ '{0x}'.format(1) }}", "format: no argument named '0x'", 1},
        {"{{ '{0[0]}'.format([1]) }}", "format: attribute and item access in a field is not supported", 1},
        {"{{ '{}{1}'.format(1, 2) }}", "cannot switch from automatic field numbering to manual field", 1},
        {"{{ '{0}{}'.format(1, 2) }}", "cannot switch from manual field specification to automatic field", 1},
        /* slices with the extreme steps and bounds (the index ran past the list before) */
        {"{{ [1, 2, 3][1::9223372036854775807] }} {{ 'abc'[::-9223372036854775807] }} "
         "{{ [1, 2, 3][::-9223372036854775807 - 1] }} {{ 'abcdef'[-9223372036854775807 - 1:9223372036854775807:2] }} "
         "{{ [1, 2, 3, 4][9223372036854775807:-9223372036854775807 - 1:-1] }} {{ 'abc'[2:0:-9223372036854775807] }}",
         "[2] c [3] ace [4, 3, 2, 1] c", 0},
        {"{{ [1, 2, 3][2::9223372036854775799 + 8] }} {{ 'abcd'[3::9223372036854775799 + 8] }}", "[3] d", 0},
        /* range: an exact count (doubles made this one empty) and items near the ends of 64 bits */
        {"{{ range(9223372036854775802, 9223372036854775807) | list }}",
         "[9223372036854775802, 9223372036854775803, 9223372036854775804, 9223372036854775805, 9223372036854775806]",
         0},
        {"{{ range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904) | list }} {{ "
         "range(9223372036854775807, -9223372036854775807 - 1, -4611686018427387904) | list }}",
         "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904] [9223372036854775807, "
         "4611686018427387903, -1, -4611686018427387905]",
         0},
        {"{{ range(0, -5, -2) | list }} {{ range(3, 3) | list }} {{ range(5, 0) | list }} {{ range(1, 10, 3) | list }}",
         "[0, -2, -4] [] [] [1, 4, 7]", 0},
        {"{{ range(-9223372036854775807 - 1, 9223372036854775807) | length }}", "over the template's budget", 1},
        /* the int filter: past 64 bits an error, not a clamped value; NaN the default, as Jinja */
        {"{{ '99999999999999999999' | int }}", "int: '99999999999999999999' is out of the 64-bit integer range", 1},
        {"{{ '-9223372036854775809' | int }}", "out of the 64-bit integer range", 1},
        {"{{ 1e30 | int }}", "int: 1e+30 is out of the 64-bit integer range", 1},
        {"{{ 'inf' | int }}", "out of the 64-bit integer range", 1},
        {"{{ '9223372036854775807' | int }} {{ '-9223372036854775808' | int }} {{ 'nan' | int(7) }} {{ '1e3' | int }} "
         "{{ 'ff' | int(base=16) }} {{ '11' | int(base=4294967298) }} {{ -2.9 | int }}",
         "9223372036854775807 -9223372036854775808 7 1000 255 11 -2", 0},
        /* integer literals: all of 64 bits */
        {"{{ 9223372036854775807 }} {{ -9223372036854775807 - 1 }}", "9223372036854775807 -9223372036854775808", 0},
        {"{{ 9223372036854775808 }}", "integer literal too large", 1},
        /* repeating nothing any number of times is nothing, at once (this looped 10**18 times before) */
        {"{{ '' * 1000000000000000000 }}|{{ [] * 1000000000000000000 }}|{{ 1000000000000000000 * '' }}|{{ 'ab' * -3 "
         "}}|{{ [1] * -9223372036854775807 }}",
         "|[]|||[]", 0},
        {"{{ 'ab' * 9223372036854775807 }}", "over the limit", 1},
        {"{{ [1, 2] * 9223372036854775807 }}", "over the memory budget", 1},
        /* exact comparison of ints and floats (1 == 1.0 == True; 2**53 + 1 is not 2.0**53) */
        {"{{ 9007199254740993 == 9007199254740992.0 }} {{ 9007199254740993 > 9007199254740992.0 }} {{ 1 == 1.0 }} "
         "{{ true == 1 }} {{ -2 < -1.5 }} {{ -1 > -1.5 }} {{ 3 <= 2.5 }}",
         "False True True True True True False", 0},
    };
    check_value_cases(cases, sizeof cases / sizeof cases[0], "integer");
}

#define LONG_S     "{% set s = ('x' * 1000) * 4000 %}{% set t = s ~ '' %}"
#define LOOP(body) "{% for i in range(1000000) %}" body "{% endfor %}"

/* Work proportional to a long string or list, done again and again in a loop without making anything
 * new (so the memory budget never stops it): each time costs steps by its size, so the loop runs
 * into the step budget (these took hours before, a few steps a turn). */
static void test_long_work_is_charged(void **state) {
    (void)state;
    static const char *const cases[] = {
        LONG_S LOOP("{{ s | length }}"),
        LONG_S LOOP("{{ s[3] }}"),
        LONG_S LOOP("{{ s[-1] }}"),
        LONG_S LOOP("{{ s == t }}"),
        LONG_S LOOP("{{ s < t }}"),
        LONG_S LOOP("{{ s in [t] }}"),
        LONG_S LOOP("{{ {s: 1}[t] }}"),
        LONG_S LOOP("{{ [1][s] is defined }}"),
        LONG_S LOOP("{{ s.startswith(t) }}"),
        LONG_S LOOP("{{ s.removeprefix(t + 'y') | length }}"),
        LONG_S LOOP("{{ s.isdigit() }}"),
        LONG_S LOOP("{{ s | wordcount }}"),
        "{% set s = (' ' * 1000) * 4000 %}" LOOP("{{ s | trim }}"),
        "{% set s = (' ' * 1000) * 4000 %}" LOOP("{{ s.strip(' \\t\\n') }}"),
        "{% set s = ('a' * 1000) * 1000 %}{% set p = ('a' * 1000) * 100 ~ 'b' %}{{ s.rfind(p) }}",
        "{% set s = ('a' * 1000) * 1000 %}{% set p = ('a' * 1000) * 100 ~ 'b' %}{{ s.rsplit(p) | length }}",
        "{% set l = range(100000) | list %}" LOOP("{{ l | max }}"),
        "{% set l = range(100000) | list %}" LOOP("{{ l | sum }}"),
        "{% set l = range(100000) | list %}" LOOP("{{ l.count(7) }}"),
        "{% set l = range(100000) | list %}" LOOP("{{ -1 in l }}"),
        "{% set l = range(100000) | list %}{% set m = range(100000) | list %}" LOOP("{{ l == m }}"),
    };
    jinja_limits lim = jinja_default_limits();
    lim.max_steps = 1000000;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jinja_env *e;
        wgml_error err;
        char *out = NULL;
        assert_int_equal(jinja_env_create(&lim, &e, &err), WGML_OK);
        double t0 = now_s();
        wgml_status st = jinja_render(e, cases[i], strlen(cases[i]), &out, NULL, &err);
        double dt = now_s() - t0;
        if (st != WGML_ERR_TEMPLATE || !strstr(err.message, "step budget"))
            print_error("long work case %zu: %s\n--- got %s\n", i, cases[i], st ? err.message : "a prompt");
        assert_int_equal(st, WGML_ERR_TEMPLATE);
        assert_non_null(strstr(err.message, "step budget"));
        assert_true(dt < 10.0);
        jinja_env_free(e);
    }
}

/* A message with 60,000 keys (about 800 KB of JSON): its dict is hashed, so reading it, iterating it and
 * looking keys up take milliseconds (11-16 s before, the lookups were linear scans). */
static void test_big_dict(void **state) {
    (void)state;
    enum { keys = 60000 };
    size_t cap = 64 + (size_t)keys * 24, n = 0;
    char *messages = malloc(cap);
    assert_non_null(messages);
    n += (size_t)snprintf(messages + n, cap - n, "[{\"role\": \"user\", \"content\": \"x\"");
    for (int i = 0; i < keys; i++)
        n += (size_t)snprintf(messages + n, cap - n, ", \"k%d\": %d", i, i);
    n += (size_t)snprintf(messages + n, cap - n, ", \"k5\": \"again\"}]"); /* a duplicate: the last value wins */
    assert_true(n < cap);
    const char *t = "{% for m in messages %}{% for k in m %}{{ k }},{% endfor %}|{{ m['k59999'] }} {{ m.k0 }} "
                    "{{ m.get('k30000') }} {{ m.k5 }} {{ 'k123' in m }} {{ 'k60000' in m }} {{ m | length }} "
                    "{{ m.get('nope', 'absent') }}{% endfor %}";
    wgml_chat_params p = wgml_chat_default_params();
    char *out = NULL;
    wgml_error err;
    double t0 = now_s();
    wgml_status st = wgml_chat_render(t, messages, &p, &out, &err);
    double dt = now_s() - t0;
    printf("a message of %d keys (%zu bytes of JSON): rendered in %.3f s\n", keys, n, dt);
    if (st) print_error("%s\n", err.message);
    assert_int_equal(st, WGML_OK);
    /* the keys in their order, each once */
    assert_true(strncmp(out, "role,content,k0,k1,k2,k3,k4,k5,k6,", 34) == 0);
    assert_non_null(strstr(out, ",k59998,k59999,|59999 0 30000 again True False 60002 absent"));
    size_t commas = 0;
    for (const char *q = out; *q; q++)
        commas += *q == ',';
    assert_int_equal(commas, keys + 2);
    free(out);
    /* well within the default budgets: milliseconds in a release build, a fraction of a second with sanitizers */
    assert_true(dt < 3.0);
    free(messages);

    /* keys by value, as Python: 1, 1.0 and True are one key, in a small dict and in a hashed one */
    static const value_case cases[] = {
        {"{{ {1: 'a', 1.0: 'b', true: 'c'} }} {{ {1: 'a'}[1.0] }} {{ {1.5: 'x'}[1.5] }} {{ {(1, 2): 'p'}[(1, 2)] }}",
         "{1: 'c'} a x p", 0},
        {"{% set d = dict(a=1, b=2, c=3, e=4, f=5, g=6, h=7, i=8, j=9) %}{{ d | length }} {{ d.j }} {{ d['a'] }}",
         "9 9 1", 0},
        /* a key set again keeps its place */
        {"{% set ns = namespace(p=[]) %}{% for i in range(20) %}{% set _ = ns.p.append([i % 12, i]) %}{% endfor %}"
         "{{ dict(ns.p) }}",
         "{0: 12, 1: 13, 2: 14, 3: 15, 4: 16, 5: 17, 6: 18, 7: 19, 8: 8, 9: 9, 10: 10, 11: 11}", 0},
        {"{% set big = {1: 'one', 2: 'two', 'a': 'A', none: 'N', (1, 'b'): 'T', 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8,"
         " 9: 9, 10: 10} %}{{ big[1.0] }} {{ big[true] }} {{ big[2.0] }} {{ big['a'] }} {{ big[none] }} "
         "{{ big[(1, 'b')] }} {{ big[10.0] }} {{ 11 in big }} {{ big | length }} {{ big | list }}",
         "one one two A N T 10 False 13 [1, 2, 'a', None, (1, 'b'), 3, 4, 5, 6, 7, 8, 9, 10]", 0},
        {"{% set big = {'a': 1, 'b': 2, 'c': 3, 'd': 4, 'e': 5, 'f': 6, 'g': 7, 'h': 8, 'i': 9, 'j': 10} %}"
         "{{ big == {'j': 10, 'i': 9, 'h': 8, 'g': 7, 'f': 6, 'e': 5, 'd': 4, 'c': 3, 'b': 2, 'a': 1} }} "
         "{{ big == {'a': 1} }} {{ big | dictsort(reverse=true) | first }} {{ big | tojson(sort_keys=true) }}",
         "True False ('j', 10) {\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4, \"e\": 5, \"f\": 6, \"g\": 7, \"h\": 8, \"i\": "
         "9, \"j\": 10}",
         0},
        /* a loop's scope is emptied each turn (its index too): variables set in a turn are gone in the next */
        {"{% for i in range(3) %}{{ v is defined }}{% set a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 = range(10) %}"
         "{% set v = i %}{{ v }}{{ a10 }}{% endfor %}",
         "False09False19False29", 0},
    };
    check_value_cases(cases, sizeof cases / sizeof cases[0], "dict");
}

/* Every allocation failing in turn: an error or the right prompt, nothing leaked. */
static void test_out_of_memory(void **state) {
    (void)state;
    const char *t =
        "{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}\n{% endfor %}{{ tools | tojson }}";
    long live = wgml_alloc_live();
    int succeeded = 0;
    for (long n = 0; n < 200 && !succeeded; n++) {
        wgml_alloc_fail_after(n);
        wgml_chat_params p = lang_params();
        char *out = NULL;
        wgml_error err;
        wgml_status st = wgml_chat_render(t, k_messages, &p, &out, &err);
        wgml_alloc_fail_after(-1);
        if (st == WGML_OK) {
            assert_non_null(strstr(out, "USER: Hi"));
            free(out);
            succeeded = 1;
        } else {
            assert_int_equal(st, WGML_ERR_OUT_OF_MEMORY);
            assert_null(out);
        }
        assert_int_equal(wgml_alloc_live(), live);
    }
    assert_true(succeeded);
}

/* ---- inputs and parameters ------------------------------------------------------------- */

static void test_json_input(void **state) {
    (void)state;
    const char *t = "{% for m in messages %}{{ m.content }}|{{ m.n }}|{{ m.f }}|{{ m.b }}|{{ m.z }};{% endfor %}";
    wgml_chat_params p = wgml_chat_default_params();
    char *out;
    wgml_error err;
    assert_int_equal(wgml_chat_render(t,
                                      " [ {\"content\": \"a\\u00e9\\ud83d\\ude00\\n\\t\\\"\\\\\\/\", \"n\": -12, "
                                      "\"f\": 1.5e3, \"b\": false, \"z\": null}, {\"content\": \"\\udc00\", "
                                      "\"n\": 12345678901234567890} ] ",
                                      &p, &out, &err),
                     WGML_OK);
    assert_string_equal(
        out, "a\xc3\xa9\xf0\x9f\x98\x80\n\t\"\\/|-12|1500.0|False|None;\xef\xbf\xbd|1.2345678901234567e+19|||;");
    free(out);
    const char *bad[] = {"",         "[",         "[1,]",       "[\"a\" \"b\"]", "[{\"a\" 1}]",
                         "[{1: 2}]", "[\"\\x\"]", "[\"a\nb\"]", "[tru]",         "[01x]",
                         "[1] x",    "[-]",       "[1.]",       "[1e]",          "{\"messages\": []}",
                         "\"x\"",    NULL};
    for (int i = 0; bad[i]; i++) {
        out = NULL;
        wgml_status st = wgml_chat_render(t, bad[i], &p, &out, &err);
        if (st != WGML_ERR_INVALID_ARGUMENT) print_error("bad JSON %s: %s\n", bad[i], err.message);
        assert_int_equal(st, WGML_ERR_INVALID_ARGUMENT);
        assert_null(out);
    }
    /* nesting deeper than the depth limit */
    char *deep = repeat("[", 2000, "", "]");
    assert_int_equal(wgml_chat_render(t, deep, &p, &out, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "nested too deeply"));
    free(deep);
    /* extra variables */
    p.extra_json = "{\"tools\": [1, 2], \"messages\": \"ignored\", \"add_generation_prompt\": 7}";
    assert_int_equal(
        wgml_chat_render("{{ tools }}{{ messages | length }}{{ add_generation_prompt }}", "[{}]", &p, &out, &err),
        WGML_OK);
    assert_string_equal(out, "[1, 2]1True");
    free(out);
    p.extra_json = "[1]";
    assert_int_equal(wgml_chat_render(t, "[]", &p, &out, &err), WGML_ERR_INVALID_ARGUMENT);
    p.extra_json = "{";
    assert_int_equal(wgml_chat_render(t, "[]", &p, &out, &err), WGML_ERR_INVALID_ARGUMENT);
}

static void test_params(void **state) {
    (void)state;
    char *out;
    wgml_error err;
    wgml_chat_params p = wgml_chat_default_params();
    assert_int_equal(p.add_generation_prompt, 1);
    assert_null(p.bos_token);
    const char *t = "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ strftime_now('%d %b %Y') }}";
    p.now = "2024-02-29 23:59:59";
    assert_int_equal(wgml_chat_render(t, "[]", &p, &out, &err), WGML_OK);
    assert_string_equal(out, "||True|29 Feb 2024");
    free(out);
    p.add_generation_prompt = 0;
    p.bos_token = "<B>";
    p.eos_token = "<E>";
    assert_int_equal(wgml_chat_render(t, "[]", &p, &out, &err), WGML_OK);
    assert_string_equal(out, "<B>|<E>|False|29 Feb 2024");
    free(out);
    const char *bad_now[] = {
        "2024-02-29", "2024-13-01 00:00:00", "2024-01-01T00:00:00", "2024-01-01 24:00:00", "2024-01-01 00:00:00 ", "x",
        NULL};
    for (int i = 0; bad_now[i]; i++) {
        p.now = bad_now[i];
        assert_int_equal(wgml_chat_render(t, "[]", &p, &out, &err), WGML_ERR_INVALID_ARGUMENT);
    }
    p.now = NULL; /* the real clock: a 4-digit year */
    assert_int_equal(wgml_chat_render("{{ strftime_now('%Y') | length }}", "[]", &p, &out, &err), WGML_OK);
    assert_string_equal(out, "4");
    free(out);
    assert_int_equal(wgml_chat_render(NULL, "[]", &p, &out, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_chat_render(t, NULL, &p, &out, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_chat_render(t, "[]", &p, NULL, &err), WGML_ERR_INVALID_ARGUMENT);
    assert_int_equal(wgml_chat_render(t, "[]", NULL, &out, NULL), WGML_OK); /* defaults, no err */
    free(out);
    assert_string_equal(wgml_status_name(WGML_ERR_TEMPLATE), "template error");
}

/* ---- built-in templates and a model's template ----------------------------------------- */

static void test_builtin_templates(void **state) {
    (void)state;
    const char *conv =
        "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}, "
        "{\"role\": \"assistant\", \"content\": \"Hello.\"}, {\"role\": \"user\", \"content\": \"Bye\"}]";
    const struct {
        const char *name, *expected;
    } cases[] = {
        {"chatml", "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
                   "Hello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n"},
        {"llama2", "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Bye [/INST]"},
        {"llama3", "<s><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user"
                   "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                   "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant"
                   "<|end_header_id|>\n\n"},
        {"zephyr", "<|system|>\nBe brief.</s>\n<|user|>\nHi</s>\n<|assistant|>\nHello.</s>\n<|user|>\nBye</s>\n"
                   "<|assistant|>\n"},
        {"mistral", "<s>[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Bye [/INST]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wgml_chat_params p = wgml_chat_default_params();
        p.bos_token = "<s>";
        p.eos_token = "</s>";
        char *out;
        wgml_error err;
        const char *t = chat_builtin_template(cases[i].name);
        assert_non_null(t);
        assert_int_equal(wgml_chat_render(t, conv, &p, &out, &err), WGML_OK);
        if (strcmp(out, cases[i].expected)) print_error("%s:\n%s\n", cases[i].name, out);
        assert_string_equal(out, cases[i].expected);
        free(out);
    }
    assert_null(chat_builtin_template("nope"));
}

/* A header-only GGUF in memory with these metadata. */
static gguf_file *gguf_with(const char *arch, const char *tmpl, const char *const *tokens, int n_tokens, void **mem) {
    gguf_writer *w = gguf_writer_create();
    wgml_error err;
    assert_non_null(w);
    assert_int_equal(gguf_writer_set_str(w, "general.architecture", arch, &err), WGML_OK);
    if (tmpl) assert_int_equal(gguf_writer_set_str(w, "tokenizer.chat_template", tmpl, &err), WGML_OK);
    if (tokens)
        assert_int_equal(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, NULL, (uint64_t)n_tokens, &err),
                         WGML_OK);
    size_t size;
    assert_int_equal(gguf_writer_begin_memory(w, &err), WGML_OK);
    assert_int_equal(gguf_writer_finish(w, &err), WGML_OK);
    assert_int_equal(gguf_writer_take_memory(w, mem, &size, &err), WGML_OK);
    gguf_writer_free(w);
    gguf_file *g;
    assert_int_equal(gguf_open_memory(*mem, size, "<test>", &g, &err), WGML_OK);
    return g;
}

static void test_model_template_choice(void **state) {
    (void)state;
    const char *chatml[] = {"a", "<|im_start|>", "<|im_end|>"}, *llama3[] = {"<|start_header_id|>", "b"},
               *mistral[] = {"[INST]", "[/INST]"}, *zephyr[] = {"<|user|>", "<|assistant|>"}, *plain[] = {"x", "y"};
    const struct {
        const char *arch, *tmpl;
        const char *const *tokens;
        int n;
        const char *name;
        int fallback;
    } cases[] = {
        {"llama", "{{ 'own' }}", chatml, 3, "gguf", 0},
        {"llama", NULL, chatml, 3, "chatml", 1},
        {"llama", NULL, llama3, 2, "llama3", 1},
        {"llama", NULL, mistral, 2, "mistral", 1},
        {"llama", NULL, zephyr, 2, "zephyr", 1},
        {"qwen2", NULL, plain, 2, "chatml", 1},
        {"llama", NULL, plain, 2, "chatml", 1}, /* no tokenizer given: not SentencePiece */
        {"bert", NULL, chatml, 3, NULL, 0},     /* embeddings: no chat */
        {"bert", "{{ 'own' }}", NULL, 0, "gguf", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *mem;
        gguf_file *g = gguf_with(cases[i].arch, cases[i].tmpl, cases[i].tokens, cases[i].n, &mem);
        const wgml_family *fam = wgml_family_find(cases[i].arch);
        assert_non_null(fam);
        chat_model_info info;
        wgml_error err;
        assert_int_equal(chat_model_info_load(g, NULL, (fam->tasks & WGML_TASK_GENERATE) != 0, &info, &err), WGML_OK);
        int fb = -1;
        const char *t = chat_model_info_template(&info, &fb);
        if (cases[i].name) {
            assert_non_null(info.name);
            assert_string_equal(info.name, cases[i].name);
            assert_non_null(t);
            if (cases[i].tmpl)
                assert_string_equal(t, cases[i].tmpl);
            else
                assert_ptr_equal(t, chat_builtin_template(cases[i].name));
        } else {
            assert_null(info.name);
            assert_null(t);
        }
        assert_int_equal(fb, cases[i].fallback);
        chat_model_info_free(&info);
        gguf_close(g);
        free(mem);
    }
}

/* A real model without a template: stories260K (llama, SentencePiece) falls back to Llama 2. */
static void test_model_fallback(void **state) {
    (void)state;
    const char *path = tu_shared("models/stories260K.gguf");
    wgml_model_params mp = wgml_model_default_params();
    mp.backend = WGML_BACKEND_CPU;
    mp.n_threads = 1;
    wgml_model *m;
    wgml_error err;
    assert_int_equal(wgml_model_load(path, &mp, &m, &err), WGML_OK);
    int fb = 0;
    const char *t = wgml_model_chat_template(m, &fb);
    assert_non_null(t);
    assert_int_equal(fb, 1);
    assert_string_equal(wgml_model_chat_template_name(m), "llama2");
    wgml_chat_params p = wgml_chat_default_params();
    p.model = m;
    char *out;
    assert_int_equal(wgml_chat_render(NULL, "[{\"role\": \"user\", \"content\": \"Hi\"}]", &p, &out, &err), WGML_OK);
    assert_string_equal(out, "<s>[INST] Hi [/INST]"); /* the model's BOS text */
    free(out);
    wgml_model_free(m);
    assert_null(wgml_model_chat_template(NULL, &fb));
    assert_int_equal(fb, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shared_cases),
        cmocka_unit_test(test_tool_paths),
        cmocka_unit_test(test_language),
        cmocka_unit_test(test_mutating_methods),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_raise_exception),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_self_referential_values),
        cmocka_unit_test(test_deep_values),
        cmocka_unit_test(test_integer_bounds),
        cmocka_unit_test(test_long_work_is_charged),
        cmocka_unit_test(test_big_dict),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_json_input),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_builtin_templates),
        cmocka_unit_test(test_model_template_choice),
        cmocka_unit_test(test_model_fallback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
