! The Fortran binding (module dlckpt) under dlckpt-run: asynchronous mode set
! through the API, three checkpoints of a file written with Fortran I/O, the
! wait, the protected epoch. Prints "fortran_api: ok" on rank 0.
program fortran_api
  use mpi
  use dlckpt
  implicit none
  integer :: ierr, rank, it, u, i
  character(len=64) :: path
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  if (dlckpt_init(MPI_COMM_WORLD) /= 0) call fail("dlckpt_init")
  if (dlckpt_set_encode_mode(7) == 0) call fail("mode 7 was accepted")
  if (dlckpt_set_encode_mode(DLCKPT_ENCODE_ASYNC) /= 0) call fail("dlckpt_set_encode_mode")
  write(path, '(a,i0,a)') "/dlckpt/fortran_api.rank", rank, ".dat"
  do it = 1, 3
    open(newunit=u, file=trim(path), form="unformatted", access="stream", status="replace")
    write(u) rank, it, [(real(rank * 1000 + it + i, 8), i = 1, 1024)]
    close(u)
    if (dlckpt_checkpoint() /= 0) call fail("dlckpt_checkpoint")
  end do
  if (dlckpt_checkpoint_wait() /= 0) call fail("dlckpt_checkpoint_wait")
  if (dlckpt_protected_epoch() /= 3) call fail("protected epoch is not 3")
  if (dlckpt_finalize() /= 0) call fail("dlckpt_finalize")
  if (rank == 0) print '(a)', "fortran_api: ok"
  call MPI_Finalize(ierr)
contains
  subroutine fail(what)
    character(len=*), intent(in) :: what
    integer :: e
    print '(a,i0,a,a,a,a)', "fortran_api rank ", rank, ": ", what, ": ", dlckpt_last_error()
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine
end program
