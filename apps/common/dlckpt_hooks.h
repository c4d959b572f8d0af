/* dlckpt_hooks.h — the proxy applications' optional calls into the dlckpt
 * application API (dlckpt/dlckpt.h), for C and C++ (Fortran: dlckpt_hooks.f90).
 *
 * Two builds of dlckpt_hooks.c, chosen by the application's variant:
 *  - plain (APP_HOOKS_API_LINKED undefined or 0): the API is referenced weakly.
 *    Without a library defining dlckpt_init, linked or preloaded
 *    (LD_PRELOAD=libdlckpt_api.so), every hook is a no-op returning 0 and
 *    app_dlckpt_linked() is 0.
 *  - linked (APP_HOOKS_API_LINKED=1): the references are ordinary ones, so a
 *    static dlckpt archive's members are pulled into the link like any other
 *    library's, and a missing API is a link error.
 * Every function is called from the thread that initialised MPI; those that
 * take a communicator are collective over it. Uses app_common.h, never the
 * other way round. */
#ifndef DLCKPT_APPS_DLCKPT_HOOKS_H_
#define DLCKPT_APPS_DLCKPT_HOOKS_H_

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

int app_dlckpt_linked(void);
int app_dlckpt_init(MPI_Comm comm);   /* collective; 0 or -1 (see last_error) */
int app_dlckpt_checkpoint(void);      /* collective; 0 or -1 */
long long app_dlckpt_restarted_epoch(void); /* 0: fresh start or no dlckpt */
int app_dlckpt_finalize(void);        /* collective; 0 or -1 */
/* The message of the last failed hook: "<call>: <dlckpt's message or strerror>". */
const char* app_dlckpt_last_error(void);

/* Ends the checkpoint whose files every rank of comm has written and closed:
 * calls dlckpt_checkpoint() when dlckpt is linked in (a failure is printed
 * with the rank and ends the job with MPI_Abort), then waits for every rank.
 * On return the checkpoint is complete on all ranks. */
void app_checkpoint_commit(MPI_Comm comm, const char* app);

/* The number of checkpoint slots to keep when --ckpt-slots is not given: one
 * file rewritten in place when dlckpt is linked in (memfs commits make each
 * epoch atomic and keep the previous one), two alternating files otherwise
 * (a crash while writing one never damages the other). */
int app_default_slots(void);

/* ---- the same for Fortran, which passes communicators as MPI_Fint. */
int app_dlckpt_init_f(MPI_Fint comm);
void app_checkpoint_commit_f(MPI_Fint comm, const char* app);

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_APPS_DLCKPT_HOOKS_H_ */
