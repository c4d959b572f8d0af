/* veloc.h — the VeloC application interface (VeloC API 1.x, as documented at
 * https://veloc.readthedocs.io and declared by VeloC's own veloc.h), provided
 * over dlckpt by libdlckpt_veloc.so. A VeloC application includes this
 * header, links -ldlckpt_veloc (or dlckpt::veloc) and runs under dlckpt-run:
 * its checkpoints live in each rank's memfs store, protected by XOR or
 * Reed-Solomon parity across nodes. What maps to what, and what is not
 * covered: veloc/README.md.
 *
 * Every function returns VELOC_SUCCESS or VELOC_FAILURE (with a message on
 * stderr, "VELOC: rank R: ..."), except VELOC_Restart_test and
 * VELOC_Recover_size, which return a version or a size (VELOC_FAILURE / -1
 * when there is none). Not thread-safe: call from the thread that called
 * MPI_Init. Functions marked collective must be called by every process of
 * the communicator given to VELOC_Init. */
#ifndef DLCKPT_VELOC_VELOC_H_
#define DLCKPT_VELOC_VELOC_H_

#include <mpi.h>
#include <stddef.h>
#include <string.h> /* VeloC's header provides it; applications may rely on it */

#define VELOC_SUCCESS (0)
#define VELOC_FAILURE (-1)

/* The size of the buffer VELOC_Route_file writes (bytes, with the NUL). */
#define VELOC_MAX_NAME (1024)

/* Modes of VELOC_Recover_selective. */
#define VELOC_RECOVER_ALL (0)
#define VELOC_RECOVER_SOME (1)
#define VELOC_RECOVER_REST (2)
/* Modes of VELOC_Checkpoint_selective. */
#define VELOC_CKPT_ALL (0)
#define VELOC_CKPT_SOME (1)
#define VELOC_CKPT_REST (2)

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over comm, after MPI_Init. Reads the configuration file
 * cfg_file (VeloC's "key = value" lines; NULL or "" for none; a file that
 * cannot be read fails) and initialises dlckpt on comm. Honoured keys:
 * scratch (where routed files are staged), mode (sync or async encode);
 * the others are reported on stderr once and ignored (README.md). */
int VELOC_Init(MPI_Comm comm, const char* cfg_file);
/* VeloC's non-collective mode: not supported by dlckpt (its checkpoints are
 * collective); always VELOC_FAILURE. */
int VELOC_Init_single(unsigned int id, const char* cfg_file);
/* Collective. Waits until the last checkpoint is protected, detaches from
 * dlckpt and removes this rank's staging directory. `cleanup` is accepted
 * and ignored: dlckpt-run decides when the checkpoints go. */
int VELOC_Finalize(int cleanup);

/* Registers `count` elements of `base_size` bytes at `ptr` as region `id`
 * (>= 0), replacing an earlier registration of the id (another pointer or
 * size). The memory stays the application's and must stay valid while
 * protected. */
int VELOC_Mem_protect(int id, void* ptr, size_t count, size_t base_size);
/* Unregisters region `id`; VELOC_FAILURE if it is not registered. */
int VELOC_Mem_unprotect(int id);

/* Inside a checkpoint phase: the path of this rank's checkpoint file for the
 * phase's name and version, where the application writes its own data with
 * any I/O library. Inside a restart phase: the path of that file as it was
 * checkpointed (copied out of memory for the phase). As in VeloC there is
 * one such file per rank and checkpoint: `original` is not used to name it.
 * `routed` receives at most VELOC_MAX_NAME bytes with the NUL. */
int VELOC_Route_file(const char* original, char* routed);

/* Collective. Starts checkpoint `name` (a non-empty string without '/') of
 * `version`, which must be greater than every version checkpointed or
 * restarted by this run. */
int VELOC_Checkpoint_begin(const char* name, int version);
/* Inside a checkpoint phase: include the protected regions (mode
 * VELOC_CKPT_ALL; SOME and REST are not supported and fail). The regions
 * are copied at VELOC_Checkpoint_end: do not change them in between. */
int VELOC_Checkpoint_selective(int mode, int* ids, int id_count);
/* VELOC_Checkpoint_selective(VELOC_CKPT_ALL, NULL, 0). */
int VELOC_Checkpoint_mem(void);
/* Collective. Ends the checkpoint phase. If every rank passes success = 1,
 * the routed file and every protected region are stored in the rank's
 * memory store and one dlckpt checkpoint runs (commit, parity, and with
 * the default synchronous encode, acknowledgement): VELOC_SUCCESS means the
 * checkpoint is protected (with mode = async: committed, being encoded).
 * Otherwise, or if storing fails anywhere, VELOC_FAILURE on every rank and
 * the previous checkpoint stays the one to restart from. */
int VELOC_Checkpoint_end(int success);
/* Collective. Waits for an asynchronous encode in flight; VELOC_FAILURE if
 * it failed. Returns at once in synchronous mode. */
int VELOC_Checkpoint_wait(void);
/* Collective. VELOC_Checkpoint_wait, VELOC_Checkpoint_begin,
 * VELOC_Checkpoint_mem, VELOC_Checkpoint_end(1). */
int VELOC_Checkpoint(const char* name, int version);

/* Collective. The version of the checkpoint `name` this run can restart
 * from (after a relaunch by dlckpt-run: the one it restored; within a run:
 * the newest taken), if it is lower than `needed_version` (any version when
 * needed_version <= 0); else VELOC_FAILURE. */
int VELOC_Restart_test(const char* name, int needed_version);
/* Collective. Starts restarting from checkpoint `name` of `version`, which
 * must be the one VELOC_Restart_test offers. */
int VELOC_Restart_begin(const char* name, int version);
/* Inside a restart phase: copies regions back. VELOC_RECOVER_ALL: every
 * protected region; SOME: the ids listed; REST: the protected ids not
 * listed. Each must be protected with the size it had in the checkpoint
 * (see VELOC_Recover_size); all are checked before any byte is copied. */
int VELOC_Recover_selective(int mode, int* ids, int id_count);
/* The size in bytes of region `id` in the checkpoint, -1 if it holds none. */
int VELOC_Recover_size(int id);
/* VELOC_Recover_selective(VELOC_RECOVER_ALL, NULL, 0). */
int VELOC_Recover_mem(void);
/* Collective. Ends the restart phase; VELOC_SUCCESS only if every rank
 * passes success = 1. */
int VELOC_Restart_end(int success);
/* Collective. VELOC_Restart_begin, VELOC_Recover_mem, VELOC_Restart_end. */
int VELOC_Restart(const char* name, int version);

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_VELOC_VELOC_H_ */
