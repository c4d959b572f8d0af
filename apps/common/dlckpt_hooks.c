/* dlckpt_hooks.c — see dlckpt_hooks.h. The prototypes come from
 * dlckpt/dlckpt.h, so a change there fails to compile here. */
#include "dlckpt_hooks.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "app_common.h"
#include "dlckpt/dlckpt.h"

#if APP_HOOKS_API_LINKED
/* Ordinary references: the API is part of the link. */
#define API_PRESENT(fn) 1
#else
/* Weak references: null unless something linked or preloaded defines them. */
#pragma weak dlckpt_init
#pragma weak dlckpt_checkpoint
#pragma weak dlckpt_restarted_epoch
#pragma weak dlckpt_finalize
#pragma weak dlckpt_last_error
#define API_PRESENT(fn) ((fn) != NULL)
#endif

static char hook_error[512];

/* rc of an API call made with errno cleared: 0, or -1 with the message of the
 * failed call (dlckpt's own if it has one) remembered for last_error. */
static int checked(const char* call, int rc) {
  if (rc == 0) return 0;
  const int saved_errno = errno;
  const char* detail = API_PRESENT(dlckpt_last_error) ? dlckpt_last_error() : "";
  if (detail == NULL || detail[0] == '\0') detail = strerror(saved_errno);
  snprintf(hook_error, sizeof hook_error, "%s: %s", call, detail);
  return -1;
}

/* Calls fn(args...) if the API is there (else succeeds): 0 or -1. */
#define CALL_API(fn, ...) (API_PRESENT(fn) ? (errno = 0, checked(#fn, fn(__VA_ARGS__))) : 0)

int app_dlckpt_linked(void) { return API_PRESENT(dlckpt_init); }

int app_dlckpt_init(MPI_Comm comm) { return CALL_API(dlckpt_init, comm); }

int app_dlckpt_checkpoint(void) { return CALL_API(dlckpt_checkpoint); }

long long app_dlckpt_restarted_epoch(void) {
  return API_PRESENT(dlckpt_restarted_epoch) ? dlckpt_restarted_epoch() : 0;
}

int app_dlckpt_finalize(void) { return CALL_API(dlckpt_finalize); }

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

/* ---- entry points for Fortran (communicators as MPI_Fint handles) -------- */

int app_dlckpt_init_f(MPI_Fint comm) { return app_dlckpt_init(MPI_Comm_f2c(comm)); }

void app_checkpoint_commit_f(MPI_Fint comm, const char* app) {
  app_checkpoint_commit(MPI_Comm_f2c(comm), app);
}
