! scrf.h — constants of the SCR API for Fortran (include 'scrf.h'), as
! implemented by dlckpt's libdlckpt_scr. The routines are external
! subroutines with SCR's names, e.g.
!   CALL SCR_INIT(IERROR)
!   CALL SCR_ROUTE_FILE(NAME, FILE, IERROR)
!   CALL SCR_COMPLETE_OUTPUT(VALID, IERROR)
! with default INTEGER arguments and CHARACTER*(*) names.
      INTEGER SCR_SUCCESS
      PARAMETER (SCR_SUCCESS=0)
      INTEGER SCR_FAILURE
      PARAMETER (SCR_FAILURE=1)

      INTEGER SCR_MAX_FILENAME
      PARAMETER (SCR_MAX_FILENAME=1024)

      INTEGER SCR_FLAG_NONE
      PARAMETER (SCR_FLAG_NONE=0)
      INTEGER SCR_FLAG_CHECKPOINT
      PARAMETER (SCR_FLAG_CHECKPOINT=1)
      INTEGER SCR_FLAG_OUTPUT
      PARAMETER (SCR_FLAG_OUTPUT=2)
