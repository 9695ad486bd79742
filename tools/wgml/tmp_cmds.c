/* TEMPORARY until these commands are written. */
#include "cli.h"
int cmd_quantize(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("not built yet"); }
int cmd_synth(int argc, char **argv) { (void)argc; (void)argv; return cli_fail("not built yet"); }
