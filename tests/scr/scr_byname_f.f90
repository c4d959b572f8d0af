! scr_byname_f: the Fortran version of scr_byname. It checkpoints with
! SCR_START_CHECKPOINT (SCR names the dataset scr.dataset.<N>) into
! ckpt.<iteration>/rank_NNNNN.ckpt and, on restart, reads
! "<name from SCR_START_RESTART>/rank_NNNNN.ckpt", found by its base name.
!   scr_byname_f [--iters N] [--sleep-ms MS]
! Prints "restarted from iteration K (checkpoint NAME)" and "checksum: X".
program scr_byname_f
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int
  implicit none
  include 'scrf.h'
  integer, parameter :: n = 512
  integer :: ierr, rank, nranks, iters, sleep_ms, it, start, i, have, need, valid, u, ios, stop_flag
  double precision :: x(n), local, total
  character(len=SCR_MAX_FILENAME) :: name, file
  character(len=SCR_MAX_FILENAME + 32) :: path
  character(len=64) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  iters = 20
  sleep_ms = 0
  do i = 1, command_argument_count() - 1, 2
    call get_command_argument(i, arg)
    if (arg == '--iters') then
      call get_command_argument(i + 1, arg)
      read (arg, *) iters
    else if (arg == '--sleep-ms') then
      call get_command_argument(i + 1, arg)
      read (arg, *) sleep_ms
    end if
  end do
  call SCR_INIT(ierr)
  if (ierr /= SCR_SUCCESS) call die('SCR_INIT')
  do i = 1, n
    x(i) = dble(rank * n + i - 1)
  end do

  start = 0
  call SCR_HAVE_RESTART(have, name, ierr)
  if (ierr /= SCR_SUCCESS) call die('SCR_HAVE_RESTART')
  if (have == 1) then
    call SCR_START_RESTART(name, ierr)
    if (ierr /= SCR_SUCCESS) call die('SCR_START_RESTART')
    write (path, '(a,a,i5.5,a)') trim(name), '/rank_', rank, '.ckpt'
    valid = 0
    call SCR_ROUTE_FILE(path, file, ierr)
    if (ierr == SCR_SUCCESS) then
      open (newunit=u, file=trim(file), access='stream', form='unformatted', status='old', iostat=ios)
      if (ios == 0) then
        read (u, iostat=ios) start, x
        if (ios == 0) valid = 1
        close (u)
      end if
    end if
    call SCR_COMPLETE_RESTART(valid, ierr)
    if (ierr /= SCR_SUCCESS) call die('SCR_COMPLETE_RESTART')
    if (rank == 0) write (*, '(a,i0,3a)') 'restarted from iteration ', start, ' (checkpoint ', trim(name), ')'
  end if

  do it = start, iters - 1
    local = sum(x)
    call MPI_Allreduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    do i = 1, n
      x(i) = 0.5d0 * x(i) + total / dble(4 * n * nranks) + dble(mod(it + i - 1, 5))
    end do
    if (sleep_ms > 0) call pause_ms(sleep_ms)
    call SCR_NEED_CHECKPOINT(need, ierr)
    if (ierr /= SCR_SUCCESS) call die('SCR_NEED_CHECKPOINT')
    if (need == 1) then
      call SCR_START_CHECKPOINT(ierr)
      if (ierr /= SCR_SUCCESS) call die('SCR_START_CHECKPOINT')
      write (path, '(a,i0,a,i5.5,a)') 'ckpt.', it + 1, '/rank_', rank, '.ckpt'
      valid = 0
      call SCR_ROUTE_FILE(path, file, ierr)
      if (ierr == SCR_SUCCESS) then
        open (newunit=u, file=trim(file), access='stream', form='unformatted', status='replace', iostat=ios)
        if (ios == 0) then
          write (u, iostat=ios) it + 1, x
          if (ios == 0) valid = 1
          close (u)
        end if
      end if
      call SCR_COMPLETE_CHECKPOINT(valid, ierr)
      if (ierr /= SCR_SUCCESS) call die('SCR_COMPLETE_CHECKPOINT')
      if (rank == 0) write (*, '(a,i0)') 'checkpoint: iteration ', it + 1
      flush (6)
      call SCR_SHOULD_EXIT(stop_flag, ierr)
      if (ierr /= SCR_SUCCESS) call die('SCR_SHOULD_EXIT')
      if (stop_flag == 1) then
        if (rank == 0) write (*, '(a,i0)') 'should_exit: iteration ', it + 1
        exit
      end if
    end if
  end do
  local = 0
  do i = 1, n
    local = local + x(i) * dble(rank * n + i)
  end do
  call MPI_Reduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) write (*, '(a,es25.17)') 'checksum: ', total
  call SCR_FINALIZE(ierr)
  if (ierr /= SCR_SUCCESS) call die('SCR_FINALIZE')
  call MPI_Finalize(ierr)

contains

  subroutine die(what)
    character(len=*), intent(in) :: what
    integer :: e
    write (0, '(a,i0,2a)') 'scr_byname_f: rank ', rank, ': failed: ', what
    call MPI_Abort(MPI_COMM_WORLD, 2, e)
  end subroutine die

  subroutine pause_ms(ms)
    integer, intent(in) :: ms
    interface
      integer(c_int) function usleep(us) bind(C, name='usleep')
        import :: c_int
        integer(c_int), value :: us
      end function usleep
    end interface
    integer :: rc
    rc = usleep(int(ms, c_int) * 1000_c_int)
  end subroutine pause_ms
end program scr_byname_f
