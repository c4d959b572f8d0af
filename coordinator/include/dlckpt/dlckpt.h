/* dlckpt/dlckpt.h — the application API of dlckpt (C; callable from C++ and,
 * through iso_c_binding, from Fortran).
 *
 * An MPI application writes its checkpoint files under /dlckpt/... with
 * ordinary I/O (routed into the rank's memfs store by libintercept) and then
 * calls dlckpt_checkpoint(), collectively. Every function returns 0 on
 * success and -1 with errno set on failure; a failure is never swallowed.
 * dlckpt_last_error() gives a message naming what failed. Not thread-safe:
 * call from the thread that initialised MPI, like MPI collectives. Waiting
 * never spins (non-blocking MPI plus short sleeps). */
#ifndef DLCKPT_DLCKPT_H_
#define DLCKPT_DLCKPT_H_

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over comm. Attaches (or creates) this rank's store and, when the
 * job runs under dlckpt-run, connects to the codec service. */
int dlckpt_init(MPI_Comm comm);
/* The same for Fortran callers: pass the Fortran communicator handle, e.g.
 *   interface; integer(c_int) function dlckpt_init_f(comm) bind(C)
 *   import c_int; integer(c_int), value :: comm; end function; end interface
 *   ierr = dlckpt_init_f(MPI_COMM_WORLD) */
int dlckpt_init_f(MPI_Fint comm);

/* Collective. Commits every rank's store (freezing what was written since the
 * last checkpoint), asks the codec to encode the new epoch, waits for its
 * answer, and acknowledges the epoch in every store. On return 0 the epoch is
 * recoverable after the loss of up to k nodes per group. */
int dlckpt_checkpoint(void);

/* The original design's name for dlckpt_checkpoint(). */
int dlckpt_encode(void);

/* The epoch this run restarted from (the files under /dlckpt hold it), or 0
 * for a fresh start. Valid after dlckpt_init. */
long long dlckpt_restarted_epoch(void);

/* Collective. Detaches from the store and the service. */
int dlckpt_finalize(void);

/* A message describing the last error of this thread ("" if none). */
const char* dlckpt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_DLCKPT_H_ */
