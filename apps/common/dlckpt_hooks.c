/* dlckpt_hooks.c — calls the dlckpt application API when it is linked in.
 *
 * The API functions are declared weak: if no object defining them is linked
 * (or preloaded), their addresses are null and every hook is a no-op that
 * succeeds. The prototypes come from dlckpt/dlckpt.h, so a change there fails
 * to compile here. */
#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <string.h>

#include "app_common.h"
#include "dlckpt/dlckpt.h"

#pragma weak dlckpt_init
#pragma weak dlckpt_checkpoint
#pragma weak dlckpt_restarted_epoch
#pragma weak dlckpt_finalize
#pragma weak dlckpt_last_error

static char hook_error[512];

/* Records the message of a failed API call: dlckpt's own if it exports one. */
static void remember_error(const char* call, int saved_errno) {
  const char* detail = dlckpt_last_error ? dlckpt_last_error() : "";
  if (detail == NULL || detail[0] == '\0') detail = strerror(saved_errno);
  snprintf(hook_error, sizeof hook_error, "%s: %s", call, detail);
}

int app_dlckpt_linked(void) { return dlckpt_init != NULL; }

int app_dlckpt_init(MPI_Comm comm) {
  if (dlckpt_init == NULL) return 0;
  errno = 0;
  if (dlckpt_init(comm) != 0) {
    remember_error("dlckpt_init", errno);
    return -1;
  }
  return 0;
}

int app_dlckpt_checkpoint(void) {
  if (dlckpt_checkpoint == NULL) return 0;
  errno = 0;
  if (dlckpt_checkpoint() != 0) {
    remember_error("dlckpt_checkpoint", errno);
    return -1;
  }
  return 0;
}

long long app_dlckpt_restarted_epoch(void) {
  return dlckpt_restarted_epoch != NULL ? dlckpt_restarted_epoch() : 0;
}

int app_dlckpt_finalize(void) {
  if (dlckpt_finalize == NULL) return 0;
  errno = 0;
  if (dlckpt_finalize() != 0) {
    remember_error("dlckpt_finalize", errno);
    return -1;
  }
  return 0;
}

const char* app_dlckpt_last_error(void) { return hook_error; }

void app_checkpoint_commit(MPI_Comm comm, const char* app) {
  if (app_dlckpt_checkpoint() != 0) {
    int rank = -1;
    MPI_Comm_rank(comm, &rank);
    fprintf(stderr, "%s: rank %d: checkpoint not committed: %s\n", app, rank, hook_error);
    fflush(stderr);
    /* MPI_Abort ends Hydra's output forwarding at once: let the message out. */
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    MPI_Abort(comm, 3);
  }
  app_barrier(comm);
}

int app_default_slots(void) { return app_dlckpt_linked() ? 1 : 2; }
