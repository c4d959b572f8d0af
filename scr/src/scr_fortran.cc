// The Fortran binding of the SCR API, with SCR's names: external subroutines
// SCR_INIT(IERROR), SCR_ROUTE_FILE(NAME, FILE, IERROR), ... as gfortran calls
// them (lower case, one trailing underscore, default INTEGER arguments by
// reference, and each CHARACTER argument's length passed by value after the
// others). Input strings lose their trailing blanks; output strings are
// padded with blanks (IERROR = SCR_FAILURE if one does not fit). Constants:
// include 'scrf.h'.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "scr.h"

namespace {

std::string In(const char* s, size_t n) {
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\0')) --n;
  return std::string(s, n);
}

// Copies `v` into the blank-padded Fortran string; false if it does not fit.
bool Out(const char* v, char* s, size_t n) {
  size_t len = std::strlen(v);
  if (len > n) return false;
  std::memcpy(s, v, len);
  std::memset(s + len, ' ', n - len);
  return true;
}

int Routed(int rc, const char* buf, char* s, size_t n) {
  if (rc != SCR_SUCCESS) return rc;
  return Out(buf, s, n) ? SCR_SUCCESS : SCR_FAILURE;
}

}  // namespace

extern "C" {

void scr_init_(int* ierror) { *ierror = SCR_Init(); }
void scr_finalize_(int* ierror) { *ierror = SCR_Finalize(); }

void scr_config_(const char* config, char* val, int* ierror, size_t config_len, size_t val_len) {
  std::string c = In(config, config_len);
  const char* v = SCR_Config(c.c_str());
  bool get = c.find('=') == std::string::npos || c.find(' ', c.rfind('=')) != std::string::npos;
  if (get) {
    *ierror = v != nullptr && Out(v, val, val_len) ? SCR_SUCCESS : SCR_FAILURE;
    std::free(const_cast<char*>(v));
    return;
  }
  // A set returns the stored value, an unset NULL: both succeed.
  bool unset = !c.empty() && c.back() == '=';
  *ierror = (v != nullptr || unset) ? SCR_SUCCESS : SCR_FAILURE;
  Out(v ? v : "", val, val_len);
}

void scr_get_version_(char* version, int* ierror, size_t version_len) {
  *ierror = Out(SCR_Get_version(), version, version_len) ? SCR_SUCCESS : SCR_FAILURE;
}

void scr_should_exit_(int* flag, int* ierror) { *ierror = SCR_Should_exit(flag); }

void scr_route_file_(const char* name, char* file, int* ierror, size_t name_len, size_t file_len) {
  char buf[SCR_MAX_FILENAME];
  std::string n = In(name, name_len);
  *ierror = Routed(SCR_Route_file(n.c_str(), buf), buf, file, file_len);
}

void scr_have_restart_(int* flag, char* name, int* ierror, size_t name_len) {
  char buf[SCR_MAX_FILENAME] = "";
  *ierror = Routed(SCR_Have_restart(flag, buf), buf, name, name_len);
}

void scr_start_restart_(char* name, int* ierror, size_t name_len) {
  char buf[SCR_MAX_FILENAME] = "";
  *ierror = Routed(SCR_Start_restart(buf), buf, name, name_len);
}

void scr_complete_restart_(int* valid, int* ierror) { *ierror = SCR_Complete_restart(*valid); }
void scr_need_checkpoint_(int* flag, int* ierror) { *ierror = SCR_Need_checkpoint(flag); }
void scr_start_checkpoint_(int* ierror) { *ierror = SCR_Start_checkpoint(); }
void scr_complete_checkpoint_(int* valid, int* ierror) { *ierror = SCR_Complete_checkpoint(*valid); }

void scr_start_output_(const char* name, int* flags, int* ierror, size_t name_len) {
  std::string n = In(name, name_len);
  *ierror = SCR_Start_output(n.empty() ? nullptr : n.c_str(), *flags);
}

void scr_complete_output_(int* valid, int* ierror) { *ierror = SCR_Complete_output(*valid); }

void scr_current_(const char* name, int* ierror, size_t name_len) {
  *ierror = SCR_Current(In(name, name_len).c_str());
}
void scr_drop_(const char* name, int* ierror, size_t name_len) {
  *ierror = SCR_Drop(In(name, name_len).c_str());
}
void scr_delete_(const char* name, int* ierror, size_t name_len) {
  *ierror = SCR_Delete(In(name, name_len).c_str());
}

}  // extern "C"
