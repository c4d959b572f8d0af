! io_f: writes a checkpoint under BASE (first argument) with Fortran formatted
! and unformatted sequential I/O (and a direct-access file), reads it back
! and checks it; stops with code 1 on any mismatch. Run under a dlckpt prefix
! and on disk; the test compares the trees. Leaves one unit unclosed on
! purpose: libgfortran's exit-time flush must reach the store.
program io_f
  implicit none
  character(len=4096) :: base
  integer :: i, ios, n, k
  real(8) :: field(2000), back(2000), x
  integer :: ibuf(100), iback(100)
  character(len=64) :: line
  logical :: there

  call get_command_argument(1, base)
  if (len_trim(base) == 0) then
    write (0, *) 'usage: io_f BASE'
    stop 2
  end if
  call execute_mkdir(trim(base))

  ! Formatted sequential.
  open (unit=10, file=trim(base)//'/fmt.txt', status='replace', action='write', &
        form='formatted', iostat=ios)
  call check(ios == 0, 'open fmt.txt for writing')
  write (10, '(a,i0)') 'step ', 7
  do i = 1, 300
    write (10, '(i6,1x,f12.5,1x,a,i0)') i, i / 3.0d0, 'cell', i
  end do
  close (10)
  open (unit=11, file=trim(base)//'/fmt.txt', status='old', action='read', form='formatted', &
        iostat=ios)
  call check(ios == 0, 'open fmt.txt for reading')
  read (11, '(a)') line
  call check(trim(line) == 'step 7', 'first line')
  do i = 1, 300
    read (11, '(i6,1x,f12.5,1x,a4,i6)') n, x, line(1:4), k
    call check(n == i .and. abs(x - i / 3.0d0) < 1d-4 .and. k == i, 'formatted record')
  end do
  read (11, '(a)', iostat=ios) line
  call check(ios < 0, 'end of formatted file')
  close (11)

  ! Unformatted sequential: records of different sizes.
  do i = 1, 2000
    field(i) = i * 0.5d0
  end do
  do i = 1, 100
    ibuf(i) = i * i
  end do
  open (unit=20, file=trim(base)//'/restart.unf', status='replace', form='unformatted', &
        access='sequential', action='write', iostat=ios)
  call check(ios == 0, 'open restart.unf')
  write (20) 2000, 100
  write (20) field
  write (20) ibuf
  write (20) field(1:10)
  close (20)
  open (unit=21, file=trim(base)//'/restart.unf', status='old', form='unformatted', &
        access='sequential', action='read', iostat=ios)
  call check(ios == 0, 'reopen restart.unf')
  read (21) n, k
  call check(n == 2000 .and. k == 100, 'header record')
  read (21) back
  call check(all(back == field), 'field record')
  read (21) iback
  call check(all(iback == ibuf), 'integer record')
  rewind (21)
  read (21) n
  read (21) back
  backspace (21)
  read (21) back
  call check(all(back == field), 'backspace and reread')
  close (21)

  ! Direct access.
  open (unit=30, file=trim(base)//'/direct.dat', status='replace', form='unformatted', &
        access='direct', recl=80, iostat=ios)
  call check(ios == 0, 'open direct.dat')
  do i = 5, 1, -1
    write (30, rec=i) field(i*10:i*10+9)
  end do
  read (30, rec=3) back(1:10)
  call check(all(back(1:10) == field(30:39)), 'direct record 3')
  close (30)

  ! Inquire and delete.
  open (unit=40, file=trim(base)//'/scratch.txt', status='replace')
  write (40, *) 'temporary'
  close (40, status='delete')
  inquire (file=trim(base)//'/scratch.txt', exist=there)
  call check(.not. there, 'deleted file is gone')
  inquire (file=trim(base)//'/restart.unf', exist=there)
  call check(there, 'restart.unf exists')

  ! Left open: flushed by the runtime at exit.
  open (unit=50, file=trim(base)//'/unclosed.txt', status='replace')
  do i = 1, 50
    write (50, '(a,i0)') 'pending ', i
  end do
  print '(a,a)', 'io_f: all checks passed in ', trim(base)

contains

  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (0, '(a,a)') 'io_f: check failed: ', what
      stop 1
    end if
  end subroutine check

  subroutine execute_mkdir(dir)
    character(len=*), intent(in) :: dir
    interface
      integer(c_int) function c_mkdir(path, mode) bind(c, name='mkdir')
        use iso_c_binding, only: c_int, c_char
        character(kind=c_char), intent(in) :: path(*)
        integer(c_int), value :: mode
      end function c_mkdir
    end interface
    integer :: rc
    rc = c_mkdir(dir//char(0), int(o'755'))
    call check(rc == 0, 'mkdir base')
  end subroutine execute_mkdir
end program io_f
