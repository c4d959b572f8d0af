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
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over comm. Attaches (or creates) this rank's store and, when the
 * job runs under dlckpt-run, connects to the codec service. Stores that hold
 * a checkpoint of an earlier run are resumed (dlckpt_restarted_epoch) only
 * when DLCKPT_RESUME=1: dlckpt-run sets it when it relaunches the job after a
 * recovery, and with --resume. Otherwise rank 0 says so on stderr and every
 * such store is removed and created empty (a pointer from
 * dlckpt::intercept::ProcessStore obtained before this call is then invalid).
 * ENOTSUP, before any MPI call, if the process maps two MPI libraries (MPICH's
 * and Open MPI's: e.g. an Open MPI mpi4py with a dlckpt built with MPICH);
 * the message names both and the fix. */
int dlckpt_init(MPI_Comm comm);
/* The same for Fortran callers: pass the Fortran communicator handle, e.g.
 *   interface; integer(c_int) function dlckpt_init_f(comm) bind(C)
 *   import c_int; integer(c_int), value :: comm; end function; end interface
 *   ierr = dlckpt_init_f(MPI_COMM_WORLD) */
int dlckpt_init_f(MPI_Fint comm);

/* Collective. Commits every rank's store (freezing what was written since the
 * last checkpoint, with a CRC32C per file) and asks the codec to encode the
 * new epoch.
 *  - Synchronous mode (the default): waits for the encode and acknowledges
 *    the epoch in every store. On return 0 the epoch is recoverable after the
 *    loss of up to k nodes per group.
 *  - Asynchronous mode: returns once every store committed the epoch; the
 *    codec encodes it while the application goes on. Until its parity exists
 *    in every group, a failure restores the previous protected epoch. At most
 *    one encode is in flight: a checkpoint that arrives while the previous
 *    one still encodes waits for it first (back-pressure). A store then holds
 *    up to three versions: the protected epoch, the one being encoded, and
 *    the blocks rewritten since (copy-on-write), so size it for the protected
 *    checkpoint plus two times the bytes that change per step; a write that
 *    does not fit fails with ENOSPC and both committed epochs stay whole. If
 *    an encode fails, the error is reported by dlckpt_checkpoint_wait (and
 *    dlckpt_finalize) and the epoch is dropped; the next checkpoint replaces
 *    it. */
int dlckpt_checkpoint(void);

/* Encode modes: dlckpt_set_encode_mode, or DLCKPT_ENCODE=sync|async in the
 * environment at dlckpt_init (dlckpt-run --encode sets it). */
#define DLCKPT_ENCODE_SYNC 0
#define DLCKPT_ENCODE_ASYNC 1
/* Chooses the mode for the following checkpoints. Call with the same mode on
 * every rank, between checkpoints. EINVAL for an unknown mode. */
int dlckpt_set_encode_mode(int mode);

/* Collective. Waits until the newest committed epoch is protected (its parity
 * committed in every group) and acknowledges it. Returns at once when nothing
 * is being encoded. -1 if an encode collected now, or by a checkpoint since
 * the last wait, failed (the previous protected epoch stays protected). */
int dlckpt_checkpoint_wait(void);

/* The newest epoch known to be protected on this rank (as of the last
 * checkpoint or wait), or the restarted epoch, or 0. */
long long dlckpt_protected_epoch(void);

/* The original design's name for dlckpt_checkpoint(). */
int dlckpt_encode(void);

/* The epoch this run restarted from (the files under /dlckpt hold it), or 0
 * for a fresh start. Valid after dlckpt_init. */
long long dlckpt_restarted_epoch(void);

/* Collective. Waits for an encode in flight (as dlckpt_checkpoint_wait),
 * then detaches from the service. Without dlckpt-run (no codec service) a
 * run that ends well also removes its store (unlinked; this process keeps
 * its mapping until it exits) unless DLCKPT_KEEP=1. */
int dlckpt_finalize(void);

/* Memory regions (protected memory). A region is `bytes` bytes at `ptr`,
 * named by the application's id (>= 0). dlckpt_checkpoint() copies every
 * region protected at that moment into the rank's store, beside the files
 * under /dlckpt, as the store file "/.dlckpt-mem/<id>" (raw bytes, its size
 * the region's): a region is an ordinary file of the checkpoint, so parity,
 * rebuild, drains, compression and async encode treat it as any other. A
 * region unprotected since the previous checkpoint is dropped from the next.
 * The memory stays the caller's: dlckpt reads it during dlckpt_checkpoint
 * only (and writes it during dlckpt_recover*), so it must stay valid while
 * protected and must not change during those calls. Local calls (no MPI),
 * not thread-safe, as the rest of the API. */

/* Protects [ptr, ptr + bytes) as region `id`, replacing any earlier pointer
 * and size of that id (a region may grow, shrink or move between
 * checkpoints). May be called before dlckpt_init. EINVAL for id < 0, a
 * NULL ptr with bytes > 0 (bytes 0 is an empty region), or bytes past
 * PTRDIFF_MAX. */
int dlckpt_protect(int id, void* ptr, size_t bytes);
/* Stops protecting region `id`: the next checkpoint no longer holds it.
 * ENOENT if it is not protected. */
int dlckpt_unprotect(int id);
/* After dlckpt_init, typically when dlckpt_restarted_epoch() > 0: copies
 * every protected region back as the store holds it: after a relaunch, from
 * the restarted epoch; within a run, as the last dlckpt_checkpoint stored
 * it. Every region is checked before any byte is copied: ENOENT naming the
 * id if the checkpoint does not hold it, EINVAL naming the id and both sizes
 * if the checkpoint's size differs from the protected size (protect it with
 * the checkpoint's size, e.g. from dlckpt_region_size); on any such error no
 * memory is written. Regions in the checkpoint that are not protected are
 * left alone. EIO/EBADMSG if the store fails while copying (the region then
 * holds an unspecified mix). */
int dlckpt_recover(void);
/* The same for region `id` alone (ENOENT also if `id` is not protected). */
int dlckpt_recover_region(int id);
/* The size in bytes of region `id` as dlckpt_recover would find it, or -1
 * (errno ENOENT) if the store holds none; for sizing a buffer before
 * dlckpt_protect and dlckpt_recover_region. After dlckpt_init. */
long long dlckpt_region_size(int id);

/* A message describing the last error of this thread ("" if none). */
const char* dlckpt_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_DLCKPT_H_ */
