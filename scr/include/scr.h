/* scr.h — the SCR (Scalable Checkpoint/Restart, version 3) application
 * interface, implemented by dlckpt's libdlckpt_scr (see scr/README.md in the
 * dlckpt sources for what maps to what and which parameters are ignored).
 *
 * An SCR application links -ldlckpt_scr instead of -lscr and runs under
 * dlckpt-run: its checkpoints live in memory (memfs), protected by parity on
 * spare nodes, and a relaunched job restarts from the newest protected one.
 *
 * Every function returns SCR_SUCCESS or SCR_FAILURE (never aborts). All
 * functions are collective over MPI_COMM_WORLD except SCR_Route_file,
 * SCR_Get_version and SCR_Config. Call them from the thread that initialised
 * MPI. */
#ifndef DLCKPT_SCR_H_
#define DLCKPT_SCR_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The SCR interface version this library implements. */
#define SCR_MAJOR_VERSION "3"
#define SCR_MINOR_VERSION "0"
#define SCR_PATCH_VERSION "0"
#define SCR_VERSION "v3.0.0"

/* Return codes. */
#define SCR_SUCCESS (0)
#define SCR_FAILURE (1)

/* Size of the buffers SCR_Route_file, SCR_Have_restart and SCR_Start_restart
 * write into (bytes, including the terminating NUL). */
#define SCR_MAX_FILENAME 1024

/* Flags of SCR_Start_output, OR'ed. */
#define SCR_FLAG_NONE       (0 << 0) /* for initialising variables */
#define SCR_FLAG_CHECKPOINT (1 << 0) /* the job can restart from this dataset */
#define SCR_FLAG_OUTPUT     (1 << 1) /* the dataset is written to its path (SCR_PREFIX) */

/* --- init and finalize */

/* After MPI_Init. Attaches this rank's memfs store (and, under dlckpt-run,
 * connects to the codec service); finds the checkpoint a relaunched job
 * restarts from. */
int SCR_Init(void);
/* Before MPI_Finalize. Waits until the last checkpoint is protected. */
int SCR_Finalize(void);

/* --- configuration (before SCR_Init to set; any time to query)
 * "KEY=VALUE" sets KEY and returns a pointer to the stored value (owned by
 * the library; valid until KEY is set again). "KEY=" unsets KEY and returns
 * NULL. "KEY" returns a malloc'ed copy of KEY's value (the caller frees it),
 * or NULL if KEY has no value. Environment variables take precedence over
 * SCR_Config, which takes precedence over the file $SCR_CONF_FILE. NULL on
 * failure (bad syntax, set after SCR_Init). */
const char* SCR_Config(const char* config);
/* SCR_Config with printf-style formatting. */
const char* SCR_Configf(const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* --- files */

/* Where to access the file `name` (relative to SCR_PREFIX, default the
 * working directory, or absolute): written into `file` (SCR_MAX_FILENAME
 * bytes). Between SCR_Start_output and SCR_Complete_output: a path to create
 * the file at, with any I/O library (directories are created). Between
 * SCR_Start_restart and SCR_Complete_restart, or outside any phase while a
 * checkpoint to restart from exists: a path to read the file of that
 * checkpoint from (fails if the checkpoint has no such file). Otherwise
 * fails. Local (not collective). */
int SCR_Route_file(const char* name, char* file);

/* --- restart */

/* *flag = 1 if there is a checkpoint to restart from (the same on every
 * rank), and its name into `name` (SCR_MAX_FILENAME bytes; may be NULL). */
int SCR_Have_restart(int* flag, char* name);
/* Starts reading that checkpoint (fails if there is none); its name into
 * `name` (may be NULL). */
int SCR_Start_restart(char* name);
/* Ends the restart. SCR_SUCCESS only if every rank passed valid = 1;
 * otherwise no checkpoint remains to restart from. */
int SCR_Complete_restart(int valid);

/* --- checkpoints (SCR 1.x interface, still supported) */

/* *flag = 1 if a checkpoint should be taken now (SCR_CHECKPOINT_INTERVAL,
 * SCR_CHECKPOINT_SECONDS, SCR_CHECKPOINT_OVERHEAD; 1 when none is set); the
 * same on every rank. */
int SCR_Need_checkpoint(int* flag);
/* SCR_Start_output(NULL, SCR_FLAG_CHECKPOINT). */
int SCR_Start_checkpoint(void);
/* SCR_Complete_output(valid). */
int SCR_Complete_checkpoint(int valid);

/* --- output */

/* Starts the dataset `name` (identical on every rank; NULL: a generated
 * name) with SCR_FLAG_CHECKPOINT and/or SCR_FLAG_OUTPUT. */
int SCR_Start_output(const char* name, int flags);
/* Ends the dataset: every rank must have closed its files. `valid` is agreed
 * across ranks: if any rank passes 0 the dataset is discarded everywhere and
 * SCR_FAILURE is returned on every rank. A checkpoint is one dlckpt
 * checkpoint (commit, parity on the spares, acknowledge); SCR_SUCCESS means
 * it is protected. */
int SCR_Complete_output(int valid);

/* --- datasets */

/* After a restart done without the restart API: the dataset `name` is the
 * one the job restarted from. */
int SCR_Current(const char* name);
/* Forgets the dataset (no index is kept: succeeds). */
int SCR_Drop(const char* name);
/* Deletes the dataset's files from memory: it is no longer a restart
 * candidate. */
int SCR_Delete(const char* name);

/* --- environment */

/* "v3.0.0 (dlckpt <version>)"; never freed by the caller. */
char* SCR_Get_version(void);
/* *flag = 1 if the job should stop (the same on every rank). */
int SCR_Should_exit(int* flag);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* DLCKPT_SCR_H_ */
