! scr_app_f: the Fortran version of scr_app (SCR's restart and checkpoint
! pattern through the Fortran binding: include 'scrf.h', CALL SCR_...).
!   scr_app_f [--iters N] [--sleep-ms MS]
! Prints "restarted from iteration K" after a restart and "checksum: X".
program scr_app_f
  use mpi
  use, intrinsic :: iso_c_binding, only: c_int
  implicit none
  include 'scrf.h'
  integer, parameter :: n = 1000
  integer :: ierr, rank, nranks, iters, sleep_ms, it, start, i, have, need, valid, u, ios
  double precision :: x(n), local, total, mean
  character(len=SCR_MAX_FILENAME) :: name, file
  character(len=64) :: rel, arg, dname

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  iters = 16
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
    x(i) = dble(rank * n + i - 1) / dble(nranks * n)
  end do
  write (rel, '(a,i0,a)') 'ckpt/frank_', rank, '.dat'

  start = 0
  call SCR_HAVE_RESTART(have, name, ierr)
  if (ierr /= SCR_SUCCESS) call die('SCR_HAVE_RESTART')
  if (have == 1) then
    call SCR_START_RESTART(name, ierr)
    if (ierr /= SCR_SUCCESS) call die('SCR_START_RESTART')
    valid = 0
    call SCR_ROUTE_FILE(rel, file, ierr)
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
    if (rank == 0) write (*, '(a,i0)') 'restarted from iteration ', start
  end if

  do it = start, iters - 1
    local = sum(x)
    call MPI_Allreduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    mean = total / dble(nranks * n)
    do i = 1, n
      x(i) = 0.5d0 * x(i) + 0.25d0 * mean + 0.25d0 * dble(mod(it + i - 1, 7)) / 7.0d0
    end do
    if (sleep_ms > 0) call pause_ms(sleep_ms)
    call SCR_NEED_CHECKPOINT(need, ierr)
    if (ierr /= SCR_SUCCESS) call die('SCR_NEED_CHECKPOINT')
    if (need == 1) then
      write (dname, '(a,i0)') 'step.', it + 1
      call SCR_START_OUTPUT(dname, SCR_FLAG_CHECKPOINT, ierr)
      if (ierr /= SCR_SUCCESS) call die('SCR_START_OUTPUT')
      valid = 0
      call SCR_ROUTE_FILE(rel, file, ierr)
      if (ierr == SCR_SUCCESS) then
        open (newunit=u, file=trim(file), access='stream', form='unformatted', status='replace', iostat=ios)
        if (ios == 0) then
          write (u, iostat=ios) it + 1, x
          if (ios == 0) valid = 1
          close (u)
        end if
      end if
      call SCR_COMPLETE_OUTPUT(valid, ierr)
      if (ierr /= SCR_SUCCESS) call die('SCR_COMPLETE_OUTPUT')
      if (rank == 0) write (*, '(a,i0)') 'checkpoint: iteration ', it + 1
    end if
  end do
  local = sum(x)
  call MPI_Reduce(local, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
  if (rank == 0) write (*, '(a,es25.17)') 'checksum: ', total
  call SCR_FINALIZE(ierr)
  if (ierr /= SCR_SUCCESS) call die('SCR_FINALIZE')
  call MPI_Finalize(ierr)

contains

  subroutine die(what)
    character(len=*), intent(in) :: what
    integer :: e
    write (0, '(a,i0,2a)') 'scr_app_f: rank ', rank, ': failed: ', what
    call MPI_Abort(MPI_COMM_WORLD, 2, e)
  end subroutine die

  subroutine pause_ms(ms)
    integer, intent(in) :: ms
    integer(8) :: t0, t, rate
    call system_clock(t0, rate)
    do
      call system_clock(t)
      if ((t - t0) * 1000 >= int(ms, 8) * rate) exit
      call sleep_short()
    end do
  end subroutine pause_ms

  subroutine sleep_short()
    interface
      integer(c_int) function usleep(us) bind(C, name='usleep')
        import :: c_int
        integer(c_int), value :: us
      end function usleep
    end interface
    integer :: rc
    rc = usleep(2000_c_int)
  end subroutine sleep_short
end program scr_app_f
