/* gpurec_import.h: `gpurec import` (gpurec_import.c), called by gpurec's main. */
#ifndef GPUREC_IMPORT_H
#define GPUREC_IMPORT_H

/* argv[0] is "import". Returns the exit code: 0, 1 (runtime failure), 2 (usage). */
int gpurec_import(int argc, char **argv);

#endif /* GPUREC_IMPORT_H */
