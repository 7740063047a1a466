/* pred_cli.h: `gpurec predict` (pred_cli.c), called by gpurec's main. */
#ifndef PRED_CLI_H
#define PRED_CLI_H

/* argv[0] is "predict". Returns the exit code: 0, 1 (runtime failure), 2 (usage), 3 (refused). */
int pred_cli_main(int argc, char **argv);

#endif /* PRED_CLI_H */
