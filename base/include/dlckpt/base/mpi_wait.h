/* dlckpt/base/mpi_wait.h — the one sleeping MPI wait, for C, Fortran (through
 * C) and C++ (dlckpt/base/mpi.h wraps it). MPICH busy-polls inside blocking
 * calls; these test the request(s) and sleep between tests, the sleep growing
 * by half from min_ns to max_ns. Return MPI_SUCCESS or the MPI error code.
 * dlckpt_mpi_wait/_waitall use 10 us to 100 us. Library dlckpt::mpi_wait has
 * no other dependency than MPI. */
#ifndef DLCKPT_BASE_MPI_WAIT_H_
#define DLCKPT_BASE_MPI_WAIT_H_

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

int dlckpt_mpi_waitall_backoff(int count, MPI_Request* requests, long min_ns, long max_ns);
/* The same, giving up after timeout_ns (<= 0: never): then *timed_out is set,
 * MPI_SUCCESS is returned and the requests stay active. */
int dlckpt_mpi_waitall_until(int count, MPI_Request* requests, long min_ns, long max_ns,
                             long long timeout_ns, int* timed_out);
int dlckpt_mpi_wait(MPI_Request* request);
int dlckpt_mpi_waitall(int count, MPI_Request* requests);

#ifdef __cplusplus
}
#endif

#endif /* DLCKPT_BASE_MPI_WAIT_H_ */
