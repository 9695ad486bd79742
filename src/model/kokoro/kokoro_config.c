/*
 * kokoro_config.c - Kokoro's config: the real v1.0 values (hexgrad/Kokoro-82M
 * config.json, Apache-2.0: facts of the model release). The reader of a
 * config.json is kokoro_config_json.c (json-c, outside libwgml).
 */
#include <string.h>

#include "core/error.h"
#include "model/kokoro/kokoro.h"

/* v1.0's phoneme vocabulary: id and symbol (UTF-8); 114 symbols, ids 1..177. */
static const struct {
    int id;
    const char *sym;
} default_vocab[] = {
    {1, ";"}, {2, ":"}, {3, ","}, {4, "."}, {5, "!"}, {6, "?"}, {9, "\xe2\x80\x94"}, {10, "\xe2\x80\xa6"},
    {11, "\x22"}, {12, "("}, {13, ")"}, {14, "\xe2\x80\x9c"}, {15, "\xe2\x80\x9d"}, {16, " "}, {17, "\xcc\x83"},
    {18, "\xca\xa3"}, {19, "\xca\xa5"}, {20, "\xca\xa6"}, {21, "\xca\xa8"}, {22, "\xe1\xb5\x9d"},
    {23, "\xea\xad\xa7"}, {24, "A"}, {25, "I"}, {31, "O"}, {33, "Q"}, {35, "S"}, {36, "T"}, {39, "W"}, {41, "Y"},
    {42, "\xe1\xb5\x8a"}, {43, "a"}, {44, "b"}, {45, "c"}, {46, "d"}, {47, "e"}, {48, "f"}, {50, "h"}, {51, "i"},
    {52, "j"}, {53, "k"}, {54, "l"}, {55, "m"}, {56, "n"}, {57, "o"}, {58, "p"}, {59, "q"}, {60, "r"}, {61, "s"},
    {62, "t"}, {63, "u"}, {64, "v"}, {65, "w"}, {66, "x"}, {67, "y"}, {68, "z"}, {69, "\xc9\x91"}, {70, "\xc9\x90"},
    {71, "\xc9\x92"}, {72, "\xc3\xa6"}, {75, "\xce\xb2"}, {76, "\xc9\x94"}, {77, "\xc9\x95"}, {78, "\xc3\xa7"},
    {80, "\xc9\x96"}, {81, "\xc3\xb0"}, {82, "\xca\xa4"}, {83, "\xc9\x99"}, {85, "\xc9\x9a"}, {86, "\xc9\x9b"},
    {87, "\xc9\x9c"}, {90, "\xc9\x9f"}, {92, "\xc9\xa1"}, {99, "\xc9\xa5"}, {101, "\xc9\xa8"}, {102, "\xc9\xaa"},
    {103, "\xca\x9d"}, {110, "\xc9\xaf"}, {111, "\xc9\xb0"}, {112, "\xc5\x8b"}, {113, "\xc9\xb3"}, {114, "\xc9\xb2"},
    {115, "\xc9\xb4"}, {116, "\xc3\xb8"}, {118, "\xc9\xb8"}, {119, "\xce\xb8"}, {120, "\xc5\x93"}, {123, "\xc9\xb9"},
    {125, "\xc9\xbe"}, {126, "\xc9\xbb"}, {128, "\xca\x81"}, {129, "\xc9\xbd"}, {130, "\xca\x82"}, {131, "\xca\x83"},
    {132, "\xca\x88"}, {133, "\xca\xa7"}, {135, "\xca\x8a"}, {136, "\xca\x8b"}, {138, "\xca\x8c"}, {139, "\xc9\xa3"},
    {140, "\xc9\xa4"}, {142, "\xcf\x87"}, {143, "\xca\x8e"}, {147, "\xca\x92"}, {148, "\xca\x94"}, {156, "\xcb\x88"},
    {157, "\xcb\x8c"}, {158, "\xcb\x90"}, {162, "\xca\xb0"}, {164, "\xca\xb2"}, {169, "\xe2\x86\x93"},
    {171, "\xe2\x86\x92"}, {172, "\xe2\x86\x97"}, {173, "\xe2\x86\x98"}, {177, "\xe1\xb5\xbb"},
};

void kokoro_config_default(kokoro_config *c) {
    memset(c, 0, sizeof *c);
    kokoro_hparams *hp = &c->hp;
    hp->n_token = 178, hp->hidden = 512, hp->style = 128, hp->n_layer = 3, hp->max_dur = 50, hp->text_kernel = 5;
    hp->bert_embd = 128, hp->bert_hidden = 768, hp->bert_heads = 12, hp->bert_ff = 2048, hp->bert_layers = 12;
    hp->bert_ctx = 512;
    hp->dec_dim = 1024, hp->asr_res_dim = 64, hp->up_initial = 512;
    hp->n_ups = 2, hp->up_rates[0] = 10, hp->up_rates[1] = 6, hp->up_kernels[0] = 20, hp->up_kernels[1] = 12;
    hp->n_rb = 3;
    static const int kernels[3] = {3, 7, 11};
    for (int i = 0; i < 3; i++) {
        hp->rb_kernels[i] = kernels[i];
        hp->rb_dil[i][0] = 1, hp->rb_dil[i][1] = 3, hp->rb_dil[i][2] = 5;
    }
    hp->n_fft = 20, hp->hop = 5, hp->sample_rate = KOKORO_SAMPLE_RATE, hp->n_harmonics = 9;
    for (size_t i = 0; i < sizeof default_vocab / sizeof default_vocab[0]; i++)
        strcpy(c->vocab[default_vocab[i].id], default_vocab[i].sym);
}

void kokoro_config_tiny(kokoro_config *c) {
    kokoro_config_default(c);
    kokoro_hparams *hp = &c->hp;
    hp->hidden = 64, hp->bert_hidden = 80, hp->bert_heads = 4, hp->bert_ff = 160, hp->bert_layers = 2;
    hp->dec_dim = 96, hp->asr_res_dim = 16, hp->up_initial = 48;
}
