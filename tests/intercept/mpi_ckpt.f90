! mpi_ckpt: each MPI rank writes BASE/frank<r>.ckpt with Fortran formatted
! sequential I/O. Built by mpi.sh with mpif90 @dlckpt-intercept.flags.
program mpi_ckpt
  use mpi
  implicit none
  integer :: ierr, rank, i
  character(len=4096) :: base
  character(len=4200) :: path
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call get_command_argument(1, base)
  write (path, '(a,a,i0,a)') trim(base), '/frank', rank, '.ckpt'
  open (unit=10, file=trim(path), status='replace', form='formatted')
  do i = 1, 500
    write (10, '(a,i0,a,i0)') 'rank ', rank, ' value ', i * rank
  end do
  close (10)
  call MPI_Finalize(ierr)
end program mpi_ckpt
