/* gpurec_predict.h: `gpurec predict` (gpurec_predict.c), called by gpurec's main. */
#ifndef GPUREC_PREDICT_H
#define GPUREC_PREDICT_H

/* argv[0] is "predict". Returns the exit code: 0, 1 (runtime failure), 2 (usage), 3 (refused). */
int gpurec_predict(int argc, char **argv);

#endif /* GPUREC_PREDICT_H */
