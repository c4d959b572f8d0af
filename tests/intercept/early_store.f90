! early_store.f90 — issue 36, Fortran: under LD_PRELOAD=libdlckpt_preload.so
! the store exists once MPI_INIT returned (MPICH's mpi_init_ calls the C
! MPI_Init, which the preload library interposes). Prints per rank
!   rank R store_before_open 0|1
! then writes /dlckpt/early/ff.R with a Fortran unit.
program early_store
  use mpi
  implicit none
  integer :: ierr, rank, u
  character(len=256) :: job, node, shm, path
  logical :: there
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_environment_variable("DLCKPT_JOB", job)
  call get_environment_variable("DLCKPT_NODE", node)
  write (shm, '(a,a,a,a,a,i0)') "/dev/shm/dlckpt.", trim(job), ".", trim(node), ".r", rank
  inquire (file=trim(shm), exist=there)
  write (path, '(a,i0)') "/dlckpt/early/ff.", rank
  open (newunit=u, file=trim(path), status="replace", action="write", form="unformatted", access="stream")
  write (u) rank
  close (u)
  write (*, '(a,i0,a,i0)') "rank ", rank, " store_before_open ", merge(1, 0, there)
  call MPI_Finalize(ierr)
end program early_store
